package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadExampleFiles(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, c *Config)
	}{
		{"testdata/single-slb.json", func(t *testing.T, c *Config) {
			if !c.CloudProviderRateLimit { // legacy key cloudProviderRatelimit
				t.Error("cloudProviderRatelimit did not set CloudProviderRateLimit")
			}
			if c.LoadBalancerSKU != LoadBalancerSKUStandard {
				t.Errorf("sku = %q, want normalised standard", c.LoadBalancerSKU)
			}
			if c.AuthMethod() != AuthMethodClientSecret || c.AADClientSecret.Reveal() != "Zq9-SINGLE-s3cr3t-value-7Hk" {
				t.Errorf("auth = %s", c.AuthMethod())
			}
			if c.VnetResourceGroup != "mc_rg_cluster_eastus" {
				t.Errorf("empty vnetResourceGroup not defaulted: %q", c.VnetResourceGroup)
			}
			if c.ExcludeMasterFromStandardLB == nil || !*c.ExcludeMasterFromStandardLB {
				t.Error("excludeMasterFromStandardLB lost")
			}
			want := []string{"cloudProviderBackoffMode", "primaryAvailabilitySetName", "primaryScaleSetName",
				"providerKeyName", "providerKeyVersion", "providerVaultName", "routeTableName", "useInstanceMetadata", "vmType"}
			if got := c.UnknownFields(); !slices.Equal(got, want) {
				t.Errorf("UnknownFields = %q, want %q", got, want)
			}
		}},
		{"testdata/multi-slb.json", func(t *testing.T, c *Config) {
			if !c.UseMultipleStandardLoadBalancers() || len(c.MultipleStandardLoadBalancerConfigurations) != 3 {
				t.Fatalf("multi SLB configs = %v", c.MultipleStandardLoadBalancerConfigurations)
			}
			lb2 := c.MultipleStandardLoadBalancerConfigurations[1]
			if lb2.ServicePlacementAllowed() || lb2.PrimaryVMSet != "vmss-1" || lb2.NodeSelector.MatchLabels["pool"] != "lb2" ||
				len(lb2.ServiceNamespaceSelector.MatchExpressions) != 1 {
				t.Errorf("lb-2 = %+v", lb2)
			}
			if !c.MultipleStandardLoadBalancerConfigurations[2].ServicePlacementAllowed() {
				t.Error("allowServicePlacement unset must mean true")
			}
			if c.AuthMethod() != AuthMethodManagedIdentity {
				t.Errorf("auth = %s", c.AuthMethod())
			}
			if c.AdminStateEnabled() {
				t.Error("enableLoadBalancerAdminState: false ignored")
			}
			if c.LoadBalancerBackendPoolUpdateMaxRetries == nil || *c.LoadBalancerBackendPoolUpdateMaxRetries != 0 || c.BackendPoolUpdateMaxRetries() != 0 {
				t.Error("explicit maxRetries 0 lost")
			}
			if c.LoadBalancerBackendPoolUpdateIntervalInSeconds != 15 {
				t.Errorf("interval = %d", c.LoadBalancerBackendPoolUpdateIntervalInSeconds)
			}
		}},
		{"testdata/service-gateway.json", func(t *testing.T, c *Config) {
			if c.AuthMethod() != AuthMethodWorkloadIdentity || !c.ServiceGatewayEnabled ||
				c.LoadBalancerBackendPoolConfigurationType != BackendPoolPodIP || c.LoadBalancerSKU != LoadBalancerSKUService {
				t.Errorf("config = %v", c)
			}
			got := c.RateLimitFor(RateLimitClientServiceGateway)
			want := RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 1, CloudProviderRateLimitBucket: 5,
				CloudProviderRateLimitQPSWrite: 20, CloudProviderRateLimitBucketWrite: 40}
			if got != want {
				t.Errorf("RateLimitFor(serviceGateway) = %+v, want %+v", got, want)
			}
		}},
		{"testdata/azure.yaml", func(t *testing.T, c *Config) {
			if c.Cloud != CloudAzurePublic || c.LoadBalancerSKU != LoadBalancerSKUStandard ||
				c.ClusterServiceLoadBalancerHealthProbeMode != HealthProbeModeShared {
				t.Errorf("enumerations not normalised: %v", c)
			}
			if c.ClusterServiceSharedLoadBalancerHealthProbePort != 10257 || c.CloudProviderRateLimitQPS != 10 ||
				c.CloudProviderBackoffExponent != 1.5 || c.AADClientSecret.Reveal() != "Zq9-YAML-s3cr3t-value-7Hk" {
				t.Errorf("values: %+v", c)
			}
			if got := c.UnknownFields(); !slices.Equal(got, []string{"routeTableName"}) {
				t.Errorf("UnknownFields = %q", got)
			}
			if pip := c.RateLimitFor(RateLimitClientPublicIPAddress); pip.CloudProviderRateLimitBucket != 9 || pip.CloudProviderRateLimitQPS != 10 {
				t.Errorf("publicIPAddressRateLimit = %+v", pip)
			}
		}},
		{"testdata/emulator.json", func(t *testing.T, c *Config) {
			if c.Cloud != "AzureEmulator" || c.ResourceManagerEndpoint != "https://127.0.0.1:8443/" || c.CACertFile != "testdata/ca.pem" {
				t.Errorf("custom cloud: %v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.file), func(t *testing.T) {
			c, err := LoadFile(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
			if err := c.Validate(); err != nil {
				t.Errorf("loaded config fails Validate: %v", err)
			}
		})
	}
}

func TestLoadYAMLEqualsJSON(t *testing.T) {
	j := mustLoad(t, []byte(`{"subscriptionId":"s","resourceGroup":"rg","location":"l","useManagedIdentityExtension":true,
		"loadBalancerSku":"Standard","loadBalancerBackendPoolConfigurationType":"nodeIP","multipleStandardLoadBalancerConfigurations":[{"name":"kubernetes",
		"nodeSelector":{"matchLabels":{"a":"b"}}}],"cloudProviderRateLimitQPS":2.5,"vmType":"vmss"}`))
	y := mustLoad(t, []byte(`
subscriptionId: s
resourceGroup: rg
location: l
useManagedIdentityExtension: true
loadBalancerSku: Standard
loadBalancerBackendPoolConfigurationType: nodeIP
multipleStandardLoadBalancerConfigurations:
- name: kubernetes
  nodeSelector:
    matchLabels: {a: b}
cloudProviderRateLimitQPS: 2.5
vmType: vmss
`))
	if !reflect.DeepEqual(j, y) {
		t.Errorf("YAML and JSON differ:\n%#v\n%#v", j, y)
	}
}

func TestLoadCaseInsensitiveKeys(t *testing.T) {
	tests := []struct {
		name  string
		input string
		check func(*Config) bool
	}{
		{"legacy cloudProviderRatelimit", `cloudProviderRatelimit: true`, func(c *Config) bool { return c.CloudProviderRateLimit }},
		{"all lower case", `cloudproviderratelimitqps: 3`, func(c *Config) bool { return c.CloudProviderRateLimitQPS == 3 }},
		{"upper case id", `SUBSCRIPTIONID: other`, func(c *Config) bool { return c.SubscriptionID == "other" }},
		{"nested", `loadbalancerratelimit: {CLOUDPROVIDERRATELIMITBUCKET: 4}`, func(c *Config) bool {
			return c.LoadBalancerRateLimit != nil && c.LoadBalancerRateLimit.CloudProviderRateLimitBucket == 4
		}},
	}
	base := "subscriptionId: s\nresourceGroup: rg\nlocation: l\nuseManagedIdentityExtension: true\n"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base + tt.input + "\n"
			if strings.HasPrefix(tt.input, "SUBSCRIPTIONID") {
				in = strings.Replace(base, "subscriptionId: s\n", "", 1) + tt.input + "\n"
			}
			c := mustLoad(t, []byte(in))
			if !tt.check(c) {
				t.Errorf("key not applied: %+v", c)
			}
			if len(c.UnknownFields()) != 0 {
				t.Errorf("reported as unknown: %q", c.UnknownFields())
			}
		})
	}
}

func TestLoadConflictingSpellings(t *testing.T) {
	// Both spellings with the same value: fine.
	c := mustLoad(t, doc(t, map[string]any{"cloudProviderRatelimit": true, "cloudProviderRateLimit": true}))
	if !c.CloudProviderRateLimit {
		t.Error("rate limit not enabled")
	}
	// Different values: ambiguous, rejected.
	err := loadErr(t, doc(t, map[string]any{"cloudProviderRatelimit": false, "cloudProviderRateLimit": true}))
	assertErrorContains(t, err, `cloudProviderRateLimit: set more than once with different values`, `"cloudProviderRatelimit"`)
}

func TestLoadUnknownFields(t *testing.T) {
	c := mustLoad(t, doc(t, map[string]any{
		"vmType":                      "vmss",
		"routeTableName":              "rt",
		"useManagedIdentityExtension": true,
		"loadBalancerBackendPoolConfigurationType": "nodeIP",
		"multipleStandardLoadBalancerConfigurations": []any{
			map[string]any{"name": "kubernetes", "autoPlaceServices": true,
				"nodeSelector": map[string]any{"matchLabel": map[string]any{"a": "b"}}},
		},
		"loadBalancerRateLimit": map[string]any{"cloudProviderRateLimit": true, "qps": 3},
	}))
	want := []string{
		"loadBalancerRateLimit.qps",
		"multipleStandardLoadBalancerConfigurations[0].autoPlaceServices",
		"multipleStandardLoadBalancerConfigurations[0].nodeSelector.matchLabel",
		"routeTableName",
		"vmType",
	}
	if got := c.UnknownFields(); !slices.Equal(got, want) {
		t.Errorf("UnknownFields =\n%q\nwant\n%q", got, want)
	}
	// The accessor returns a copy.
	c.UnknownFields()[0] = "changed"
	if c.UnknownFields()[0] != want[0] {
		t.Error("UnknownFields exposes internal state")
	}
	if (&Config{}).UnknownFields() != nil || (*Config)(nil).UnknownFields() != nil {
		t.Error("UnknownFields of a Config not from Load must be nil")
	}
}

// A misspelt key is named with the field it is likely meant to be (the
// audit's reproduction: enableLoadBalancerAdminStat was dropped without a
// word); a key close to no field, or to two, gets no guess.
func TestUnknownFieldWarningsSuggestTheNearestField(t *testing.T) {
	c := mustLoad(t, doc(t, map[string]any{
		"enableLoadBalancerAdminStat": false,
		"vmType":                      "vmss",
		"securityGroupNmae":           "nsg",
		"useInstanceMetadata":         true,
	}))
	want := []string{
		"enableLoadBalancerAdminStat: not a field azlb reads, ignored; did you mean enableLoadBalancerAdminState?",
		"securityGroupNmae: not a field azlb reads, ignored; did you mean securityGroupName?",
		"useInstanceMetadata: not a field azlb reads, ignored",
		"vmType: not a field azlb reads, ignored",
	}
	if got := c.UnknownFieldWarnings(); !slices.Equal(got, want) {
		t.Errorf("UnknownFieldWarnings =\n%q\nwant\n%q", got, want)
	}
	if (*Config)(nil).UnknownFieldWarnings() != nil || len((&Config{}).UnknownFieldWarnings()) != 0 {
		t.Error("warnings of a Config not from Load must be empty")
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"kitten", "sitting", 3, 3}, {"abc", "abc", 1, 0}, {"abc", "abd", 1, 1}, {"abc", "", 1, 2},
		{"enableloadbalanceradminstat", "enableloadbalanceradminstate", 2, 1}, {"abcdef", "fedcba", 2, 3},
	} {
		if got := editDistance(tc.a, tc.b, tc.limit); got != tc.want {
			t.Errorf("editDistance(%q, %q, %d) = %d, want %d", tc.a, tc.b, tc.limit, got, tc.want)
		}
	}
}

func TestLoadValidationErrorListsUnknownFields(t *testing.T) {
	// A misspelt required key: the error says what was ignored.
	err := loadErr(t, doc(t, map[string]any{"resourceGroup": nil, "resourceGroupName": "rg"}))
	assertErrorContains(t, err, "resourceGroup: required", "unknown fields were ignored: resourceGroupName")
}

func TestLoadEmpty(t *testing.T) {
	for name, in := range map[string]string{
		"nothing":       "",
		"white space":   " \n\t\r\n",
		"BOM only":      "\xEF\xBB\xBF",
		"YAML comments": "# nothing here\n# at all\n",
		"YAML document": "---\n",
		"JSON null":     "null",
		"YAML null":     "~",
	} {
		t.Run(name, func(t *testing.T) {
			err := loadErr(t, []byte(in))
			if !errors.Is(err, ErrEmpty) {
				t.Errorf("err = %v, want ErrEmpty", err)
			}
		})
	}
}

func TestLoadBOM(t *testing.T) {
	c := mustLoad(t, append([]byte("\xEF\xBB\xBF"), doc(t, nil)...))
	if c.Location != "eastus" {
		t.Errorf("location = %q", c.Location)
	}
}

func TestLoadNotAnObject(t *testing.T) {
	for _, in := range []string{`[]`, `[{"location":"x"}]`, `"text"`, `42`, `true`, "- a\n- b\n", "just a string"} {
		err := loadErr(t, []byte(in))
		assertErrorContains(t, err, "must be an object")
	}
}

func TestLoadSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"JSON missing comma", "{\n  \"location\": \"eastus\"\n  \"resourceGroup\": \"rg\"\n}", []string{"parse configuration: line 3, column 3", "invalid character"}},
		{"JSON unclosed list", "{\n \"a\": [1, 2\n}", []string{"parse configuration: line 3, column 1"}},
		{"JSON truncated", `{"location": "eastus"`, []string{"parse configuration", "unexpected end of JSON input"}},
		{"JSON stray comma in list", `{"multipleStandardLoadBalancerConfigurations": [,]}`, []string{"line 1, column 49"}},
		{"YAML bad indentation", "location: eastus\n  resourceGroup: rg\n", []string{"parse configuration: yaml: line 2"}},
		{"YAML tab indentation", "a:\n\t- b\n", []string{"parse configuration: yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertErrorContains(t, loadErr(t, []byte(tt.in)), tt.want...)
		})
	}
}

func TestLoadTypeErrors(t *testing.T) {
	tests := []struct {
		name      string
		overrides map[string]any
		want      string
	}{
		{"int as string", map[string]any{"loadBalancerBackendPoolUpdateIntervalInSeconds": "30"}, "loadBalancerBackendPoolUpdateIntervalInSeconds: must be an integer"},
		{"int as float", map[string]any{"loadBalancerBackendPoolUpdateIntervalInSeconds": 1.5}, "loadBalancerBackendPoolUpdateIntervalInSeconds: must be an integer"},
		{"int as bool", map[string]any{"loadBalancerCacheTTLInSeconds": true}, "loadBalancerCacheTTLInSeconds: must be an integer"},
		{"int32 out of range", map[string]any{"clusterServiceSharedLoadBalancerHealthProbePort": 1 << 40}, "clusterServiceSharedLoadBalancerHealthProbePort: must be an integer between -2147483648 and 2147483647"},
		{"pointer int", map[string]any{"loadBalancerBackendPoolUpdateMaxRetries": "3"}, "loadBalancerBackendPoolUpdateMaxRetries: must be an integer"},
		{"bool as string", map[string]any{"useManagedIdentityExtension": "true"}, "useManagedIdentityExtension: must be a boolean"},
		{"bool as number", map[string]any{"serviceGatewayEnabled": 1}, "serviceGatewayEnabled: must be a boolean"},
		{"float as string", map[string]any{"cloudProviderRateLimitQPS": "fast"}, "cloudProviderRateLimitQPS: must be a number"},
		{"float32 out of range", map[string]any{"cloudProviderRateLimitQPS": 1e300}, "cloudProviderRateLimitQPS: must be a number in range"},
		{"string as object", map[string]any{"location": map[string]any{}}, "location: must be a string"},
		{"string as list", map[string]any{"location": []any{"a"}}, "location: must be a string"},
		{"list as object", map[string]any{"multipleStandardLoadBalancerConfigurations": map[string]any{}}, "multipleStandardLoadBalancerConfigurations: must be a list"},
		{"object as string", map[string]any{"loadBalancerRateLimit": "on"}, "loadBalancerRateLimit: must be an object"},
		{"nested", map[string]any{"multipleStandardLoadBalancerConfigurations": []any{
			map[string]any{"name": "kubernetes"}, map[string]any{"name": "b", "allowServicePlacement": "no"}}},
			"multipleStandardLoadBalancerConfigurations[1].allowServicePlacement: must be a boolean"},
		{"selector map value", map[string]any{"multipleStandardLoadBalancerConfigurations": []any{
			map[string]any{"name": "kubernetes", "nodeSelector": map[string]any{"matchLabels": map[string]any{"pool": []any{}}}}}},
			`multipleStandardLoadBalancerConfigurations[0].nodeSelector.matchLabels["pool"]: must be a string`},
		{"per-client stanza", map[string]any{"loadBalancerRateLimit": map[string]any{"cloudProviderRateLimitBucket": 1.5}}, "loadBalancerRateLimit.cloudProviderRateLimitBucket: must be an integer"},
		{"secret as object", map[string]any{"aadClientSecret": map[string]any{"v": testSecret}}, "aadClientSecret: must be a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertErrorContains(t, loadErr(t, doc(t, tt.overrides)), tt.want)
		})
	}
}

func TestLoadReportsAllTypeErrors(t *testing.T) {
	err := loadErr(t, doc(t, map[string]any{
		"loadBalancerBackendPoolUpdateIntervalInSeconds": "x",
		"serviceGatewayEnabled":                          "x",
		"cloudProviderRateLimitQPS":                      "x",
	}))
	fes := fieldErrors(err)
	var fields []string
	for _, fe := range fes {
		fields = append(fields, fe.Field)
	}
	slices.Sort(fields)
	want := []string{"cloudProviderRateLimitQPS", "loadBalancerBackendPoolUpdateIntervalInSeconds", "serviceGatewayEnabled"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields = %q, want %q (err: %v)", fields, want, err)
	}
}

func TestLoadScalarsIntoStrings(t *testing.T) {
	// sigs.k8s.io/yaml semantics: numbers and booleans read into string fields.
	c := mustLoad(t, doc(t, map[string]any{"location": 123, "clusterName": true, "subnetName": 1.5}))
	if c.Location != "123" || c.ClusterName != "true" || c.SubnetName != "1.5" {
		t.Errorf("location=%q clusterName=%q subnetName=%q", c.Location, c.ClusterName, c.SubnetName)
	}
	y := mustLoad(t, []byte("subscriptionId: 12345\nresourceGroup: rg\nlocation: yes\nuseManagedIdentityExtension: true\n"))
	if y.SubscriptionID != "12345" || y.Location != "true" {
		t.Errorf("YAML: subscriptionId=%q location=%q", y.SubscriptionID, y.Location)
	}
}

func TestLoadNullLeavesDefault(t *testing.T) {
	c := mustLoad(t, doc(t, map[string]any{"loadBalancerSku": json.RawMessage("null")}))
	if c.LoadBalancerSKU != LoadBalancerSKUStandard {
		t.Errorf("sku = %q", c.LoadBalancerSKU)
	}
}

func TestLoadTooLarge(t *testing.T) {
	big := bytes.Repeat([]byte(" "), MaxConfigSize+1)
	err := loadErr(t, big)
	assertErrorContains(t, err, "larger than")
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestLoadReadError(t *testing.T) {
	c, err := Load(failingReader{})
	if c != nil || err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("Load(failing reader) = %v, %v", c, err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	_, err := LoadFile(filepath.Join(t.TempDir(), "missing.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "azure.json")
	if err := os.WriteFile(p, []byte(`{"location": 1`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadFile(p)
	assertErrorContains(t, err, p, "parse configuration")
}

// Design doc local-service-updater-retry.txt, "Configuration": an explicit 0
// must stay a non-nil 0 across marshal and unmarshal.
func TestLoadRoundTripMaxRetriesZero(t *testing.T) {
	c := mustLoad(t, doc(t, map[string]any{"loadBalancerBackendPoolUpdateMaxRetries": 0}))
	if c.LoadBalancerBackendPoolUpdateMaxRetries == nil || *c.LoadBalancerBackendPoolUpdateMaxRetries != 0 {
		t.Fatalf("after Load: %v", c.LoadBalancerBackendPoolUpdateMaxRetries)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"loadBalancerBackendPoolUpdateMaxRetries":0`)) {
		t.Fatalf("marshalled config lost the 0: %s", b)
	}
	c2 := mustLoad(t, b)
	if c2.LoadBalancerBackendPoolUpdateMaxRetries == nil || *c2.LoadBalancerBackendPoolUpdateMaxRetries != 0 || c2.BackendPoolUpdateMaxRetries() != 0 {
		t.Errorf("after round trip: %v", c2.LoadBalancerBackendPoolUpdateMaxRetries)
	}
	// Unset stays the default 3 through the same trip.
	c3 := mustLoad(t, doc(t, nil))
	b3, _ := json.Marshal(c3)
	if got := mustLoad(t, b3).BackendPoolUpdateMaxRetries(); got != 3 {
		t.Errorf("unset round trip = %d, want 3", got)
	}
}

func TestLoadRoundTripStable(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.*")
	for _, f := range files {
		if strings.HasSuffix(f, ".pem") {
			continue
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := LoadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			b1, _ := json.Marshal(c)
			b2, _ := json.Marshal(mustLoad(t, b1))
			if !bytes.Equal(b1, b2) {
				t.Errorf("marshal(load(marshal(c))) != marshal(c):\n%s\n%s", b1, b2)
			}
		})
	}
}

// A per-client stanza is really parsed and reaches RateLimitFor; unset
// numbers inherit from the top-level stanza.
func TestLoadPerClientRateLimitStanza(t *testing.T) {
	c := mustLoad(t, []byte(`{
		"subscriptionId": "s", "resourceGroup": "rg", "location": "l", "useManagedIdentityExtension": true,
		"cloudProviderRateLimit": true,
		"cloudProviderRateLimitQPS": 3, "cloudProviderRateLimitBucket": 30,
		"cloudProviderRateLimitQPSWrite": 2, "cloudProviderRateLimitBucketWrite": 20,
		"loadBalancerRateLimit": {"cloudProviderRateLimit": true, "cloudProviderRateLimitQPS": 7, "cloudProviderRateLimitBucketWrite": 70}
	}`))
	want := RateLimitConfig{
		CloudProviderRateLimit:            true,
		CloudProviderRateLimitQPS:         7,  // own
		CloudProviderRateLimitBucket:      30, // inherited
		CloudProviderRateLimitQPSWrite:    2,  // inherited
		CloudProviderRateLimitBucketWrite: 70, // own
	}
	if c.LoadBalancerRateLimit == nil || *c.LoadBalancerRateLimit != want {
		t.Errorf("Config.LoadBalancerRateLimit = %+v, want %+v", c.LoadBalancerRateLimit, want)
	}
	if got := c.RateLimitFor(RateLimitClientLoadBalancer); got != want {
		t.Errorf("RateLimitFor(loadBalancer) = %+v, want %+v", got, want)
	}
	if got, top := c.RateLimitFor(RateLimitClientPublicIPAddress), c.RateLimitConfig; got != top {
		t.Errorf("client without stanza = %+v, want top-level %+v", got, top)
	}
}

// Input that is not valid JSON goes to the YAML parser, as with
// sigs.k8s.io/yaml: a JSON-looking document YAML accepts (here a missing
// value, read as null) loads and is then judged by Validate.
func TestLoadBrokenJSONThatIsYAML(t *testing.T) {
	err := loadErr(t, []byte("{\n  \"location\": \"eastus\",\n  \"resourceGroup\": \n}"))
	assertErrorContains(t, err, "resourceGroup: required")
	c := mustLoad(t, []byte(`{"subscriptionId": "s", "resourceGroup": "rg", "location": "l", "useManagedIdentityExtension": true,}`))
	if c.Location != "l" {
		t.Errorf("trailing comma: %v", c)
	}
}

func TestLoadHostileInput(t *testing.T) {
	var bomb strings.Builder
	bomb.WriteString("a: &a [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 'b'; i <= 'j'; i++ {
		prev := string(i - 1)
		fmt.Fprintf(&bomb, "%c: &%c [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", i, i, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
	}
	tests := map[string][]byte{
		"YAML alias bomb":       []byte(bomb.String()),
		"deep JSON lists":       []byte(`{"location": ` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `}`),
		"deep JSON objects":     []byte(strings.Repeat(`{"a":`, 200000) + "1" + strings.Repeat("}", 200000)),
		"deep YAML flow":        []byte("a: " + strings.Repeat("[", 200000)),
		"deep YAML block":       []byte(strings.Repeat("- ", 100000) + "x\n"),
		"deep selector nesting": []byte(`{"multipleStandardLoadBalancerConfigurations": [{"name": "kubernetes", "nodeSelector": ` + strings.Repeat(`{"matchLabels":`, 50000) + "{}" + strings.Repeat("}", 50000) + `}]}`),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			err := loadErr(t, in)
			if len(err.Error()) > 2000 {
				t.Errorf("error text is %d bytes", len(err.Error()))
			}
		})
	}
}

func TestLoadFirstYAMLDocumentOnly(t *testing.T) {
	c := mustLoad(t, []byte("subscriptionId: s\nresourceGroup: rg\nlocation: l\nuseManagedIdentityExtension: true\n---\nlocation: other\n"))
	if c.Location != "l" {
		t.Errorf("location = %q, want the first document's", c.Location)
	}
}
