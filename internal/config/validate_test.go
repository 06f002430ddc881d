package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func multi(names ...string) []MultipleStandardLoadBalancerConfiguration {
	out := make([]MultipleStandardLoadBalancerConfiguration, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	return out
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings of the error; none: valid
	}{
		{"base is valid", func(*Config) {}, nil},
		{"subscriptionId required", func(c *Config) { c.SubscriptionID = "" }, []string{"subscriptionId: required"}},
		{"resourceGroup required", func(c *Config) { c.ResourceGroup = " " }, []string{"resourceGroup: required"}},
		{"location required", func(c *Config) { c.Location = "" }, []string{"location: required"}},
		{"unknown cloud", func(c *Config) { c.Cloud = "MarsCloud" }, []string{`cloud: unknown cloud "MarsCloud"`, "resourceManagerEndpoint"}},
		{"custom cloud with endpoint", func(c *Config) { c.Cloud = "MarsCloud"; c.ResourceManagerEndpoint = "https://arm.mars" }, nil},
		{"cloud any case", func(c *Config) { c.Cloud = "azurechinacloud" }, nil},
		{"bad sku", func(c *Config) { c.LoadBalancerSKU = "premium" }, []string{`loadBalancerSku: must be one of basic, standard, service; got "premium"`}},
		{"sku any case", func(c *Config) { c.LoadBalancerSKU = "BASIC" }, nil},
		{"user agent", func(c *Config) { c.UserAgent = "azlb/replica-1 (pod azlb-7d9f)" }, nil},
		{"user agent with a newline", func(c *Config) { c.UserAgent = "a\nX-Injected: 1" }, []string{"userAgent: must be printable ASCII"}},
		{"user agent padded", func(c *Config) { c.UserAgent = " a" }, []string{"userAgent: must not start or end with a space"}},
		{"user agent too long", func(c *Config) { c.UserAgent = strings.Repeat("a", 257) }, []string{"userAgent: must be at most 256 characters"}},
		{"bad pool type", func(c *Config) { c.LoadBalancerBackendPoolConfigurationType = "vmIP" }, []string{"loadBalancerBackendPoolConfigurationType: must be one of nodeIPConfiguration, nodeIP, podIP"}},
		{"podIP alone", func(c *Config) { c.LoadBalancerBackendPoolConfigurationType = "podIP" }, []string{sgwTriple(false, "podIP", "standard")}},
		{"service SKU alone", func(c *Config) { c.LoadBalancerSKU = "Service" }, []string{sgwTriple(false, BackendPoolNodeIP, "service")}},
		{"serviceGatewayEnabled alone", func(c *Config) { c.ServiceGatewayEnabled = true }, []string{sgwTriple(true, BackendPoolNodeIP, "standard")}},
		// Unset, the pool type defaults to NIC-based pools, which is not the
		// pod-based triple either.
		{"serviceGatewayEnabled with the default pool type", func(c *Config) {
			c.ServiceGatewayEnabled = true
			c.LoadBalancerSKU = "service"
			c.LoadBalancerBackendPoolConfigurationType = ""
		}, []string{sgwTriple(true, DefaultBackendPoolConfigurationType, "service")}},
		{"serviceGatewayEnabled and podIP without the SKU", func(c *Config) {
			c.ServiceGatewayEnabled = true
			c.LoadBalancerBackendPoolConfigurationType = "podIP"
		}, []string{sgwTriple(true, "podIP", "standard")}},
		{"podIP and SKU without serviceGatewayEnabled", func(c *Config) {
			c.LoadBalancerSKU = "service"
			c.LoadBalancerBackendPoolConfigurationType = "PODIP"
		}, []string{sgwTriple(false, "podIP", "service")}},
		{"service gateway triple", func(c *Config) {
			c.VnetName = "vnet"
			c.LoadBalancerBackendPoolConfigurationType = "podIP"
			c.LoadBalancerSKU = "service"
			c.ServiceGatewayEnabled = true
		}, nil},
		{"service gateway needs vnetName", func(c *Config) {
			c.LoadBalancerBackendPoolConfigurationType = "podIP"
			c.LoadBalancerSKU = "service"
			c.ServiceGatewayEnabled = true
			c.VnetName = ""
		}, []string{"vnetName: required with serviceGatewayEnabled"}},
		{"multi SLB valid", func(c *Config) { c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes", "lb-2") }, nil},
		{"multi SLB default name case-insensitive", func(c *Config) { c.MultipleStandardLoadBalancerConfigurations = multi("Kubernetes") }, nil},
		{"multi SLB named after loadBalancerName", func(c *Config) {
			c.LoadBalancerName = "edge"
			c.MultipleStandardLoadBalancerConfigurations = multi("edge", "lb-2")
		}, nil},
		{"multi SLB with service gateway", func(c *Config) {
			c.VnetName = "vnet"
			c.ServiceGatewayEnabled = true
			c.LoadBalancerBackendPoolConfigurationType = "podIP"
			c.LoadBalancerSKU = "service"
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
		}, []string{"serviceGatewayEnabled: cannot be combined with multipleStandardLoadBalancerConfigurations"}},
		{"multi SLB needs standard", func(c *Config) {
			c.LoadBalancerSKU = "basic"
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
		}, []string{`loadBalancerSku: must be standard when multipleStandardLoadBalancerConfigurations is set; got "basic"`}},
		{"multi SLB rejects nodeIPConfiguration", func(c *Config) {
			c.LoadBalancerBackendPoolConfigurationType = "nodeIPConfiguration"
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
		}, []string{`loadBalancerBackendPoolConfigurationType: must be nodeIP when multipleStandardLoadBalancerConfigurations is set; got "nodeIPConfiguration"`}},
		{"multi SLB with the default pool type", func(c *Config) {
			c.LoadBalancerBackendPoolConfigurationType = ""
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
		}, []string{"loadBalancerBackendPoolConfigurationType: must be nodeIP when multipleStandardLoadBalancerConfigurations is set; unset, it defaults to nodeIPConfiguration"}},
		{"NIC-based pools need no virtual network", func(c *Config) {
			c.LoadBalancerBackendPoolConfigurationType = "nodeipconfiguration"
			c.VnetName = ""
		}, nil},
		{"batch size negative", func(c *Config) { c.PutVMSSVMBatchSize = -1 }, []string{"putVMSSVMBatchSize: must not be negative"}},
		{"VM cache TTL negative", func(c *Config) { c.VMCacheTTLInSeconds = -1 }, []string{"vmCacheTTLInSeconds: must not be negative"}},
		{"multi SLB needs cluster entry", func(c *Config) {
			c.ClusterName = "prod"
			c.MultipleStandardLoadBalancerConfigurations = multi("lb-1", "lb-2")
		}, []string{`multipleStandardLoadBalancerConfigurations: no configuration named after the cluster ("prod"`}},
		{"multi SLB duplicate name", func(c *Config) { c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes", "lb-2", "LB-2") },
			[]string{`multipleStandardLoadBalancerConfigurations[2].name: duplicate "LB-2"`}},
		{"multi SLB empty name", func(c *Config) { c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes", "") },
			[]string{"multipleStandardLoadBalancerConfigurations[1].name: required"}},
		{"multi SLB internal suffix", func(c *Config) { c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes", "lb-internal") },
			[]string{`multipleStandardLoadBalancerConfigurations[1].name: "lb-internal" must not end in "-internal"`}},
		{"multi SLB duplicate primaryVMSet", func(c *Config) {
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes", "lb-2", "lb-3")
			c.MultipleStandardLoadBalancerConfigurations[1].PrimaryVMSet = "vmss-1"
			c.MultipleStandardLoadBalancerConfigurations[2].PrimaryVMSet = "VMSS-1"
		}, []string{`multipleStandardLoadBalancerConfigurations[2].primaryVMSet: duplicate "VMSS-1"`}},
		{"multi SLB bad label selector", func(c *Config) {
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes", "lb-2")
			c.MultipleStandardLoadBalancerConfigurations[1].ServiceLabelSelector = &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near", Values: []string{"x"}}}}
		}, []string{`multipleStandardLoadBalancerConfigurations[1].serviceLabelSelector.matchExpressions[0]: "Near" is not a valid label selector operator`}},
		{"multi SLB bad node selector label", func(c *Config) {
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
			c.MultipleStandardLoadBalancerConfigurations[0].NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}
		}, []string{`multipleStandardLoadBalancerConfigurations[0].nodeSelector.matchLabels["bad key!"]:`, "name part must consist of alphanumeric characters"}},
		{"multi SLB bad namespace selector", func(c *Config) {
			c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
			c.MultipleStandardLoadBalancerConfigurations[0].ServiceNamespaceSelector = &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
		}, []string{"multipleStandardLoadBalancerConfigurations[0].serviceNamespaceSelector.matchExpressions[0]:", "values"}},
		{"interval negative", func(c *Config) { c.LoadBalancerBackendPoolUpdateIntervalInSeconds = -1 }, []string{"loadBalancerBackendPoolUpdateIntervalInSeconds: must be greater than 0"}},
		{"cache TTL negative", func(c *Config) { c.LoadBalancerCacheTTLInSeconds = -5 }, []string{"loadBalancerCacheTTLInSeconds: must not be negative"}},
		{"drift interval negative", func(c *Config) { c.DriftRepairIntervalInSeconds = ptr(-1) }, []string{"driftRepairIntervalInSeconds: must be 0 (off) or at least 10"}},
		{"drift interval too short", func(c *Config) { c.DriftRepairIntervalInSeconds = ptr(5) }, []string{"driftRepairIntervalInSeconds: must be 0 (off) or at least 10"}},
		{"drift interval off", func(c *Config) { c.DriftRepairIntervalInSeconds = ptr(0) }, nil},
		{"rule count negative", func(c *Config) { c.MaximumLoadBalancerRuleCount = -1 }, []string{"maximumLoadBalancerRuleCount: must be greater than 0"}},
		{"bad probe mode", func(c *Config) { c.ClusterServiceLoadBalancerHealthProbeMode = "tcp" }, []string{"clusterServiceLoadBalancerHealthProbeMode: must be one of servicenodeport, shared"}},
		{"probe port too large", func(c *Config) { c.ClusterServiceSharedLoadBalancerHealthProbePort = 65536 }, []string{"clusterServiceSharedLoadBalancerHealthProbePort: must be between 1 and 65535"}},
		{"probe port negative", func(c *Config) { c.ClusterServiceSharedLoadBalancerHealthProbePort = -1 }, []string{"clusterServiceSharedLoadBalancerHealthProbePort: must be between 1 and 65535"}},
		{"probe port max", func(c *Config) { c.ClusterServiceSharedLoadBalancerHealthProbePort = 65535 }, nil},
		{"probe path relative", func(c *Config) { c.ClusterServiceSharedLoadBalancerHealthProbePath = "healthz" }, []string{`clusterServiceSharedLoadBalancerHealthProbePath: must start with "/"`}},
		{"rate limit QPS negative", func(c *Config) { c.CloudProviderRateLimitQPS = -1 }, []string{"cloudProviderRateLimitQPS: must be a finite number, not negative"}},
		{"rate limit bucket negative", func(c *Config) { c.CloudProviderRateLimitBucketWrite = -1 }, []string{"cloudProviderRateLimitBucketWrite: must not be negative"}},
		{"stanza QPS negative", func(c *Config) { c.PublicIPAddressRateLimit = &RateLimitConfig{CloudProviderRateLimitQPSWrite: -2} },
			[]string{"publicIPAddressRateLimit.cloudProviderRateLimitQPSWrite: must be a finite number, not negative"}},
		{"stanza bucket negative", func(c *Config) { c.ServiceGatewayRateLimit = &RateLimitConfig{CloudProviderRateLimitBucket: -2} },
			[]string{"serviceGatewayRateLimit.cloudProviderRateLimitBucket: must not be negative"}},
		{"backoff retries negative", func(c *Config) { c.CloudProviderBackoffRetries = -1 }, []string{"cloudProviderBackoffRetries: must not be negative"}},
		{"backoff duration negative", func(c *Config) { c.CloudProviderBackoffDuration = -1 }, []string{"cloudProviderBackoffDuration: must not be negative"}},
		{"backoff exponent negative", func(c *Config) { c.CloudProviderBackoffExponent = -1 }, []string{"cloudProviderBackoffExponent: must be a finite number"}},
		{"backoff jitter negative", func(c *Config) { c.CloudProviderBackoffJitter = -0.5 }, []string{"cloudProviderBackoffJitter: must be a finite number"}},
		{"ARM endpoint http", func(c *Config) { c.ResourceManagerEndpoint = "http://management.example.com/" }, []string{"resourceManagerEndpoint: must be an absolute https URL", `got "http://management.example.com/"`}},
		{"ARM endpoint relative", func(c *Config) { c.ResourceManagerEndpoint = "/arm" }, []string{"resourceManagerEndpoint: must be an absolute https URL"}},
		{"ARM endpoint no host", func(c *Config) { c.ResourceManagerEndpoint = "https://" }, []string{"resourceManagerEndpoint: must be an absolute https URL"}},
		{"ARM endpoint ftp", func(c *Config) { c.ResourceManagerEndpoint = "ftp://arm.example.com" }, []string{"resourceManagerEndpoint: must be an absolute https URL"}},
		{"ARM endpoint user info", func(c *Config) { c.ResourceManagerEndpoint = "https://user:" + testSecret + "@arm.example.com" }, []string{"resourceManagerEndpoint: must not contain user information"}},
		{"ARM endpoint unparsable", func(c *Config) { c.ResourceManagerEndpoint = "https://[::1" }, []string{"resourceManagerEndpoint: must be an absolute https URL"}},
		{"ARM endpoint https", func(c *Config) { c.ResourceManagerEndpoint = "https://management.azure.com/" }, nil},
		{"ARM endpoint http localhost", func(c *Config) { c.ResourceManagerEndpoint = "http://localhost:8080" }, nil},
		{"ARM endpoint http 127.0.0.1", func(c *Config) { c.ResourceManagerEndpoint = "http://127.0.0.1:8080/" }, nil},
		{"ARM endpoint http [::1]", func(c *Config) { c.ResourceManagerEndpoint = "http://[::1]:8080/" }, nil},
		{"ARM endpoint http 127.0.0.2", func(c *Config) { c.ResourceManagerEndpoint = "http://127.0.0.2/" }, []string{"resourceManagerEndpoint: must be an absolute https URL"}},
		{"AAD host http", func(c *Config) { c.ActiveDirectoryAuthorityHost = "http://login.example.com/" }, []string{"activeDirectoryAuthorityHost: must be an absolute https URL"}},
		{"AAD host https", func(c *Config) { c.ActiveDirectoryAuthorityHost = "https://login.microsoftonline.com/" }, nil},
		{"CA file present", func(c *Config) { c.CACertFile = "testdata/ca.pem" }, nil},
		{"CA file missing", func(c *Config) { c.CACertFile = "testdata/nope.pem" }, []string{"caCertFile: cannot read", "nope.pem"}},
		{"CA file not PEM", func(c *Config) { c.CACertFile = "testdata/single-slb.json" }, []string{`caCertFile: "testdata/single-slb.json" holds no PEM certificate`}},
		{"CA file directory", func(c *Config) { c.CACertFile = "testdata" }, []string{`caCertFile: "testdata" is not a regular file`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			assertErrorContains(t, err, tt.want...)
			if len(fieldErrors(err)) == 0 {
				t.Errorf("no *FieldError in %v", err)
			}
		})
	}
}

// sgwTriple is the one error naming all three pod-based settings.
func sgwTriple(enabled bool, pool, sku string) string {
	return fmt.Sprintf("%s: pod-based backend pools need all three together (serviceGatewayEnabled: true, loadBalancerBackendPoolConfigurationType: podIP, loadBalancerSku: service) and none of them otherwise; got serviceGatewayEnabled: %t, loadBalancerBackendPoolConfigurationType: %q, loadBalancerSku: %q",
		serviceGatewayFields, enabled, pool, sku)
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Config{
		LoadBalancerSKU: "premium",
		MultipleStandardLoadBalancerConfigurations:      multi("a", "a", ""),
		ClusterServiceSharedLoadBalancerHealthProbePath: "x",
	}
	err := c.Validate()
	var fields []string
	for _, fe := range fieldErrors(err) {
		fields = append(fields, fe.Field)
	}
	want := []string{
		"subscriptionId", "resourceGroup", "location", "aadClientSecret", "loadBalancerSku",
		"loadBalancerSku",                          // also: must be standard for multiple SLBs
		"loadBalancerBackendPoolConfigurationType", // the default (NIC-based) is not for multiple SLBs
		"multipleStandardLoadBalancerConfigurations[1].name",
		"multipleStandardLoadBalancerConfigurations[2].name",
		"multipleStandardLoadBalancerConfigurations",
		"clusterServiceSharedLoadBalancerHealthProbePath",
	}
	if !slices.Equal(fields, want) {
		t.Errorf("fields =\n%q\nwant\n%q\nerr: %v", fields, want, err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "subscriptionId" {
		t.Errorf("errors.As: %v", fe)
	}
}

func TestValidateRateLimitReportedOnce(t *testing.T) {
	c := baseConfig()
	c.CloudProviderRateLimitQPS = -1 // would be inherited by QPSWrite and stanzas
	c.LoadBalancerRateLimit = &RateLimitConfig{CloudProviderRateLimit: true}
	fes := fieldErrors(c.Validate())
	if len(fes) != 1 || fes[0].Field != "cloudProviderRateLimitQPS" {
		t.Errorf("errors = %v", fes)
	}
}

func TestValidateDoesNotModify(t *testing.T) {
	c := baseConfig()
	c.LoadBalancerSKU = "Standard"
	c.LoadBalancerRateLimit = &RateLimitConfig{CloudProviderRateLimitQPS: 2}
	c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
	before := c
	before.LoadBalancerRateLimit = ptr(*c.LoadBalancerRateLimit)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("Validate modified the config:\n%+v\n%+v", before, c)
	}
	if err := (*Config)(nil).Validate(); err == nil {
		t.Error("nil config validated")
	}
}

func TestValidateSelectorErrorsStable(t *testing.T) {
	c := baseConfig()
	c.MultipleStandardLoadBalancerConfigurations = multi("kubernetes")
	c.MultipleStandardLoadBalancerConfigurations[0].NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{
		"z!": "1", "a!": "2", "m!": "3", "ok": "fine", "b!": "4", "y!": "5",
	}}
	first := c.Validate().Error()
	for range 20 {
		if got := c.Validate().Error(); got != first {
			t.Fatalf("error text varies:\n%s\n%s", first, got)
		}
	}
	var fields []string
	for _, fe := range fieldErrors(c.Validate()) {
		fields = append(fields, fe.Field)
	}
	p := `multipleStandardLoadBalancerConfigurations[0].nodeSelector.matchLabels`
	want := []string{p + `["a!"]`, p + `["b!"]`, p + `["m!"]`, p + `["y!"]`, p + `["z!"]`}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %q", fields)
	}
}

func TestValidateCACertFileLimits(t *testing.T) {
	dir := t.TempDir()
	keyOnly := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(keyOnly, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.pem")
	if err := os.WriteFile(big, make([]byte, maxCACertFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{keyOnly: "holds no PEM certificate", big: "is larger than"} {
		c := baseConfig()
		c.CACertFile = path
		assertErrorContains(t, c.Validate(), "caCertFile: ", want)
	}
}

// Any one or two of the pod-based settings without the rest is exactly one
// error, and it names all three, whether the pool type is otherwise nodeIP
// or unset (the NIC-based default).
func TestValidateServiceGatewayTripleIsOneError(t *testing.T) {
	for _, otherPool := range []string{BackendPoolNodeIP, ""} {
		for mask := 1; mask < 7; mask++ {
			c := baseConfig()
			c.VnetName = "vnet"
			c.LoadBalancerBackendPoolConfigurationType = otherPool
			c.ServiceGatewayEnabled = mask&1 != 0
			if mask&2 != 0 {
				c.LoadBalancerBackendPoolConfigurationType = "podIP"
			}
			if mask&4 != 0 {
				c.LoadBalancerSKU = "service"
			}
			fes := fieldErrors(c.Validate())
			if len(fes) != 1 || fes[0].Field != serviceGatewayFields {
				t.Errorf("pool %q, mask %03b: got %v, want one error on %q", otherPool, mask, fes, serviceGatewayFields)
			}
		}
	}
	c := baseConfig()
	c.ServiceGatewayEnabled, c.LoadBalancerBackendPoolConfigurationType, c.LoadBalancerSKU = true, "podip", "SERVICE"
	c.VnetName = "vnet"
	if err := c.Validate(); err != nil {
		t.Fatalf("the full triple (any case) is valid: %v", err)
	}
	if !c.PodIPMode() {
		t.Error("PodIPMode() = false with the triple set")
	}
	// Defaulting keeps podIP (the NIC-based default only fills an unset
	// type).
	c.SetDefaults()
	if c.LoadBalancerBackendPoolConfigurationType != BackendPoolPodIP || c.LoadBalancerSKU != LoadBalancerSKUService {
		t.Errorf("SetDefaults changed the triple: pool %q, sku %q", c.LoadBalancerBackendPoolConfigurationType, c.LoadBalancerSKU)
	}
}

// loadBalancerSku basic loads (tools read the file of a Basic cluster) but
// the controller refuses it, saying why and how to migrate.
func TestCheckControllerRefusesBasic(t *testing.T) {
	for _, sku := range []string{"basic", "Basic", "BASIC"} {
		c := mustLoad(t, []byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"eastus","useManagedIdentityExtension":true,"loadBalancerSku":"`+sku+`"}`))
		err := c.CheckController()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "loadBalancerSku" {
			t.Fatalf("%s: %v, want a loadBalancerSku error", sku, err)
		}
		for _, want := range []string{"retired by Azure on 2025-09-30", "set loadBalancerSku to standard and restart azlb-controller-manager", "keeps each Service's IP", "docs/migration.md"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error lacks %q: %v", sku, want, err)
			}
		}
	}
	for _, sku := range []string{"", "standard", "Standard"} {
		c := baseConfig()
		c.LoadBalancerSKU = sku
		if err := c.CheckController(); err != nil {
			t.Errorf("loadBalancerSku %q: %v", sku, err)
		}
	}
}
