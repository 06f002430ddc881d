package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestConfigNeverPrintsSecret(t *testing.T) {
	c := mustLoad(t, doc(t, map[string]any{"vmType": "vmss"}))
	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		outputs[verb+" *Config"] = fmt.Sprintf(verb, c)
		outputs[verb+" Config"] = fmt.Sprintf(verb, *c)
		outputs[verb+" AuthConfig"] = fmt.Sprintf(verb, c.AuthConfig)
	}
	outputs["String()"] = c.String()
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("m", "ptr", c, "value", *c)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("m", "ptr", c, "value", *c)
	outputs["slog"] = logs.String()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	outputs["json.Marshal"] = string(b)
	for name, out := range outputs {
		if strings.Contains(out, testSecret) {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
	}
	if !strings.Contains(outputs["%#v *Config"], `config.Secret("[redacted]")`) {
		t.Errorf("%%#v does not show the redacted secret: %s", outputs["%#v *Config"])
	}
	if !strings.Contains(string(b), `"aadClientSecret":"[redacted]"`) {
		t.Errorf("json does not show the redacted secret: %s", b)
	}
}

func TestConfigString(t *testing.T) {
	c := mustLoad(t, doc(t, map[string]any{"vmType": "vmss", "clusterName": "prod", "loadBalancerBackendPoolConfigurationType": "nodeIP",
		"multipleStandardLoadBalancerConfigurations": []any{map[string]any{"name": "prod"}, map[string]any{"name": "lb-2"}}}))
	s := c.String()
	for _, want := range []string{"Config{", "subscriptionId=00000000-0000-0000-0000-000000000000", "location=eastus",
		"clusterName=prod", "loadBalancerSku=standard", "auth=clientSecret(aadClientId=0b5b5c4e-0000-0000-0000-000000000000)",
		"multipleStandardLoadBalancers=[prod,lb-2]", "adminStateEnabled=true", "backendPoolUpdateMaxRetries=3", "unknownFields=1"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q: %s", want, s)
		}
	}
	if strings.Contains(s, "\n") || strings.Contains(s, testSecret) {
		t.Errorf("String() not a safe single line: %s", s)
	}
	mi := Config{}
	mi.UseManagedIdentityExtension = true
	mi.UserAssignedIdentityID = "uai"
	if s := mi.String(); !strings.Contains(s, "auth=managedIdentity(userAssignedIdentityID=uai)") {
		t.Errorf("managed identity summary: %s", s)
	}
	if s := (Config{}).String(); !strings.Contains(s, "auth=none") {
		t.Errorf("empty summary: %s", s)
	}
}

// Errors never carry the secret, including when the file is malformed right
// next to it, so that the parser's message would otherwise quote it.
func TestErrorsNeverContainSecret(t *testing.T) {
	s := testSecret
	tests := []struct{ name, in string }{
		{"JSON missing comma after secret", `{"aadClientSecret": "` + s + `" "location": "x"}`},
		{"JSON unterminated secret", `{"location": "x", "aadClientSecret": "` + s},
		{"JSON secret as bare word", `{"aadClientSecret": ` + s + `}`},
		{"JSON secret in list", `{"aadClientSecret": ["` + s + `"]}`},
		{"JSON secret as object key", `{"aadClientSecret": {"` + s + `": 1}}`},
		{"JSON secret then type error", `{"aadClientSecret": "` + s + `", "location": 5, "loadBalancerCacheTTLInSeconds": "` + s + `"}`},
		{"JSON secret reused in echoed field", `{"aadClientSecret": "` + s + `", "cloud": "` + s + `", "subscriptionId": "x", "resourceGroup": "rg", "location": "l", "tenantId": "t", "aadClientId": "c"}`},
		{"JSON secret in endpoint", `{"aadClientSecret": "` + s + `", "resourceManagerEndpoint": "ftp://u:` + s + `@h", "subscriptionId": "x", "resourceGroup": "rg", "location": "l"}`},
		{"JSON secret then validation errors", `{"aadClientSecret": "` + s + `", "loadBalancerSku": "premium"}`},
		{"JSON escaped secret", `{"aadClientSecret": "` + strings.ReplaceAll(s, "-", `\u002d`) + `" "x": 1}`},
		{"YAML bad indentation after secret", "aadClientSecret: " + s + "\n  location: x\n"},
		{"YAML unterminated quoted secret", "aadClientSecret: \"" + s + "\nlocation: x\n"},
		{"YAML secret as unknown alias", "aadClientSecret: *" + s + "\n"},
		{"YAML secret with bad tag", "aadClientSecret: !!int " + s + "\n"},
		{"YAML secret with binary tag", "aadClientSecret: !!binary " + s + "\n"},
		{"YAML secret as map key", "? [" + s + "]\n: x\n"},
		{"YAML secret as complex key in value", "aadClientSecret: {? {a: " + s + "} : b}\n"},
		{"YAML secret in sequence", "aadClientSecret:\n  - " + s + "\n"},
		{"YAML secret then tab", "aadClientSecret: " + s + "\n\tlocation: x\n"},
		{"YAML secret duplicate case", "aadClientSecret: " + s + "\nAADClientSecret: other\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(bytes.NewReader([]byte(tt.in)))
			if err == nil {
				t.Fatalf("Load succeeded: %v", c)
			}
			if strings.Contains(err.Error(), s) {
				t.Errorf("error contains the secret:\n%v", err)
			}
		})
	}
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"yaml: unknown anchor 'abc' referenced", "yaml: unknown anchor '…' referenced"},
		{"cannot unmarshal !!str `secret` into int", "cannot unmarshal !!str `…` into int"},
		{`key: "secret", value: "x\"y"`, `key: "…", value: "…"`},
		{"invalid character 'x' looking for beginning of value", "invalid character 'x' looking for beginning of value"},
	}
	for _, tt := range tests {
		if got := sanitize(tt.in); got != tt.want {
			t.Errorf("sanitize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := sanitize(strings.Repeat("é", 500))
	if len(long) > maxParserMessage+len("…") || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, "é") {
		t.Errorf("long message not cut cleanly: %d bytes", len(long))
	}
}

func TestSecretCandidates(t *testing.T) {
	in := `{"aadClientSecret": "a\"b-1234", 'AADCLIENTSECRET': 'single-quoted'}` + "\naadclientsecret: bare-word-value # comment\n"
	got := strings.Join(secretCandidates([]byte(in)), "|")
	for _, want := range []string{`a"b-1234`, `a\"b-1234`, "single-quoted", "bare-word-value"} {
		if !strings.Contains(got, want) {
			t.Errorf("candidates %q lack %q", got, want)
		}
	}
}
