package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const secretLabel = "Secret kube-system/azure-cloud-provider (key cloud-config)"

func TestCloudConfigTypeOf(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: "merge", `{"cloudConfigType": "FILE"}`: "file", `cloudConfigType: secret`: "secret", `{"cloudconfigtype": "Merge"}`: "merge",
	} {
		if got, err := CloudConfigTypeOf([]byte(in)); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`{"cloudConfigType": "both"}`, `{"cloudConfigType": 1, "aadClientSecret": "` + testSecret + `"`, ``} {
		if _, err := CloudConfigTypeOf([]byte(in)); err == nil || strings.Contains(err.Error(), testSecret) {
			t.Errorf("%s: %v", in, err)
		}
	}
	assertErrorContains(t, loadErr(t, doc(t, map[string]any{"cloudConfigType": "both"})), "cloudConfigType: must be one of file, secret, merge")
}

func TestLoadOverridden(t *testing.T) {
	js := func(m map[string]any) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// The file: everything but the credential, which the Secret holds.
	fileDoc := func(typ string) map[string]any {
		m := baseDoc()
		delete(m, "aadClientSecret")
		m["cloudConfigType"] = typ
		m["vnetName"] = "file-vnet"
		m["tagsMap"] = map[string]any{"a": "file", "b": "file"}
		m["loadBalancerRateLimit"] = map[string]any{"cloudProviderRateLimit": true, "cloudProviderRateLimitQPS": 3, "cloudProviderRateLimitBucket": 30}
		m["loadBalancerAdminStateTaints"] = []any{"a.example/one", "a.example/two"}
		return m
	}
	secret := js(map[string]any{
		"AADClientSecret": testSecret, "location": "westeurope", "vnetName": nil,
		"tagsMap":                      map[string]any{"b": "secret", "c": "secret"},
		"loadBalancerRateLimit":        map[string]any{"cloudProviderRateLimitQPS": 7},
		"loadBalancerAdminStateTaints": []any{"b.example/three"},
		"vmType":                       "vmss",
	})

	t.Run("merge: the Secret's fields win, objects merge, lists are replaced, null keeps the file's", func(t *testing.T) {
		c, err := LoadOverridden(js(fileDoc("merge")), secret, secretLabel)
		if err != nil {
			t.Fatal(err)
		}
		if c.AADClientSecret.Reveal() != testSecret || c.Location != "westeurope" || c.VnetName != "file-vnet" || c.TenantID == "" {
			t.Errorf("secret %v location %q vnet %q tenant %q", c.AADClientSecret.IsSet(), c.Location, c.VnetName, c.TenantID)
		}
		if want := map[string]string{"a": "file", "b": "secret", "c": "secret"}; !reflect.DeepEqual(c.TagsMap, want) {
			t.Errorf("tagsMap %v, want %v", c.TagsMap, want)
		}
		if r := c.LoadBalancerRateLimit; r == nil || !r.CloudProviderRateLimit || r.CloudProviderRateLimitQPS != 7 || r.CloudProviderRateLimitBucket != 30 {
			t.Errorf("loadBalancerRateLimit %+v", r)
		}
		if got := *c.LoadBalancerAdminStateTaints; !slices.Equal(got, []string{"b.example/three"}) {
			t.Errorf("taints %v, want the Secret's list", got)
		}
		if c.CloudConfigType != "merge" {
			t.Errorf("cloudConfigType %q", c.CloudConfigType)
		}
		if w := strings.Join(c.UnknownFieldWarnings(), "\n"); !strings.Contains(w, secretLabel+": vmType: not a field azlb reads") {
			t.Errorf("warnings %q", w)
		}
	})
	t.Run("merge without the Secret: the file alone", func(t *testing.T) {
		f := fileDoc("merge")
		f["aadClientSecret"] = "file-" + testSecret
		c, err := LoadOverridden(js(f), nil, secretLabel)
		if err != nil || c.AADClientSecret.Reveal() != "file-"+testSecret || c.Location != "eastus" {
			t.Fatalf("%v %v", c, err)
		}
		// The file lacking the credential is an error of its own then.
		_, err = LoadOverridden(js(fileDoc("merge")), nil, secretLabel)
		assertErrorContains(t, err, "aadClientSecret: required")
	})
	t.Run("file: the Secret is not looked at", func(t *testing.T) {
		f := fileDoc("file")
		f["aadClientSecret"] = "file-" + testSecret
		c, err := LoadOverridden(js(f), []byte("not: [valid"), secretLabel)
		if err != nil || c.Location != "eastus" || c.CloudConfigType != "file" {
			t.Fatalf("%v %v", c, err)
		}
	})
	t.Run("secret: the Secret alone", func(t *testing.T) {
		s := baseDoc()
		s["location"] = "westeurope"
		s["cloudConfigType"] = "file"
		c, err := LoadOverridden(js(fileDoc("secret")), js(s), secretLabel)
		if err != nil {
			t.Fatal(err)
		}
		if c.Location != "westeurope" || c.VnetName != "" || c.TagsMap != nil || c.CloudConfigType != "secret" {
			t.Errorf("location %q vnet %q tags %v type %q: want the Secret's document alone", c.Location, c.VnetName, c.TagsMap, c.CloudConfigType)
		}
		if w := strings.Join(c.UnknownFieldWarnings(), "\n"); !strings.Contains(w, "cloudConfigType (file) ignored: azure.json's cloudConfigType (secret) decides") {
			t.Errorf("warnings %q", w)
		}
		_, err = LoadOverridden(js(fileDoc("secret")), nil, secretLabel)
		assertErrorContains(t, err, "cloudConfigType secret: no configuration in "+secretLabel)
	})
	t.Run("errors name the Secret and never a credential", func(t *testing.T) {
		bad := js(map[string]any{"aadClientSecret": testSecret, "loadBalancerSku": "premium"})
		_, err := LoadOverridden(js(fileDoc("merge")), bad, secretLabel)
		assertErrorContains(t, err, "azure.json with "+secretLabel+" (cloudConfigType merge)", `loadBalancerSku: must be one of`)
		_, err = LoadOverridden(js(fileDoc("merge")), []byte(`{"aadClientSecret": "`+testSecret+`" "x": 1}`), secretLabel)
		assertErrorContains(t, err, secretLabel+": parse configuration")
		_, err = LoadOverridden(js(fileDoc("merge")), []byte(`{"aadClientSecret": 5, "location": ["`+testSecret+`"]}`), secretLabel)
		assertErrorContains(t, err, secretLabel+": location: must be a string")
		_, err = LoadOverridden(bytes.Repeat([]byte(" "), MaxConfigSize+1), nil, secretLabel)
		assertErrorContains(t, err, "larger than")
	})
}

// FuzzLoadOverridden: never a panic, a config and an error never together,
// the same answer twice, a result that passes Validate, and no credential
// of either document in an error.
func FuzzLoadOverridden(f *testing.F) {
	f.Add([]byte(`{"cloudConfigType": "merge", "tenantId": "t", "aadClientId": "c", "subscriptionId": "s", "resourceGroup": "rg", "location": "l"}`),
		[]byte(`{"aadClientSecret": "`+fuzzSecret+`", "tagsMap": {"a": "b"}}`))
	f.Add([]byte(`cloudConfigType: secret`), []byte("aadClientSecret: "+fuzzSecret+"\ntenantId: t\naadClientId: c\nsubscriptionId: s\nresourceGroup: rg\nlocation: l\n"))
	f.Add([]byte(`{"cloudConfigType": "file"}`), []byte(nil))
	f.Add([]byte(`{"loadBalancerRateLimit": {"cloudProviderRateLimitQPS": 1}}`), []byte(`{"loadBalancerRateLimit": null, "aadClientSecret": "`+fuzzSecret+`" x`))
	f.Fuzz(func(t *testing.T, file, secret []byte) {
		c1, err1 := LoadOverridden(file, secret, secretLabel)
		c2, err2 := LoadOverridden(file, secret, secretLabel)
		if (err1 == nil) != (err2 == nil) || (c1 == nil) == (err1 == nil) {
			t.Fatalf("results %v/%v, %v/%v", c1 != nil, err1, c2 != nil, err2)
		}
		if err1 != nil {
			if err1.Error() != err2.Error() {
				t.Fatalf("error text not deterministic:\n%v\n%v", err1, err2)
			}
			if (secretPlacedAsSecret(secret) && !bytes.Contains(file, []byte(fuzzSecret)) || secretPlacedAsSecret(file) && !bytes.Contains(secret, []byte(fuzzSecret))) &&
				strings.Contains(err1.Error(), fuzzSecret) {
				t.Fatalf("error contains the secret:\n%v", err1)
			}
			return
		}
		if !reflect.DeepEqual(c1, c2) {
			t.Fatal("config not deterministic")
		}
		if err := c1.Validate(); err != nil {
			t.Fatalf("loaded config fails Validate: %v", err)
		}
	})
}
