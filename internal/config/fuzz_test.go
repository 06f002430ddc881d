package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// fuzzSecret marks the secret in the seeds. Mutations move and damage it;
// the checks below apply only where it is still unambiguously the secret.
const fuzzSecret = "Zq9SeCrEt-fuzz-7Hk"

func fuzzSeeds(f *testing.F) {
	files, err := filepath.Glob("testdata/*.*")
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, ".pem") {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"aadClientSecret": "` + fuzzSecret + `", "tenantId": "t", "aadClientId": "c", "subscriptionId": "s", "resourceGroup": "rg", "location": "l"}`,
		"aadClientSecret: " + fuzzSecret + "\ntenantId: t\naadClientId: c\nsubscriptionId: s\nresourceGroup: rg\nlocation: l\n",
		`{"aadClientSecret": "` + fuzzSecret + `" "location": "x"}`,
		"aadClientSecret: *" + fuzzSecret + "\n",
		`{"aadClientCertPassword": "` + fuzzSecret + `", "aadClientCertPath": "testdata/clientcert/rsa-legacy.p12", "tenantId": "t", "aadClientId": "c", "subscriptionId": "s", "resourceGroup": "rg", "location": "l"}`,
		"aadClientCertPassword: " + fuzzSecret + "\naadClientCertPath: testdata/clientcert/rsa.pem\n",
		"aadClientSecret: !!int " + fuzzSecret + "\n",
		"? [" + fuzzSecret + "]\n: x\n",
		`{"useManagedIdentityExtension": true, "subscriptionId": "s", "resourceGroup": "rg", "location": "l",
		  "loadBalancerBackendPoolUpdateMaxRetries": 0, "cloudProviderRatelimit": true,
		  "loadBalancerBackendPoolConfigurationType": "nodeIP",
		  "multipleStandardLoadBalancerConfigurations": [{"name": "kubernetes", "nodeSelector": {"matchLabels": {"a": "b"}}}],
		  "loadBalancerRateLimit": {"cloudProviderRateLimit": true, "cloudProviderRateLimitQPS": 7}}`,
		"", "null", "{}", "[]", "---\n", "\xEF\xBB\xBF{}", `{"location": 1e400}`, "a: .inf\n",
	} {
		f.Add([]byte(s))
	}
}

// FuzzLoad: Load never panics; it returns a config that passes Validate or
// an error, never both; it is deterministic; a loaded config survives
// marshal and load unchanged; the secret is in no output.
func FuzzLoad(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		c1, err1 := Load(bytes.NewReader(data))
		c2, err2 := Load(bytes.NewReader(data))
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("not deterministic: %v / %v", err1, err2)
		}
		if err1 != nil {
			if c1 != nil {
				t.Fatalf("config and error: %v", err1)
			}
			if err1.Error() != err2.Error() {
				t.Fatalf("error text not deterministic:\n%v\n%v", err1, err2)
			}
			if secretPlacedAsSecret(data) && strings.Contains(err1.Error(), fuzzSecret) {
				t.Fatalf("error contains the secret:\n%v", err1)
			}
			return
		}
		if c1 == nil {
			t.Fatal("nil config without error")
		}
		if !reflect.DeepEqual(c1, c2) {
			t.Fatalf("config not deterministic:\n%#v\n%#v", c1, c2)
		}
		if err := c1.Validate(); err != nil {
			t.Fatalf("loaded config fails Validate: %v", err)
		}
		again := *c1
		again.SetDefaults()
		if !reflect.DeepEqual(&again, c1) {
			t.Fatalf("SetDefaults not idempotent on a loaded config")
		}

		b1, err := json.Marshal(c1)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c3, err := Load(bytes.NewReader(b1))
		if err != nil {
			t.Fatalf("marshalled config does not load: %v\n%s", err, b1)
		}
		b3, err := json.Marshal(c3)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b1, b3) {
			t.Fatalf("round trip changed the config:\n%s\n%s", b1, b3)
		}

		// The secret is printed nowhere: compare with the same config holding
		// a different secret, so text that merely looks like it does not count.
		if s := c1.AADClientSecret.Reveal(); len(s) >= 8 && bytes.Count(data, []byte(s)) == 1 {
			ref := *c1
			ref.AADClientSecret = "Q"
			render := func(c *Config) []string {
				out := []string{c.String()}
				for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
					out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, *c))
				}
				b, _ := json.Marshal(c)
				return append(out, string(b))
			}
			got, want := render(c1), render(&ref)
			for i := range got {
				if strings.Count(got[i], s) != strings.Count(want[i], s) {
					t.Fatalf("secret printed: %s", got[i])
				}
			}
		}
	})
}

// secretPlacedAsSecret reports whether fuzzSecret occurs once in data and
// either is the value of aadClientSecret or aadClientCertPassword or data
// does not parse (so no other
// field can legitimately echo it).
func secretPlacedAsSecret(data []byte) bool {
	if bytes.Count(data, []byte(fuzzSecret)) != 1 {
		return false
	}
	var m map[string]any
	var err error
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, utf8BOM))
	if json.Valid(trimmed) {
		err = json.Unmarshal(trimmed, &m)
	} else {
		err = yaml.Unmarshal(trimmed, &m)
	}
	if err != nil {
		return true
	}
	for k, v := range m {
		if strings.EqualFold(k, "aadClientSecret") || strings.EqualFold(k, "aadClientCertPassword") {
			if s, ok := v.(string); ok && s == fuzzSecret {
				return true
			}
		}
	}
	return false
}
