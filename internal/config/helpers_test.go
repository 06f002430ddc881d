package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
)

// testSecret is distinctive so that a leak is found by a plain substring
// search.
const testSecret = "Zq9-T3ST-s3cr3t-Xv7Hk-do-not-print"

// baseDoc is a minimal valid azure.json.
func baseDoc() map[string]any {
	return map[string]any{
		"tenantId":        "72f988bf-0000-0000-0000-000000000000",
		"aadClientId":     "0b5b5c4e-0000-0000-0000-000000000000",
		"aadClientSecret": testSecret,
		"subscriptionId":  "00000000-0000-0000-0000-000000000000",
		"resourceGroup":   "rg",
		"location":        "eastus",
	}
}

// doc returns baseDoc with overrides applied (a nil value deletes the key),
// as JSON.
func doc(t testing.TB, overrides map[string]any) []byte {
	t.Helper()
	m := baseDoc()
	maps.Copy(m, overrides)
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// baseConfig is the Config baseDoc loads into, before defaults.
func baseConfig() Config {
	var c Config
	c.TenantID = "72f988bf-0000-0000-0000-000000000000"
	c.AADClientID = "0b5b5c4e-0000-0000-0000-000000000000"
	c.AADClientSecret = testSecret
	c.SubscriptionID = "00000000-0000-0000-0000-000000000000"
	c.ResourceGroup = "rg"
	c.Location = "eastus"
	// IP-based pools: the multiple-load-balancer cases need them (the
	// default, NIC-based pools, is covered on its own).
	c.LoadBalancerBackendPoolConfigurationType = BackendPoolNodeIP
	return c
}

func mustLoad(t testing.TB, data []byte) *Config {
	t.Helper()
	c, err := Load(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Load: %v\ninput: %s", err, data)
	}
	if c == nil {
		t.Fatal("Load returned nil config without error")
	}
	return c
}

func loadErr(t testing.TB, data []byte) error {
	t.Helper()
	c, err := Load(bytes.NewReader(data))
	if err == nil {
		t.Fatalf("Load succeeded, want error; config: %v\ninput: %s", c, data)
	}
	if c != nil {
		t.Fatalf("Load returned a config with error %v", err)
	}
	return err
}

// fieldErrors flattens an error tree into its *FieldError leaves.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FieldError); ok { //nolint:errorlint // walks the tree node by node
			out = append(out, fe)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}

// assertErrorContains checks that err's text holds every want, and never the
// test secret.
func assertErrorContains(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not contain %q:\n%v", w, err)
		}
	}
	if strings.Contains(err.Error(), testSecret) {
		t.Errorf("error contains the secret:\n%v", err)
	}
}

func ptr[T any](v T) *T { return &v }
