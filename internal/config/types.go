package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Load balancer SKUs accepted in loadBalancerSku (compared case-insensitively).
const (
	LoadBalancerSKUBasic    = "basic"
	LoadBalancerSKUStandard = "standard"
	// LoadBalancerSKUService is the StandardV2 SKU used with pod-based
	// (ServiceGateway) backend pools.
	LoadBalancerSKUService = "service"
)

// Backend pool configuration types accepted in loadBalancerBackendPoolConfigurationType.
const (
	BackendPoolNodeIPConfiguration = "nodeIPConfiguration"
	BackendPoolNodeIP              = "nodeIP"
	BackendPoolPodIP               = "podIP"
)

// Cluster-service health probe modes accepted in clusterServiceLoadBalancerHealthProbeMode.
const (
	HealthProbeModeServiceNodePort = "servicenodeport"
	HealthProbeModeShared          = "shared"
)

// Defaults applied by Load.
const (
	DefaultCloud                                   = "AzurePublicCloud"
	DefaultClusterName                             = "kubernetes"
	DefaultLoadBalancerSKU                         = LoadBalancerSKUStandard
	DefaultBackendPoolConfigurationType            = BackendPoolNodeIPConfiguration
	DefaultLoadBalancerBackendPoolUpdateInterval   = 30
	DefaultLoadBalancerBackendPoolUpdateMaxRetries = 3
	DefaultLoadBalancerCacheTTLInSeconds           = 120
	// DefaultDriftRepairIntervalInSeconds is the period of the drift pass.
	DefaultDriftRepairIntervalInSeconds  = 300
	DefaultVMCacheTTLInSeconds           = 300
	DefaultMaximumLoadBalancerRuleCount  = 250
	DefaultClusterServiceSharedProbePort = 10256
	DefaultClusterServiceSharedProbePath = "/healthz"
	DefaultCloudProviderBackoffRetries   = 3
	DefaultCloudProviderBackoffExponent  = 1.5
	DefaultCloudProviderBackoffDuration  = 5
	DefaultCloudProviderBackoffJitter    = 1.0
	DefaultRateLimitQPS                  = 1.0
	DefaultRateLimitBucket               = 5
)

// Secret holds a credential. It never prints its value: String, GoString,
// every fmt verb and MarshalJSON all yield a redaction marker. Use Reveal to
// read it where the credential is actually needed.
type Secret string

// RateLimitConfig is one token-bucket rate limit stanza. The top-level
// cloudProviderRateLimit* fields form the default stanza; per-client stanzas
// such as loadBalancerRateLimit override it for one client.
type RateLimitConfig struct {
	// CloudProviderRateLimit enables the limiter. The legacy spelling
	// cloudProviderRatelimit is accepted too.
	CloudProviderRateLimit            bool    `json:"cloudProviderRateLimit,omitempty"`
	CloudProviderRateLimitQPS         float32 `json:"cloudProviderRateLimitQPS,omitempty"`
	CloudProviderRateLimitBucket      int     `json:"cloudProviderRateLimitBucket,omitempty"`
	CloudProviderRateLimitQPSWrite    float32 `json:"cloudProviderRateLimitQPSWrite,omitempty"`
	CloudProviderRateLimitBucketWrite int     `json:"cloudProviderRateLimitBucketWrite,omitempty"`
}

// BackoffConfig is the SDK retry policy override (cloudProviderBackoff*).
// Retries overrides the SDK's MaxRetries only when CloudProviderBackoff is
// true and CloudProviderBackoffRetries > 0.
type BackoffConfig struct {
	CloudProviderBackoff         bool    `json:"cloudProviderBackoff,omitempty"`
	CloudProviderBackoffRetries  int     `json:"cloudProviderBackoffRetries,omitempty"`
	CloudProviderBackoffExponent float64 `json:"cloudProviderBackoffExponent,omitempty"`
	// CloudProviderBackoffDuration is the base retry delay in seconds.
	CloudProviderBackoffDuration int     `json:"cloudProviderBackoffDuration,omitempty"`
	CloudProviderBackoffJitter   float64 `json:"cloudProviderBackoffJitter,omitempty"`
}

// AuthConfig holds the credentials azlb uses to reach ARM.
type AuthConfig struct {
	Cloud    string `json:"cloud,omitempty"`
	TenantID string `json:"tenantId,omitempty"`
	// ResourceManagerEndpoint overrides the ARM endpoint of the cloud
	// (custom cloud); this is how the emulator is reached.
	ResourceManagerEndpoint string `json:"resourceManagerEndpoint,omitempty"`
	// ActiveDirectoryAuthorityHost overrides the AAD authority host.
	ActiveDirectoryAuthorityHost string `json:"activeDirectoryAuthorityHost,omitempty"`
	// CACertFile is a PEM bundle trusted in addition to the system roots,
	// for ARM and AAD endpoints with a private CA (the emulator).
	CACertFile string `json:"caCertFile,omitempty"`

	AADClientID     string `json:"aadClientId,omitempty"`
	AADClientSecret Secret `json:"aadClientSecret,omitempty"`
	// AADClientCertPath is a client certificate of the service principal
	// (PEM, or PKCS#12 with AADClientCertPassword): certificate
	// authentication (AuthMethodClientCertificate, clientcert.go).
	AADClientCertPath                     string `json:"aadClientCertPath,omitempty"`
	AADClientCertPassword                 Secret `json:"aadClientCertPassword,omitempty"`
	UseManagedIdentityExtension           bool   `json:"useManagedIdentityExtension,omitempty"`
	UserAssignedIdentityID                string `json:"userAssignedIdentityID,omitempty"`
	UseFederatedWorkloadIdentityExtension bool   `json:"useFederatedWorkloadIdentityExtension,omitempty"`
	AADFederatedTokenFile                 string `json:"aadFederatedTokenFile,omitempty"`

	// NetworkResourceTenantID is the tenant of NetworkResourceSubscriptionID
	// when it is not TenantID: network calls then use tokens of that tenant,
	// and compute writes (which link network resources) carry one in the
	// x-ms-authorization-auxiliary header (network.go).
	NetworkResourceTenantID string `json:"networkResourceTenantID,omitempty"`
}

// MultipleStandardLoadBalancerConfiguration places Services and nodes on one
// of several Standard load balancers.
type MultipleStandardLoadBalancerConfiguration struct {
	// Name is the load balancer name; the internal one is <Name>-internal.
	Name string `json:"name"`
	// AllowServicePlacement: nil means true. False drains the LB of new
	// Services without moving existing ones.
	AllowServicePlacement    *bool                 `json:"allowServicePlacement,omitempty"`
	PrimaryVMSet             string                `json:"primaryVMSet,omitempty"`
	ServiceLabelSelector     *metav1.LabelSelector `json:"serviceLabelSelector,omitempty"`
	ServiceNamespaceSelector *metav1.LabelSelector `json:"serviceNamespaceSelector,omitempty"`
	NodeSelector             *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// Config is the parsed azure.json. Field names follow the upstream Azure
// cloud provider so existing files load unchanged.
type Config struct {
	AuthConfig
	RateLimitConfig
	BackoffConfig

	SubscriptionID string `json:"subscriptionId,omitempty"`
	// NetworkResourceSubscriptionID holds the network resources (load
	// balancers, public IPs, the NSG, the virtual network, Private Link
	// Services, ...) when they are not in SubscriptionID, which keeps the
	// VMs, scale sets and NICs (network.go).
	NetworkResourceSubscriptionID string `json:"networkResourceSubscriptionID,omitempty"`
	ResourceGroup                 string `json:"resourceGroup,omitempty"`
	Location                      string `json:"location,omitempty"`
	VnetName                      string `json:"vnetName,omitempty"`
	VnetResourceGroup             string `json:"vnetResourceGroup,omitempty"`
	SubnetName                    string `json:"subnetName,omitempty"`
	// SecurityGroupName names the network security group that azlb writes
	// the inbound rules of LoadBalancer Services into
	// (docs/security-groups.md); SecurityGroupResourceGroup is its resource
	// group (default: ResourceGroup).
	SecurityGroupName          string `json:"securityGroupName,omitempty"`
	SecurityGroupResourceGroup string `json:"securityGroupResourceGroup,omitempty"`

	// ClusterName names the default load balancer and the cluster backend
	// pool, and is the value of the cluster tag on owned public IPs. When
	// azure.json has none, the controller manager's --cluster-name names
	// the cluster (UseClusterNameFlag).
	ClusterName string `json:"clusterName,omitempty"`

	// Tags ("k1=v1,k2=v2") and TagsMap (merged over Tags) are put on every
	// load balancer, public IP and network security group azlb creates or
	// manages; SystemTags ("k1,k2") lists tag keys azlb never removes.
	// When SystemTags is set, azlb removes the other tags that are in
	// neither list (tags.go).
	Tags       string            `json:"tags,omitempty"`
	TagsMap    map[string]string `json:"tagsMap,omitempty"`
	SystemTags string            `json:"systemTags,omitempty"`

	// UserAgent, when set, starts the User-Agent of every ARM request
	// (before the SDK's own), so the requests of one replica can be told
	// apart in ARM's (or the emulator's) request log.
	UserAgent string `json:"userAgent,omitempty"`

	LoadBalancerSKU           string `json:"loadBalancerSku,omitempty"`
	LoadBalancerName          string `json:"loadBalancerName,omitempty"`
	LoadBalancerResourceGroup string `json:"loadBalancerResourceGroup,omitempty"`
	// PrivateLinkServiceResourceGroup is where the Private Link Services of
	// Services (annotation azure-pls-create) are created unless the
	// Service names one (azure-pls-resource-group); default: ResourceGroup
	// (docs/private-link.md).
	PrivateLinkServiceResourceGroup string `json:"privateLinkServiceResourceGroup,omitempty"`

	LoadBalancerBackendPoolConfigurationType       string `json:"loadBalancerBackendPoolConfigurationType,omitempty"`
	LoadBalancerBackendPoolUpdateIntervalInSeconds int    `json:"loadBalancerBackendPoolUpdateIntervalInSeconds,omitempty"`
	// LoadBalancerBackendPoolUpdateMaxRetries: nil -> 3, negative -> 0,
	// explicit 0 disables updater-level retry (and survives a round trip).
	LoadBalancerBackendPoolUpdateMaxRetries *int `json:"loadBalancerBackendPoolUpdateMaxRetries,omitempty"`

	MultipleStandardLoadBalancerConfigurations []MultipleStandardLoadBalancerConfiguration `json:"multipleStandardLoadBalancerConfigurations,omitempty"`

	ExcludeMasterFromStandardLB  *bool `json:"excludeMasterFromStandardLB,omitempty"`
	DisableOutboundSNAT          *bool `json:"disableOutboundSNAT,omitempty"`
	MaximumLoadBalancerRuleCount int   `json:"maximumLoadBalancerRuleCount,omitempty"`

	ClusterServiceLoadBalancerHealthProbeMode       string `json:"clusterServiceLoadBalancerHealthProbeMode,omitempty"`
	ClusterServiceSharedLoadBalancerHealthProbePort int32  `json:"clusterServiceSharedLoadBalancerHealthProbePort,omitempty"`
	ClusterServiceSharedLoadBalancerHealthProbePath string `json:"clusterServiceSharedLoadBalancerHealthProbePath,omitempty"`

	LoadBalancerCacheTTLInSeconds int `json:"loadBalancerCacheTTLInSeconds,omitempty"`
	// DriftRepairIntervalInSeconds is the period of the drift pass
	// (internal/drift): nil -> 300, explicit 0 disables it.
	DriftRepairIntervalInSeconds *int `json:"driftRepairIntervalInSeconds,omitempty"`
	// PutVMSSVMBatchSize is how many VMs of a scale set tagged
	// aks-managed-coordination join a NIC-based pool at once (0: one at a
	// time).
	PutVMSSVMBatchSize int `json:"putVMSSVMBatchSize,omitempty"`
	// VMCacheTTLInSeconds is how long VM and network interface listings
	// are reused for node metadata and NIC-based pool membership.
	VMCacheTTLInSeconds int `json:"vmCacheTTLInSeconds,omitempty"`

	// Per-client rate limit overrides. A nil stanza inherits the top-level
	// cloudProviderRateLimit* settings.
	LoadBalancerRateLimit    *RateLimitConfig `json:"loadBalancerRateLimit,omitempty"`
	PublicIPAddressRateLimit *RateLimitConfig `json:"publicIPAddressRateLimit,omitempty"`
	ServiceGatewayRateLimit  *RateLimitConfig `json:"serviceGatewayRateLimit,omitempty"`
	// Compute and network interface clients (node lifecycle, NIC-based
	// pools).
	VirtualMachineScaleSetRateLimit *RateLimitConfig `json:"virtualMachineScaleSetRateLimit,omitempty"`
	VirtualMachineRateLimit         *RateLimitConfig `json:"virtualMachineRateLimit,omitempty"`
	InterfaceRateLimit              *RateLimitConfig `json:"interfaceRateLimit,omitempty"`

	// EnableLoadBalancerAdminState toggles the admin-state controller
	// (taint-driven AdminState=Down). nil means enabled.
	EnableLoadBalancerAdminState *bool `json:"enableLoadBalancerAdminState,omitempty"`
	// LoadBalancerAdminStateTaints lists the taints, beyond the built-in
	// ones, that take a node's backend entries Down, as "key", "key=value",
	// "key:Effect" or "key=value:Effect". nil means the default (the
	// cluster autoscaler's and Karpenter's deletion taints); an empty list
	// adds none. Read it through AdminStateTaints (admintaints.go).
	LoadBalancerAdminStateTaints *[]string `json:"loadBalancerAdminStateTaints,omitempty"`
	// LoadBalancerBackendPoolDrainPeriodInSeconds is the drainPeriodInSeconds
	// of the backend pools azlb owns: nil means 30, 0 leaves it unset. Read it
	// through BackendPoolDrainPeriodInSeconds (admintaints.go).
	LoadBalancerBackendPoolDrainPeriodInSeconds *int `json:"loadBalancerBackendPoolDrainPeriodInSeconds,omitempty"`

	// ServiceGatewayEnabled turns on pod-based backend pools through the
	// ServiceGateway API. Required for podIP pools; incompatible with
	// multiple Standard load balancers.
	ServiceGatewayEnabled bool `json:"serviceGatewayEnabled,omitempty"`
	// ServiceGatewayUpdateServicesBatchSize is the most services one
	// updateServices call of the service gateway carries: 0 means
	// DefaultServiceGatewayUpdateServicesBatchSize, 1 one per call. Read it
	// through UpdateServicesBatchSize.
	ServiceGatewayUpdateServicesBatchSize int `json:"serviceGatewayUpdateServicesBatchSize,omitempty"`

	// CloudConfigType says whether the Secret kube-system/azure-cloud-provider
	// (key cloud-config) overrides this file: file (no), merge (the fields it
	// sets; the default) or secret (all of it). See layers.go and
	// internal/cloudconfig.
	CloudConfigType string `json:"cloudConfigType,omitempty"`

	// clusterNameDefaulted: SetDefaults filled ClusterName (azure.json had
	// none), so --cluster-name may name the cluster.
	clusterNameDefaulted bool

	// unknownFields holds the keys Load ignored; see UnknownFields.
	unknownFields []string
	unknownHints  map[string]string
	// extraWarnings are more lines of UnknownFieldWarnings: settings read
	// and ignored (cloudConfigType in the Secret, layers.go).
	extraWarnings []string
}
