package config

import (
	"reflect"
	"testing"
	"time"
)

func TestSetDefaultsEmpty(t *testing.T) {
	var c Config
	c.ResourceGroup = "rg"
	c.SetDefaults()
	checks := []struct {
		name      string
		got, want any
	}{
		{"cloud", c.Cloud, "AzurePublicCloud"},
		{"clusterName", c.ClusterName, "kubernetes"},
		{"loadBalancerSku", c.LoadBalancerSKU, "standard"},
		{"backend pool type", c.LoadBalancerBackendPoolConfigurationType, "nodeIPConfiguration"},
		{"update interval", c.LoadBalancerBackendPoolUpdateIntervalInSeconds, 30},
		{"max retries", *c.LoadBalancerBackendPoolUpdateMaxRetries, 3},
		{"cache TTL", c.LoadBalancerCacheTTLInSeconds, 120},
		{"VM cache TTL", c.VMCacheTTLInSeconds, 300},
		{"max rule count", c.MaximumLoadBalancerRuleCount, 250},
		{"probe mode", c.ClusterServiceLoadBalancerHealthProbeMode, "servicenodeport"},
		{"probe port", c.ClusterServiceSharedLoadBalancerHealthProbePort, int32(10256)},
		{"probe path", c.ClusterServiceSharedLoadBalancerHealthProbePath, "/healthz"},
		{"backoff", c.BackoffConfig, BackoffConfig{CloudProviderBackoffRetries: 3, CloudProviderBackoffExponent: 1.5, CloudProviderBackoffDuration: 5, CloudProviderBackoffJitter: 1}},
		{"rate limit", c.RateLimitConfig, RateLimitConfig{CloudProviderRateLimitQPS: 1, CloudProviderRateLimitBucket: 5, CloudProviderRateLimitQPSWrite: 1, CloudProviderRateLimitBucketWrite: 5}},
		{"vnetResourceGroup", c.VnetResourceGroup, "rg"},
		{"loadBalancerResourceGroup", c.LoadBalancerResourceGroup, "rg"},
		{"securityGroupResourceGroup", c.SecurityGroupResourceGroup, "rg"},
		{"privateLinkServiceResourceGroup", c.PrivateLinkServiceResourceGroup, "rg"},
		{"admin state stays nil", c.EnableLoadBalancerAdminState, (*bool)(nil)},
		{"admin state enabled", c.AdminStateEnabled(), true},
		{"no per-client stanza invented", c.LoadBalancerRateLimit, (*RateLimitConfig)(nil)},
		{"drift pass every 5 minutes", c.DriftRepairInterval(), 300 * time.Second},
		{"cloudConfigType merge, as the Azure cloud provider", c.CloudConfigType, "merge"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestSetDefaultsKeepsExplicitValues(t *testing.T) {
	c := Config{
		ClusterName: "c", LoadBalancerSKU: "basic", LoadBalancerBackendPoolConfigurationType: "nodeIPConfiguration",
		LoadBalancerBackendPoolUpdateIntervalInSeconds: 5, LoadBalancerCacheTTLInSeconds: 7, MaximumLoadBalancerRuleCount: 9,
		ClusterServiceLoadBalancerHealthProbeMode: "shared", ClusterServiceSharedLoadBalancerHealthProbePort: 81,
		ClusterServiceSharedLoadBalancerHealthProbePath: "/ready", ResourceGroup: "rg", VnetResourceGroup: "vnet-rg",
		LoadBalancerResourceGroup: "lb-rg", VMCacheTTLInSeconds: 11, SecurityGroupResourceGroup: "nsg-rg",
		PrivateLinkServiceResourceGroup: "pls-rg", DriftRepairIntervalInSeconds: ptr(0), CloudConfigType: "file",
	}
	c.Cloud = "AzureChinaCloud"
	c.BackoffConfig = BackoffConfig{CloudProviderBackoffRetries: 1, CloudProviderBackoffExponent: 2, CloudProviderBackoffDuration: 3, CloudProviderBackoffJitter: 0.5}
	c.RateLimitConfig = RateLimitConfig{CloudProviderRateLimitQPS: 4, CloudProviderRateLimitBucket: 40, CloudProviderRateLimitQPSWrite: 2, CloudProviderRateLimitBucketWrite: 20}
	want := c
	want.LoadBalancerBackendPoolUpdateMaxRetries = ptr(3)
	c.SetDefaults()
	if !reflect.DeepEqual(c, want) {
		t.Errorf("explicit values changed:\n got %+v\nwant %+v", c, want)
	}
}

func TestSetDefaultsWriteLimitsFollowRead(t *testing.T) {
	c := Config{}
	c.CloudProviderRateLimitQPS = 8
	c.CloudProviderRateLimitBucket = 80
	c.SetDefaults()
	if c.CloudProviderRateLimitQPSWrite != 8 || c.CloudProviderRateLimitBucketWrite != 80 {
		t.Errorf("write limits = %v/%v, want the read ones 8/80", c.CloudProviderRateLimitQPSWrite, c.CloudProviderRateLimitBucketWrite)
	}
}

func TestSetDefaultsCanonicalSpelling(t *testing.T) {
	tests := []struct {
		field    string
		set      func(*Config, string)
		get      func(*Config) string
		in, want string
	}{
		{"sku", func(c *Config, v string) { c.LoadBalancerSKU = v }, func(c *Config) string { return c.LoadBalancerSKU }, "Standard", "standard"},
		{"sku", func(c *Config, v string) { c.LoadBalancerSKU = v }, func(c *Config) string { return c.LoadBalancerSKU }, "BASIC", "basic"},
		{"sku", func(c *Config, v string) { c.LoadBalancerSKU = v }, func(c *Config) string { return c.LoadBalancerSKU }, "Service", "service"},
		{"sku unknown kept", func(c *Config, v string) { c.LoadBalancerSKU = v }, func(c *Config) string { return c.LoadBalancerSKU }, "Premium", "Premium"},
		{"pool", func(c *Config, v string) { c.LoadBalancerBackendPoolConfigurationType = v }, func(c *Config) string { return c.LoadBalancerBackendPoolConfigurationType }, "NODEIP", "nodeIP"},
		{"pool", func(c *Config, v string) { c.LoadBalancerBackendPoolConfigurationType = v }, func(c *Config) string { return c.LoadBalancerBackendPoolConfigurationType }, "nodeipconfiguration", "nodeIPConfiguration"},
		{"pool", func(c *Config, v string) { c.LoadBalancerBackendPoolConfigurationType = v }, func(c *Config) string { return c.LoadBalancerBackendPoolConfigurationType }, "PodIP", "podIP"},
		{"probe mode", func(c *Config, v string) { c.ClusterServiceLoadBalancerHealthProbeMode = v }, func(c *Config) string { return c.ClusterServiceLoadBalancerHealthProbeMode }, "ServiceNodePort", "servicenodeport"},
		{"cloud", func(c *Config, v string) { c.Cloud = v }, func(c *Config) string { return c.Cloud }, "AZUREPUBLICCLOUD", "AzurePublicCloud"},
		{"cloud", func(c *Config, v string) { c.Cloud = v }, func(c *Config) string { return c.Cloud }, "azureusgovernmentcloud", "AzureUSGovernmentCloud"},
		{"cloud custom kept", func(c *Config, v string) { c.Cloud = v }, func(c *Config) string { return c.Cloud }, "MyStack", "MyStack"},
	}
	for _, tt := range tests {
		t.Run(tt.field+"/"+tt.in, func(t *testing.T) {
			var c Config
			tt.set(&c, tt.in)
			c.SetDefaults()
			if got := tt.get(&c); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBackendPoolUpdateMaxRetries(t *testing.T) {
	tests := []struct {
		name string
		in   *int
		want int
	}{
		{"unset", nil, 3},
		{"explicit zero", ptr(0), 0},
		{"negative", ptr(-2), 0},
		{"positive", ptr(7), 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{LoadBalancerBackendPoolUpdateMaxRetries: tt.in}
			if got := c.BackendPoolUpdateMaxRetries(); got != tt.want {
				t.Errorf("accessor = %d, want %d", got, tt.want)
			}
			var before int
			if tt.in != nil {
				before = *tt.in
			}
			c.SetDefaults()
			if c.LoadBalancerBackendPoolUpdateMaxRetries == nil || *c.LoadBalancerBackendPoolUpdateMaxRetries != tt.want {
				t.Errorf("after SetDefaults = %v, want %d", c.LoadBalancerBackendPoolUpdateMaxRetries, tt.want)
			}
			if tt.in != nil && *tt.in != before {
				t.Errorf("SetDefaults wrote through the caller's pointer: %d -> %d", before, *tt.in)
			}
		})
	}
}

func TestSetDefaultsIdempotent(t *testing.T) {
	c := baseConfig()
	c.LoadBalancerRateLimit = &RateLimitConfig{CloudProviderRateLimitQPS: 4}
	c.LoadBalancerBackendPoolUpdateMaxRetries = ptr(-1)
	c.SetDefaults()
	once := c
	once.LoadBalancerRateLimit = ptr(*c.LoadBalancerRateLimit)
	c.SetDefaults()
	if !reflect.DeepEqual(c, once) {
		t.Errorf("second SetDefaults changed the config:\n%+v\n%+v", once, c)
	}
	var nilConfig *Config
	nilConfig.SetDefaults() // must not panic
}

func TestSetDefaultsDoesNotModifyStanzaInPlace(t *testing.T) {
	stanza := &RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 4}
	c := Config{LoadBalancerRateLimit: stanza}
	c.SetDefaults()
	if *stanza != (RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 4}) {
		t.Errorf("caller's stanza modified: %+v", *stanza)
	}
	if c.LoadBalancerRateLimit.CloudProviderRateLimitBucket != 5 {
		t.Errorf("stanza not defaulted: %+v", *c.LoadBalancerRateLimit)
	}
}

func TestRateLimitFor(t *testing.T) {
	top := RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 3, CloudProviderRateLimitBucket: 30,
		CloudProviderRateLimitQPSWrite: 2, CloudProviderRateLimitBucketWrite: 20}
	tests := []struct {
		name   string
		stanza *RateLimitConfig
		client string
		want   RateLimitConfig
	}{
		{"no stanza: top level", nil, RateLimitClientLoadBalancer, top},
		{"unknown client: top level", &RateLimitConfig{CloudProviderRateLimitQPS: 9}, "virtualMachine", top},
		{"full stanza wins", &RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 9, CloudProviderRateLimitBucket: 90,
			CloudProviderRateLimitQPSWrite: 8, CloudProviderRateLimitBucketWrite: 80}, RateLimitClientLoadBalancer,
			RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 9, CloudProviderRateLimitBucket: 90,
				CloudProviderRateLimitQPSWrite: 8, CloudProviderRateLimitBucketWrite: 80}},
		{"unset numbers inherit", &RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPSWrite: 8}, RateLimitClientLoadBalancer,
			RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 3, CloudProviderRateLimitBucket: 30,
				CloudProviderRateLimitQPSWrite: 8, CloudProviderRateLimitBucketWrite: 20}},
		{"stanza without switch is disabled", &RateLimitConfig{CloudProviderRateLimitQPS: 9}, RateLimitClientLoadBalancer,
			RateLimitConfig{CloudProviderRateLimit: false, CloudProviderRateLimitQPS: 9, CloudProviderRateLimitBucket: 30,
				CloudProviderRateLimitQPSWrite: 2, CloudProviderRateLimitBucketWrite: 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, client := range []string{RateLimitClientLoadBalancer, RateLimitClientPublicIPAddress, RateLimitClientServiceGateway} {
				c := Config{RateLimitConfig: top}
				switch client {
				case RateLimitClientLoadBalancer:
					c.LoadBalancerRateLimit = tt.stanza
				case RateLimitClientPublicIPAddress:
					c.PublicIPAddressRateLimit = tt.stanza
				case RateLimitClientServiceGateway:
					c.ServiceGatewayRateLimit = tt.stanza
				}
				query := client
				if tt.client == "virtualMachine" {
					query = tt.client
				}
				if got := c.RateLimitFor(query); got != tt.want {
					t.Errorf("%s: RateLimitFor = %+v, want %+v", client, got, tt.want)
				}
				c.SetDefaults() // same answer after defaulting
				if got := c.RateLimitFor(query); got != tt.want {
					t.Errorf("%s after SetDefaults: RateLimitFor = %+v, want %+v", client, got, tt.want)
				}
			}
		})
	}
	// Without SetDefaults, RateLimitFor still applies the defaults.
	if got := (&Config{}).RateLimitFor(RateLimitClientLoadBalancer); got.CloudProviderRateLimitQPS != 1 || got.CloudProviderRateLimitBucketWrite != 5 {
		t.Errorf("defaults not applied: %+v", got)
	}
}

func TestAccessors(t *testing.T) {
	if !(&Config{}).AdminStateEnabled() || !(&Config{EnableLoadBalancerAdminState: ptr(true)}).AdminStateEnabled() ||
		(&Config{EnableLoadBalancerAdminState: ptr(false)}).AdminStateEnabled() {
		t.Error("AdminStateEnabled")
	}
	var m MultipleStandardLoadBalancerConfiguration
	if !m.ServicePlacementAllowed() {
		t.Error("ServicePlacementAllowed(nil) must be true")
	}
	m.AllowServicePlacement = ptr(false)
	if m.ServicePlacementAllowed() {
		t.Error("ServicePlacementAllowed(false)")
	}
	for _, tt := range []struct {
		lbName, cluster, want string
	}{{"", "", "kubernetes"}, {"", "prod", "prod"}, {"edge", "prod", "edge"}} {
		c := Config{LoadBalancerName: tt.lbName, ClusterName: tt.cluster}
		if got := c.DefaultLoadBalancerName(); got != tt.want {
			t.Errorf("DefaultLoadBalancerName(%q, %q) = %q, want %q", tt.lbName, tt.cluster, got, tt.want)
		}
	}
	if (&Config{}).UseMultipleStandardLoadBalancers() {
		t.Error("UseMultipleStandardLoadBalancers with no configs")
	}
	if !(&Config{MultipleStandardLoadBalancerConfigurations: []MultipleStandardLoadBalancerConfiguration{{Name: "a"}}}).UseMultipleStandardLoadBalancers() {
		t.Error("UseMultipleStandardLoadBalancers with one config")
	}
}
