package config

import (
	"strings"
	"testing"
)

func TestNetworkResources(t *testing.T) {
	const (
		netSub    = "22222222-0000-0000-0000-000000000000"
		netTenant = "9a9a9a9a-0000-0000-0000-000000000000"
	)
	for _, tt := range []struct {
		name             string
		overrides        map[string]any
		wantSub, wantTen string
		cross            bool
		errField, errHas string
	}{
		{"unset", nil, "00000000-0000-0000-0000-000000000000", "72f988bf-0000-0000-0000-000000000000", false, "", ""},
		{"another subscription, same tenant", map[string]any{"networkResourceSubscriptionID": netSub}, netSub, "72f988bf-0000-0000-0000-000000000000", false, "", ""},
		{"the tenant named again (any case)", map[string]any{"networkResourceSubscriptionID": netSub, "networkResourceTenantID": "72F988BF-0000-0000-0000-000000000000"},
			netSub, "72F988BF-0000-0000-0000-000000000000", false, "", ""},
		{"another tenant, client secret", map[string]any{"networkResourceSubscriptionID": netSub, "networkResourceTenantID": netTenant}, netSub, netTenant, true, "", ""},
		{"another tenant, client certificate", map[string]any{"networkResourceSubscriptionID": netSub, "networkResourceTenantID": netTenant,
			"aadClientSecret": nil, "aadClientCertPath": "testdata/clientcert/rsa.pem"}, netSub, netTenant, true, "", ""},
		{"another subscription, managed identity", map[string]any{"networkResourceSubscriptionID": netSub, "aadClientSecret": nil, "useManagedIdentityExtension": true},
			netSub, "72f988bf-0000-0000-0000-000000000000", false, "", ""},
		{"another tenant, managed identity", map[string]any{"networkResourceSubscriptionID": netSub, "networkResourceTenantID": netTenant,
			"aadClientSecret": nil, "useManagedIdentityExtension": true}, "", "", false, "networkResourceTenantID", "managedIdentity gets tokens of its own tenant only"},
		{"another tenant, workload identity", map[string]any{"networkResourceSubscriptionID": netSub, "networkResourceTenantID": netTenant,
			"aadClientSecret": nil, "useFederatedWorkloadIdentityExtension": true, "aadFederatedTokenFile": "/t"}, "", "", false, "networkResourceTenantID", "workloadIdentity"},
		{"another tenant without its subscription", map[string]any{"networkResourceTenantID": netTenant}, "", "", false,
			"networkResourceSubscriptionID", "required with networkResourceTenantID"},
		{"another tenant, the cluster's subscription", map[string]any{"networkResourceTenantID": netTenant, "networkResourceSubscriptionID": "00000000-0000-0000-0000-000000000000"},
			"", "", false, "networkResourceSubscriptionID", "other than subscriptionId"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := doc(t, tt.overrides)
			if tt.errField != "" {
				assertErrorContains(t, loadErr(t, data), tt.errField+": ", tt.errHas)
				return
			}
			c := mustLoad(t, data)
			if c.NetworkSubscriptionID() != tt.wantSub || c.NetworkTenantID() != tt.wantTen || c.CrossTenantNetwork() != tt.cross {
				t.Errorf("network subscription %q tenant %q cross %v; want %q %q %v", c.NetworkSubscriptionID(), c.NetworkTenantID(), c.CrossTenantNetwork(),
					tt.wantSub, tt.wantTen, tt.cross)
			}
			if tt.overrides["networkResourceSubscriptionID"] != nil && !strings.Contains(c.String(), "networkResourceSubscriptionID="+netSub) {
				t.Errorf("String() = %s", c.String())
			}
		})
	}
}
