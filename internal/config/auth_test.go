package config

import (
	"slices"
	"testing"
)

func TestAuth(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(*Config)
		wantMethod AuthMethod
		wantFields []string // fields of the validation errors
	}{
		{"client secret", func(*Config) {}, AuthMethodClientSecret, nil},
		{"client secret without tenant", func(c *Config) { c.TenantID = "" }, AuthMethodClientSecret, []string{"tenantId"}},
		{"client secret without client id", func(c *Config) { c.AADClientID = "" }, AuthMethodClientSecret, []string{"aadClientId"}},
		{"client id without secret", func(c *Config) { c.AADClientSecret = "" }, AuthMethodNone, []string{"aadClientSecret"}},
		{"nothing at all", func(c *Config) { c.AuthConfig = AuthConfig{} }, AuthMethodNone, []string{"aadClientSecret"}},
		{"managed identity, system assigned", func(c *Config) {
			c.AuthConfig = AuthConfig{UseManagedIdentityExtension: true}
		}, AuthMethodManagedIdentity, nil},
		{"managed identity, user assigned", func(c *Config) {
			c.AuthConfig = AuthConfig{UseManagedIdentityExtension: true, UserAssignedIdentityID: "id"}
		}, AuthMethodManagedIdentity, nil},
		{"managed identity ignores AKS msi placeholder secret", func(c *Config) {
			c.UseManagedIdentityExtension = true
			c.AADClientID, c.AADClientSecret = "msi", "msi"
		}, AuthMethodManagedIdentity, nil},
		{"user assigned id without managed identity", func(c *Config) { c.UserAssignedIdentityID = "id" }, AuthMethodClientSecret, []string{"userAssignedIdentityID"}},
		{"workload identity", func(c *Config) {
			c.AuthConfig = AuthConfig{UseFederatedWorkloadIdentityExtension: true, AADClientID: "id", TenantID: "t", AADFederatedTokenFile: "/token"}
		}, AuthMethodWorkloadIdentity, nil},
		{"workload identity incomplete", func(c *Config) {
			c.AuthConfig = AuthConfig{UseFederatedWorkloadIdentityExtension: true}
		}, AuthMethodWorkloadIdentity, []string{"aadClientId", "tenantId", "aadFederatedTokenFile"}},
		{"workload and managed identity", func(c *Config) {
			c.UseFederatedWorkloadIdentityExtension = true
			c.UseManagedIdentityExtension = true
		}, AuthMethodNone, []string{"useFederatedWorkloadIdentityExtension"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig()
			tt.mutate(&c)
			if got := c.AuthMethod(); got != tt.wantMethod {
				t.Errorf("AuthMethod = %q, want %q", got, tt.wantMethod)
			}
			var fields []string
			err := c.Validate()
			for _, fe := range fieldErrors(err) {
				fields = append(fields, fe.Field)
			}
			if !slices.Equal(fields, tt.wantFields) {
				t.Errorf("error fields = %q, want %q (err: %v)", fields, tt.wantFields, err)
			}
		})
	}
}
