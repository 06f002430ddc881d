package config

import (
	"strings"
	"time"
)

// Cloud names recognised in cloud (compared case-insensitively).
const (
	CloudAzurePublic       = "AzurePublicCloud"
	CloudAzureChina        = "AzureChinaCloud"
	CloudAzureUSGovernment = "AzureUSGovernmentCloud"
)

// Client names accepted by RateLimitFor, named after their azure.json stanza
// (<client>RateLimit).
const (
	RateLimitClientLoadBalancer    = "loadBalancer"
	RateLimitClientPublicIPAddress = "publicIPAddress"
	RateLimitClientServiceGateway  = "serviceGateway"
	RateLimitClientScaleSet        = "virtualMachineScaleSet"
	RateLimitClientVM              = "virtualMachine"
	RateLimitClientInterface       = "interface"
)

// DefaultClusterServiceLoadBalancerHealthProbeMode is used when
// clusterServiceLoadBalancerHealthProbeMode is empty.
const DefaultClusterServiceLoadBalancerHealthProbeMode = HealthProbeModeServiceNodePort

var (
	knownClouds       = []string{CloudAzurePublic, CloudAzureChina, CloudAzureUSGovernment}
	knownSKUs         = []string{LoadBalancerSKUBasic, LoadBalancerSKUStandard, LoadBalancerSKUService}
	knownPoolTypes    = []string{BackendPoolNodeIPConfiguration, BackendPoolNodeIP, BackendPoolPodIP}
	knownHealthProbes = []string{HealthProbeModeServiceNodePort, HealthProbeModeShared}
)

// canonical returns the entry of known equal to v ignoring case, or v itself.
func canonical(v string, known []string) string {
	for _, k := range known {
		if strings.EqualFold(v, k) {
			return k
		}
	}
	return v
}

// SetDefaults fills unset fields with their defaults and brings enumerated
// values (cloud, loadBalancerSku, loadBalancerBackendPoolConfigurationType,
// clusterServiceLoadBalancerHealthProbeMode) to their canonical spelling,
// e.g. "Standard" -> "standard". "Unset" means the zero value: 0, "" or nil.
// It is idempotent, and never writes through a pointer it did not allocate:
// pointer fields it changes are replaced, not modified in place.
//
// EnableLoadBalancerAdminState and AllowServicePlacement stay nil when unset;
// read them through AdminStateEnabled and ServicePlacementAllowed.
func (c *Config) SetDefaults() {
	if c == nil {
		return
	}
	c.Cloud = canonical(c.Cloud, knownClouds)
	if c.Cloud == "" {
		c.Cloud = DefaultCloud
	}
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
		c.clusterNameDefaulted = true
	}
	c.LoadBalancerSKU = canonical(c.LoadBalancerSKU, knownSKUs)
	if c.LoadBalancerSKU == "" {
		c.LoadBalancerSKU = DefaultLoadBalancerSKU
	}
	c.LoadBalancerBackendPoolConfigurationType = canonical(c.LoadBalancerBackendPoolConfigurationType, knownPoolTypes)
	if c.LoadBalancerBackendPoolConfigurationType == "" {
		c.LoadBalancerBackendPoolConfigurationType = DefaultBackendPoolConfigurationType
	}
	if c.LoadBalancerBackendPoolUpdateIntervalInSeconds == 0 {
		c.LoadBalancerBackendPoolUpdateIntervalInSeconds = DefaultLoadBalancerBackendPoolUpdateInterval
	}
	retries := c.BackendPoolUpdateMaxRetries()
	c.LoadBalancerBackendPoolUpdateMaxRetries = &retries
	if c.LoadBalancerCacheTTLInSeconds == 0 {
		c.LoadBalancerCacheTTLInSeconds = DefaultLoadBalancerCacheTTLInSeconds
	}
	if c.DriftRepairIntervalInSeconds == nil {
		c.DriftRepairIntervalInSeconds = ptrTo(DefaultDriftRepairIntervalInSeconds)
	}
	if c.VMCacheTTLInSeconds == 0 {
		c.VMCacheTTLInSeconds = DefaultVMCacheTTLInSeconds
	}
	if c.MaximumLoadBalancerRuleCount == 0 {
		c.MaximumLoadBalancerRuleCount = DefaultMaximumLoadBalancerRuleCount
	}
	c.CloudConfigType = canonical(c.CloudConfigType, knownCloudConfigTypes)
	if c.CloudConfigType == "" {
		c.CloudConfigType = DefaultCloudConfigType
	}
	c.ClusterServiceLoadBalancerHealthProbeMode = canonical(c.ClusterServiceLoadBalancerHealthProbeMode, knownHealthProbes)
	if c.ClusterServiceLoadBalancerHealthProbeMode == "" {
		c.ClusterServiceLoadBalancerHealthProbeMode = DefaultClusterServiceLoadBalancerHealthProbeMode
	}
	if c.ClusterServiceSharedLoadBalancerHealthProbePort == 0 {
		c.ClusterServiceSharedLoadBalancerHealthProbePort = DefaultClusterServiceSharedProbePort
	}
	if c.ClusterServiceSharedLoadBalancerHealthProbePath == "" {
		c.ClusterServiceSharedLoadBalancerHealthProbePath = DefaultClusterServiceSharedProbePath
	}
	c.BackoffConfig = defaultBackoff(c.BackoffConfig)
	c.RateLimitConfig = defaultRateLimit(c.RateLimitConfig)
	c.LoadBalancerRateLimit = inheritRateLimitPtr(c.LoadBalancerRateLimit, c.RateLimitConfig)
	c.PublicIPAddressRateLimit = inheritRateLimitPtr(c.PublicIPAddressRateLimit, c.RateLimitConfig)
	c.ServiceGatewayRateLimit = inheritRateLimitPtr(c.ServiceGatewayRateLimit, c.RateLimitConfig)
	c.VirtualMachineScaleSetRateLimit = inheritRateLimitPtr(c.VirtualMachineScaleSetRateLimit, c.RateLimitConfig)
	c.VirtualMachineRateLimit = inheritRateLimitPtr(c.VirtualMachineRateLimit, c.RateLimitConfig)
	c.InterfaceRateLimit = inheritRateLimitPtr(c.InterfaceRateLimit, c.RateLimitConfig)
	if c.VnetResourceGroup == "" {
		c.VnetResourceGroup = c.ResourceGroup
	}
	if c.SecurityGroupResourceGroup == "" {
		c.SecurityGroupResourceGroup = c.ResourceGroup
	}
	if c.LoadBalancerResourceGroup == "" {
		c.LoadBalancerResourceGroup = c.ResourceGroup
	}
	if c.PrivateLinkServiceResourceGroup == "" {
		c.PrivateLinkServiceResourceGroup = c.ResourceGroup
	}
}

func defaultBackoff(b BackoffConfig) BackoffConfig {
	if b.CloudProviderBackoffRetries == 0 {
		b.CloudProviderBackoffRetries = DefaultCloudProviderBackoffRetries
	}
	if b.CloudProviderBackoffExponent == 0 {
		b.CloudProviderBackoffExponent = DefaultCloudProviderBackoffExponent
	}
	if b.CloudProviderBackoffDuration == 0 {
		b.CloudProviderBackoffDuration = DefaultCloudProviderBackoffDuration
	}
	if b.CloudProviderBackoffJitter == 0 {
		b.CloudProviderBackoffJitter = DefaultCloudProviderBackoffJitter
	}
	return b
}

// defaultRateLimit fills the top-level stanza: QPS 1 and bucket 5 when unset,
// and the write limits from the read limits when unset.
func defaultRateLimit(r RateLimitConfig) RateLimitConfig {
	if r.CloudProviderRateLimitQPS == 0 {
		r.CloudProviderRateLimitQPS = DefaultRateLimitQPS
	}
	if r.CloudProviderRateLimitBucket == 0 {
		r.CloudProviderRateLimitBucket = DefaultRateLimitBucket
	}
	if r.CloudProviderRateLimitQPSWrite == 0 {
		r.CloudProviderRateLimitQPSWrite = r.CloudProviderRateLimitQPS
	}
	if r.CloudProviderRateLimitBucketWrite == 0 {
		r.CloudProviderRateLimitBucketWrite = r.CloudProviderRateLimitBucket
	}
	return r
}

// inheritRateLimit fills each unset (zero) number of a per-client stanza
// from the defaulted top-level stanza top. The on/off switch is not
// inherited: a stanza that is present decides for itself, so one that omits
// cloudProviderRateLimit (or sets it false) disables rate limiting for its
// client, as in the upstream Azure cloud provider.
func inheritRateLimit(s, top RateLimitConfig) RateLimitConfig {
	if s.CloudProviderRateLimitQPS == 0 {
		s.CloudProviderRateLimitQPS = top.CloudProviderRateLimitQPS
	}
	if s.CloudProviderRateLimitBucket == 0 {
		s.CloudProviderRateLimitBucket = top.CloudProviderRateLimitBucket
	}
	if s.CloudProviderRateLimitQPSWrite == 0 {
		s.CloudProviderRateLimitQPSWrite = top.CloudProviderRateLimitQPSWrite
	}
	if s.CloudProviderRateLimitBucketWrite == 0 {
		s.CloudProviderRateLimitBucketWrite = top.CloudProviderRateLimitBucketWrite
	}
	return s
}

func inheritRateLimitPtr(s *RateLimitConfig, top RateLimitConfig) *RateLimitConfig {
	if s == nil {
		return nil
	}
	v := inheritRateLimit(*s, top)
	return &v
}

// RateLimitFor returns the effective rate limit for one client
// (RateLimitClientLoadBalancer, RateLimitClientPublicIPAddress,
// RateLimitClientServiceGateway, RateLimitClientScaleSet, RateLimitClientVM,
// RateLimitClientInterface): its own stanza with unset numbers
// inherited from the top-level stanza, or the top-level stanza itself when
// the client has no stanza or the name is not one of those. The result has
// defaults applied whether or not SetDefaults was called.
func (c *Config) RateLimitFor(client string) RateLimitConfig {
	top := defaultRateLimit(c.RateLimitConfig)
	var s *RateLimitConfig
	switch client {
	case RateLimitClientLoadBalancer:
		s = c.LoadBalancerRateLimit
	case RateLimitClientPublicIPAddress:
		s = c.PublicIPAddressRateLimit
	case RateLimitClientServiceGateway:
		s = c.ServiceGatewayRateLimit
	case RateLimitClientScaleSet:
		s = c.VirtualMachineScaleSetRateLimit
	case RateLimitClientVM:
		s = c.VirtualMachineRateLimit
	case RateLimitClientInterface:
		s = c.InterfaceRateLimit
	}
	if s == nil {
		return top
	}
	return inheritRateLimit(*s, top)
}

// DriftRepairInterval is the period of the drift pass; 0 means off.
func (c *Config) DriftRepairInterval() time.Duration {
	if c.DriftRepairIntervalInSeconds == nil {
		return DefaultDriftRepairIntervalInSeconds * time.Second
	}
	return time.Duration(max(*c.DriftRepairIntervalInSeconds, 0)) * time.Second
}

func ptrTo[T any](v T) *T { return &v }

// BackendPoolUpdateMaxRetries is the effective
// loadBalancerBackendPoolUpdateMaxRetries: 3 when unset, 0 when negative,
// otherwise the value (an explicit 0 disables updater-level retry).
func (c *Config) BackendPoolUpdateMaxRetries() int {
	p := c.LoadBalancerBackendPoolUpdateMaxRetries
	switch {
	case p == nil:
		return DefaultLoadBalancerBackendPoolUpdateMaxRetries
	case *p < 0:
		return 0
	default:
		return *p
	}
}

// AdminStateEnabled reports whether the admin-state controller runs:
// enableLoadBalancerAdminState, true when unset.
func (c *Config) AdminStateEnabled() bool {
	return c.EnableLoadBalancerAdminState == nil || *c.EnableLoadBalancerAdminState
}

// ServicePlacementAllowed reports whether new Services may be placed on this
// load balancer: allowServicePlacement, true when unset.
func (m MultipleStandardLoadBalancerConfiguration) ServicePlacementAllowed() bool {
	return m.AllowServicePlacement == nil || *m.AllowServicePlacement
}

// DefaultLoadBalancerName is the name of the cluster's default (public) load
// balancer: loadBalancerName if set, else clusterName (else the default
// cluster name, for a Config on which SetDefaults has not run).
func (c *Config) DefaultLoadBalancerName() string {
	switch {
	case c.LoadBalancerName != "":
		return c.LoadBalancerName
	case c.ClusterName != "":
		return c.ClusterName
	default:
		return DefaultClusterName
	}
}

// UseMultipleStandardLoadBalancers reports whether
// multipleStandardLoadBalancerConfigurations has at least one entry.
func (c *Config) UseMultipleStandardLoadBalancers() bool {
	return len(c.MultipleStandardLoadBalancerConfigurations) > 0
}
