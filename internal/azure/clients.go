package azure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/metrics"
)

// LoadBalancerClient reads and writes load balancers.
type LoadBalancerClient interface {
	Get(ctx context.Context, resourceGroup, name string) (*armnetwork.LoadBalancer, error)
	List(ctx context.Context, resourceGroup string) ([]*armnetwork.LoadBalancer, error)
	// CreateOrUpdate PUTs lb, with If-Match: etag when etag is non-empty, waits
	// for the long-running operation and returns the resulting resource.
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, lb armnetwork.LoadBalancer, etag string) (*armnetwork.LoadBalancer, error)
	Delete(ctx context.Context, resourceGroup, name string) error
}

// NetworkAPIVersion is the Microsoft.Network api-version of every call
// (armnetwork/v9's).
const NetworkAPIVersion = "2025-05-01"

// The module the backend pool client's own requests report in their
// User-Agent: the armnetwork module whose requests they reproduce.
const (
	armModule        = "armnetwork"
	armModuleVersion = "v9.0.0"
)

// BackendPoolClient reads and writes load balancer backend address pools.
type BackendPoolClient interface {
	Get(ctx context.Context, resourceGroup, loadBalancer, pool string) (*armnetwork.BackendAddressPool, error)
	List(ctx context.Context, resourceGroup, loadBalancer string) ([]*armnetwork.BackendAddressPool, error)
	CreateOrUpdate(ctx context.Context, resourceGroup, loadBalancer, pool string, p armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, error)
	Delete(ctx context.Context, resourceGroup, loadBalancer, pool string) error
}

// PublicIPClient reads and writes public IP addresses.
type PublicIPClient interface {
	Get(ctx context.Context, resourceGroup, name string) (*armnetwork.PublicIPAddress, error)
	List(ctx context.Context, resourceGroup string) ([]*armnetwork.PublicIPAddress, error)
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, pip armnetwork.PublicIPAddress, etag string) (*armnetwork.PublicIPAddress, error)
	Delete(ctx context.Context, resourceGroup, name string) error
}

// SubnetClient reads subnets.
type SubnetClient interface {
	Get(ctx context.Context, resourceGroup, vnet, subnet string) (*armnetwork.Subnet, error)
}

// DefaultPollFrequency is how often writes poll their long-running operation
// when ARM sends no Retry-After (azcore refuses less than 1s outside tests).
const DefaultPollFrequency = time.Second

// DefaultSource is the metrics source label when ClientOptions.Source is
// empty.
const DefaultSource = "azlb"

// ClientOptions tunes NewClients. The zero value is the production setup.
type ClientOptions struct {
	// Clock drives throttle gates, pacing waits, rate limiters and metric
	// durations. Default: the real clock.
	Clock clock.Clock
	// Transport replaces the HTTP transport of both ARM and AAD requests.
	// When set, caCertFile is not consulted and writes are fenced only per
	// attempt (fencePolicy), not per socket write. Default: armTransport,
	// trusting the system roots plus caCertFile.
	Transport policy.Transporter
	// Credential replaces the credential built from azure.json.
	Credential azcore.TokenCredential
	// PollFrequency is the LRO polling interval. Default DefaultPollFrequency.
	PollFrequency time.Duration
	// Source is the metrics "source" label. Default DefaultSource.
	Source string
	// RetryDelay, when non-zero, replaces the SDK retry policy's base delay
	// (tests make SDK retries fast with it). Production leaves it zero.
	RetryDelay time.Duration
}

// Clients is the set of ARM clients every controller uses. The clients share
// one set of throttle gates and pacers (reads, writes, deletes: ARM counts
// per subscription and principal); each has its own client-side token-bucket
// rate limiters. It is safe for concurrent use.
type Clients struct {
	LoadBalancer LoadBalancerClient
	BackendPool  BackendPoolClient
	PublicIP     PublicIPClient
	Subnet       SubnetClient
	// SecurityGroup writes the inbound rules of Services (one writer:
	// internal/securitygroup).
	SecurityGroup SecurityGroupClient
	// Compute and network interface clients (node lifecycle, NIC-based
	// pools).
	ScaleSet   ScaleSetClient
	ScaleSetVM ScaleSetVMClient
	VM         VMClient
	Interface  InterfaceClient
	// ServiceGateway is the client of pod-based backend pools.
	ServiceGateway ServiceGatewayClient
	// NatGateway writes the NAT gateways of egress identities (pod-based).
	NatGateway NatGatewayClient

	// subscriptionID holds the VMs, scale sets and NICs (the compute
	// clients); networkSubscriptionID the network resources
	// (config.NetworkSubscriptionID).
	subscriptionID, networkSubscriptionID string
	// cred gets tokens of tenantId (with the network tenant as an
	// auxiliary tenant across tenants), netCred of the network tenant (the
	// same credential within one tenant).
	cred, netCred azcore.TokenCredential
	// armOptions are the options of network clients; computeOptions of
	// compute clients, which carry the network tenant's token in the
	// auxiliary header across tenants.
	armOptions, computeOptions func(client string) *arm.ClientOptions
	ownTransport               *armTransport
	// fence is shared by the clients' pipelines and the write transport
	// (SetWriteFence).
	fence *fenceSlot
}

// String describes the clients without any credential material.
func (c *Clients) String() string {
	if c.networkSubscriptionID != c.subscriptionID {
		return fmt.Sprintf("azure.Clients{subscription: %s, network subscription: %s}", c.subscriptionID, c.networkSubscriptionID)
	}
	return fmt.Sprintf("azure.Clients{subscription: %s}", c.subscriptionID)
}

// SubscriptionID is the subscription of the compute clients (VMs, scale
// sets, NICs): subscriptionId.
func (c *Clients) SubscriptionID() string { return c.subscriptionID }

// NetworkSubscriptionID is the subscription of the network clients (load
// balancers, public IPs, the NSG, virtual networks, Private Link
// Services, ...): config.NetworkSubscriptionID.
func (c *Clients) NetworkSubscriptionID() string { return c.networkSubscriptionID }

// Credential is the token credential of the compute clients (tenantId),
// for building further compute clients (with ComputeARMClientOptions).
func (c *Clients) Credential() azcore.TokenCredential { return c.cred }

// NetworkCredential is the token credential of the network clients (the
// network tenant), for building further network clients (with
// ARMClientOptions) in NetworkSubscriptionID.
func (c *Clients) NetworkCredential() azcore.TokenCredential { return c.netCred }

// ARMClientOptions returns options for building another network client
// (armnetwork, in NetworkSubscriptionID with NetworkCredential) with the
// same cloud, transport, SDK retry policy, metrics and the shared
// throttle gates and pacing of that subscription and principal (logged
// under the name client). Client-side rate limiting is not included (it
// is applied by the methods of this package's clients).
func (c *Clients) ARMClientOptions(client string) *arm.ClientOptions { return c.armOptions(client) }

// ComputeARMClientOptions is ARMClientOptions for a compute client (in
// SubscriptionID with Credential): across tenants its requests also carry
// the network tenant's token (x-ms-authorization-auxiliary), which writes
// linking the network's subnet or pools need.
func (c *Clients) ComputeARMClientOptions(client string) *arm.ClientOptions {
	return c.computeOptions(client)
}

// Close releases idle connections of the HTTP client NewClients built (none
// when a Transport was injected).
func (c *Clients) Close() {
	if c.ownTransport != nil {
		c.ownTransport.CloseIdleConnections()
	}
}

// NewClients builds the ARM clients from azure.json settings: the cloud and
// endpoints, the credential, the SDK retry policy (cloudProviderBackoff*),
// the throttle gates and the client-side rate limits
// (cloudProviderRateLimit*, loadBalancerRateLimit, publicIPAddressRateLimit).
func NewClients(ctx context.Context, cfg *config.Config, opts ClientOptions) (*Clients, error) {
	if cfg == nil {
		return nil, errors.New("azure clients: nil config")
	}
	if cfg.SubscriptionID == "" {
		return nil, errors.New("azure clients: subscriptionId is required")
	}
	logger := klog.FromContext(ctx)
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	pollFrequency := opts.PollFrequency
	if pollFrequency <= 0 {
		pollFrequency = DefaultPollFrequency
	}
	source := opts.Source
	if source == "" {
		source = DefaultSource
	}
	cs, err := resolveCloud(cfg.AuthConfig)
	if err != nil {
		return nil, fmt.Errorf("azure clients: %w", err)
	}
	c := &Clients{subscriptionID: cfg.SubscriptionID, networkSubscriptionID: cfg.NetworkSubscriptionID(), fence: &fenceSlot{}}
	transport := opts.Transport
	if transport == nil {
		base, err := newBaseTransport(cfg.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("azure clients: %w", err)
		}
		c.ownTransport = newARMTransport(base, c.fence.allow)
		transport = c.ownTransport
	}
	coreOpts := azcore.ClientOptions{Cloud: cs.cloud, Transport: transport}
	c.cred, c.netCred = opts.Credential, opts.Credential
	if c.cred == nil {
		c.cred, c.netCred, err = newCredentials(logger, cfg, coreOpts, cs.disableInstanceDiscovery)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("azure clients: %w", err)
		}
	}
	var auxiliary []string
	if cfg.CrossTenantNetwork() {
		auxiliary = []string{cfg.NetworkTenantID()}
	}
	if cfg.CloudProviderBackoff && (cfg.CloudProviderBackoffExponent != 0 || cfg.CloudProviderBackoffJitter != 0) {
		logger.V(2).Info("cloudProviderBackoffExponent and cloudProviderBackoffJitter are not used; the Azure SDK retry policy uses its own exponential backoff and jitter")
	}
	retry := retryOptions(cfg.BackoffConfig, opts.RetryDelay)
	// ARM counts requests per subscription and principal: one set of
	// gates and pacers for each (the network clients' and the compute
	// clients' are one set when they share the subscription and tenant).
	limitsOf := map[[2]string]*armLimits{}
	limitsFor := func(sub, tenant string) *armLimits {
		k := [2]string{strings.ToLower(sub), strings.ToLower(tenant)}
		if limitsOf[k] == nil {
			limitsOf[k] = newARMLimits()
		}
		return limitsOf[k]
	}
	netLimits := limitsFor(cfg.NetworkSubscriptionID(), cfg.NetworkTenantID())
	computeLimits := limitsFor(cfg.SubscriptionID, cfg.TenantID)
	options := func(client, sub string, aux []string, limits *armLimits) *arm.ClientOptions {
		l := labels{subscriptionID: sub, source: source, metricPrefix: metricName(client)}
		o := &arm.ClientOptions{
			ClientOptions: coreOpts,
			// A controller must not register resource providers on the
			// subscription (the SDK's registration policy would, on a 409
			// MissingSubscriptionRegistration).
			DisableRPRegistration: true,
			AuxiliaryTenants:      aux,
		}
		o.Retry = retry
		o.Retry.StatusCodes = RetriableStatusCodes()
		o.Telemetry.ApplicationID = "azlb"
		o.PerCallPolicies = []policy.Policy{&callPolicy{userAgent: cfg.UserAgent}}
		o.PerRetryPolicies = []policy.Policy{
			newThrottlePolicy(client, clk, l, limits),
			&fencePolicy{fence: c.fence, labels: l}, // after every wait: see fencePolicy
			&metricsPolicy{clock: clk, labels: l},
		}
		return o
	}
	netSub := cfg.NetworkSubscriptionID()
	c.armOptions = func(client string) *arm.ClientOptions { return options(client, netSub, nil, netLimits) }
	c.computeOptions = func(client string) *arm.ClientOptions {
		return options(client, cfg.SubscriptionID, auxiliary, computeLimits)
	}
	secrets := credentialSecrets(cfg)
	baseIn := func(sub string) func(client string) *base {
		return func(client string) *base {
			return &base{
				client:        client,
				metricName:    metricName(client),
				limiter:       newRateLimiter(client, effectiveRateLimit(cfg, client), clk),
				pollFrequency: pollFrequency,
				apiLabels:     metrics.APIRequest{SubscriptionID: sub, Source: source},
				secrets:       secrets,
			}
		}
	}
	newBase := baseIn(netSub)

	// The load balancer and pool clients send their GETs and PUTs through
	// an arm.Client of the same options with azlb's codecs (codecclient.go).
	var lbRaw, poolRaw *arm.Client
	lb, err := armnetwork.NewLoadBalancersClient(netSub, c.netCred, c.armOptions(ClientLoadBalancer))
	if err == nil {
		lbRaw, err = arm.NewClient(armModule, armModuleVersion, c.netCred, c.armOptions(ClientLoadBalancer))
		c.LoadBalancer = &loadBalancerClient{base: newBase(ClientLoadBalancer), c: lb,
			codec: newCodecClient(lbRaw, netSub, sdkLBClient)}
	}
	if err == nil {
		var bp *armnetwork.LoadBalancerBackendAddressPoolsClient
		bp, err = armnetwork.NewLoadBalancerBackendAddressPoolsClient(netSub, c.netCred, c.armOptions(ClientBackendPool))
		if err == nil {
			poolRaw, err = arm.NewClient(armModule, armModuleVersion, c.netCred, c.armOptions(ClientBackendPool))
			c.BackendPool = &backendPoolClient{base: newBase(ClientBackendPool), c: bp,
				codec: newCodecClient(poolRaw, netSub, sdkPoolClient)}
		}
	}
	if err == nil {
		var pip *armnetwork.PublicIPAddressesClient
		pip, err = armnetwork.NewPublicIPAddressesClient(netSub, c.netCred, c.armOptions(ClientPublicIPAddress))
		c.PublicIP = &publicIPClient{base: newBase(ClientPublicIPAddress), c: pip}
	}
	if err == nil {
		var sn *armnetwork.SubnetsClient
		sn, err = armnetwork.NewSubnetsClient(netSub, c.netCred, c.armOptions(ClientSubnet))
		c.Subnet = &subnetClient{base: newBase(ClientSubnet), c: sn}
	}
	if err == nil {
		var nsg *armnetwork.SecurityGroupsClient
		nsg, err = armnetwork.NewSecurityGroupsClient(netSub, c.netCred, c.armOptions(ClientSecurityGroup))
		c.SecurityGroup = &securityGroupClient{base: newBase(ClientSecurityGroup), c: nsg}
	}
	if err == nil {
		var sg *armnetwork.ServiceGatewaysClient
		sg, err = armnetwork.NewServiceGatewaysClient(netSub, c.netCred, c.armOptions(ClientServiceGateway))
		c.ServiceGateway = &serviceGatewayClient{base: newBase(ClientServiceGateway), c: sg}
	}
	if err == nil {
		var ng *armnetwork.NatGatewaysClient
		ng, err = armnetwork.NewNatGatewaysClient(netSub, c.netCred, c.armOptions(ClientNatGateway))
		c.NatGateway = &natGatewayClient{base: newBase(ClientNatGateway), c: ng}
	}
	if err == nil {
		err = c.computeClients(cfg.SubscriptionID, baseIn(cfg.SubscriptionID))
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("azure clients: %w", redactError(err, secrets...))
	}
	logger.V(2).Info("Azure clients ready", "subscriptionID", cfg.SubscriptionID, "networkSubscriptionID", netSub,
		"crossTenant", cfg.CrossTenantNetwork(),
		"resourceManager", cs.cloud.Services[cloud.ResourceManager].Endpoint, "maxRetries", retry.MaxRetries, "source", source)
	return c, nil
}

// metricName is the request-label prefix of a client, e.g. "loadbalancer".
func metricName(client string) string {
	switch client {
	case ClientLoadBalancer:
		return "loadbalancer"
	case ClientBackendPool:
		return "backendpool"
	case ClientPublicIPAddress:
		return "publicip"
	case ClientSubnet:
		return "subnet"
	case ClientScaleSet:
		return "vmss"
	case ClientScaleSetVM:
		return "vmssvm"
	case ClientVM:
		return "vm"
	case ClientInterface:
		return "interface"
	case ClientServiceGateway:
		return "servicegateway"
	case ClientSecurityGroup:
		return "securitygroup"
	case ClientNatGateway:
		return "natgateway"
	}
	return client
}

// computeClients builds the scale set, scale set VM, VM and network
// interface clients.
func (c *Clients) computeClients(sub string, newBase func(string) *base) error {
	vmss, err := armcompute.NewVirtualMachineScaleSetsClient(sub, c.cred, c.computeOptions(ClientScaleSet))
	if err != nil {
		return err
	}
	c.ScaleSet = &scaleSetClient{base: newBase(ClientScaleSet), c: vmss}
	vmssVM, err := armcompute.NewVirtualMachineScaleSetVMsClient(sub, c.cred, c.computeOptions(ClientScaleSetVM))
	if err != nil {
		return err
	}
	c.ScaleSetVM = &scaleSetVMClient{base: newBase(ClientScaleSetVM), c: vmssVM}
	vms, err := armcompute.NewVirtualMachinesClient(sub, c.cred, c.computeOptions(ClientVM))
	if err != nil {
		return err
	}
	c.VM = &vmClient{base: newBase(ClientVM), c: vms}
	nics, err := armnetwork.NewInterfacesClient(sub, c.cred, c.computeOptions(ClientInterface))
	if err != nil {
		return err
	}
	c.Interface = &interfaceClient{base: newBase(ClientInterface), c: nics}
	return nil
}
