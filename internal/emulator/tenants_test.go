package emulator

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

const (
	hubTenant = "0b0b0b0b-0000-4000-8000-00000000000b"
	hubSub    = "0c0c0c0c-0000-4000-8000-00000000000c"
)

var twoTenants = Options{Tenants: []Tenant{{ID: hubTenant, Subscriptions: []string{hubSub}}}}

// tenantToken gets an ARM token of a tenant with the client's secret.
func tenantToken(t testing.TB, e *Emulator, tenant string) string {
	t.Helper()
	rec := tokenRequest(e, tenant, url.Values{"grant_type": {"client_credentials"}, "client_id": {DefaultClientID},
		"client_secret": {DefaultClientSecret}, "scope": {"https://management.azure.com/.default"}})
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &tr) != nil {
		t.Fatalf("token of %s: %d %s", tenant, rec.Code, rec.Body)
	}
	return tr.AccessToken
}

func subPath(sub, rest string) string { return "/subscriptions/" + sub + rest }

// TestTenants: the AAD endpoint issues tokens of either tenant; ARM takes
// a subscription's requests only with a token of its tenant, and a write
// that links a resource of the other tenant only with an auxiliary token of
// that tenant, as ARM documents ("Authenticate requests across tenants").
func TestTenants(t *testing.T) {
	h := newHandlerEnv(t, twoTenants)
	home, hub := h.tok, tenantToken(t, h.emu, hubTenant)
	as := func(tok string, hdr map[string]string) map[string]string {
		m := map[string]string{"Authorization": "Bearer " + tok}
		for k, v := range hdr {
			m[k] = v
		}
		return m
	}
	group := `{"location":"eastus"}`
	hubVnet := subPath(hubSub, "/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/hub?api-version="+NetworkAPIVersion)
	nic := subPath(testSub, "/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/vm0-nic?api-version="+NetworkAPIVersion)
	nicBody := `{"location":"eastus","properties":{"ipConfigurations":[{"name":"ipconfig1","properties":{"subnet":{"id":"/subscriptions/` +
		hubSub + `/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/hub/subnets/nodes"}}}]}}`

	// Each tenant's token in its own subscriptions only.
	if rec := h.do(t, http.MethodPut, subPath(hubSub, "/resourcegroups/net?api-version=2021-04-01"), group, as(home, nil)); rec.Code != http.StatusUnauthorized ||
		errCodeOf(rec) != "InvalidAuthenticationTokenTenant" || !strings.Contains(rec.Body.String(), "https://login.windows.net/"+hubTenant) ||
		!strings.Contains(rec.Header().Get("WWW-Authenticate"), hubTenant) {
		t.Fatalf("home token in the hub subscription: %d %s", rec.Code, rec.Body)
	}
	if rec := h.do(t, http.MethodPut, rgPath("rg"), group, as(hub, nil)); rec.Code != http.StatusUnauthorized || errCodeOf(rec) != "InvalidAuthenticationTokenTenant" {
		t.Fatalf("hub token in the home subscription: %d %s", rec.Code, rec.Body)
	}
	if rec := h.do(t, http.MethodGet, subPath(hubSub, "?api-version=2021-04-01"), "", as(hub, nil)); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), `"tenantId":"`+hubTenant+`"`) {
		t.Fatalf("GET the hub subscription: %d %s", rec.Code, rec.Body)
	}
	for _, req := range []struct{ tok, path, body string }{
		{hub, subPath(hubSub, "/resourcegroups/net?api-version=2021-04-01"), group},
		{hub, hubVnet, `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]},"subnets":[{"name":"nodes","properties":{"addressPrefix":"10.0.0.0/24"}}]}}`},
		{home, rgPath("rg"), group},
	} {
		if rec := h.do(t, http.MethodPut, req.path, req.body, as(req.tok, nil)); rec.Code/100 != 2 {
			t.Fatalf("PUT %s: %d %s", req.path, rec.Code, rec.Body)
		}
	}

	// A NIC of the home subscription in the hub's subnet.
	expired, _ := h.emu.issueToken("https://management.azure.com/", hubTenant, time.Now().Add(-2*time.Hour))
	for _, tc := range []struct {
		name, aux string
		status    int
		code      string
	}{
		{"no auxiliary token", "", http.StatusForbidden, "LinkedAuthorizationFailed"},
		{"an auxiliary token of the home tenant", "Bearer " + home, http.StatusForbidden, "LinkedAuthorizationFailed"},
		{"an expired auxiliary token", "Bearer " + expired, http.StatusUnauthorized, "ExpiredAuthenticationToken"},
		{"a forged auxiliary token", "Bearer " + hub[:len(hub)-4] + "AAAA", http.StatusUnauthorized, "InvalidAuthenticationToken"},
		{"four auxiliary tokens", strings.Repeat("Bearer "+hub+", ", 3) + "Bearer " + hub, http.StatusUnauthorized, "InvalidAuthenticationToken"},
		{"an encrypted auxiliary token", "EncryptedBearer abc", http.StatusUnauthorized, "InvalidAuthenticationToken"},
	} {
		rec := h.do(t, http.MethodPut, nic, nicBody, as(home, map[string]string{HeaderAuxiliary: tc.aux}))
		if rec.Code != tc.status || errCodeOf(rec) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, rec.Code, rec.Body, tc.status, tc.code)
		}
		if tc.code == "LinkedAuthorizationFailed" && !strings.Contains(rec.Body.String(),
			"'Microsoft.Network/networkInterfaces/write' on scope '/subscriptions/"+testSub+"/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/vm0-nic', however the current tenant '"+DefaultTenantID+"' is not authorized to access linked subscription '"+hubSub+"'") {
			t.Errorf("%s: message %s", tc.name, rec.Body)
		}
	}
	if rec := h.do(t, http.MethodGet, nic, "", as(home, nil)); rec.Code != http.StatusNotFound {
		t.Fatalf("a refused write created the NIC: %d %s", rec.Code, rec.Body)
	}
	rec := h.do(t, http.MethodPut, nic, nicBody, as(home, map[string]string{HeaderAuxiliary: "Bearer " + hub}))
	if rec.Code/100 != 2 {
		t.Fatalf("with the hub's auxiliary token: %d %s", rec.Code, rec.Body)
	}
	// Reads and deletes link nothing.
	if rec := h.do(t, http.MethodGet, nic, "", as(home, nil)); rec.Code != http.StatusOK {
		t.Fatalf("GET the NIC: %d %s", rec.Code, rec.Body)
	}
}

func TestTenantsOptionsValidated(t *testing.T) {
	for _, o := range []Options{
		{Tenants: []Tenant{{ID: "not-a-guid", Subscriptions: []string{hubSub}}}},
		{Tenants: []Tenant{{ID: DefaultTenantID, Subscriptions: []string{hubSub}}}},
		{Tenants: []Tenant{{ID: hubTenant}}},
		{Tenants: []Tenant{{ID: hubTenant, Subscriptions: []string{"x"}}}},
		{Tenants: []Tenant{{ID: hubTenant, Subscriptions: []string{hubSub}}, {ID: "0d0d0d0d-0000-4000-8000-00000000000d", Subscriptions: []string{hubSub}}}},
	} {
		if err := o.withDefaults().validate(); err == nil {
			t.Errorf("%+v: accepted", o.Tenants)
		}
	}
}

// TestTenantsThroughTheSDK: azcore's auxiliary tenants (arm.ClientOptions
// AuxiliaryTenants, with a credential allowed to get the hub tenant's
// tokens) put the hub's token in the auxiliary header, and the cross-tenant
// write passes.
func TestTenantsThroughTheSDK(t *testing.T) {
	env := newSDKEnv(t, twoTenants)
	ctx := ctxT(t)
	cfg := cloud.Configuration{ActiveDirectoryAuthorityHost: env.srv.URL() + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{cloud.ResourceManager: {Audience: "https://management.core.windows.net/", Endpoint: env.srv.URL()}}}
	cred := func(tenant string, also ...string) azcore.TokenCredential {
		c, err := azidentity.NewClientSecretCredential(tenant, DefaultClientID, DefaultClientSecret, &azidentity.ClientSecretCredentialOptions{
			ClientOptions: azcore.ClientOptions{Cloud: cfg, Transport: env.httpc}, DisableInstanceDiscovery: true, AdditionallyAllowedTenants: also})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	opts := func(aux ...string) *arm.ClientOptions {
		return &arm.ClientOptions{ClientOptions: policy.ClientOptions{Cloud: cfg, Transport: env.httpc, Retry: policy.RetryOptions{MaxRetries: -1}}, AuxiliaryTenants: aux}
	}
	env.createGroup(t, "rg", "eastus")
	hubVnets, err := armnetwork.NewVirtualNetworksClient(hubSub, cred(hubTenant), opts())
	if err != nil {
		t.Fatal(err)
	}
	// The hub's resource group, with the hub's token.
	hubGroupReq := subPath(hubSub, "/resourcegroups/net?api-version=2021-04-01")
	tok, err := cred(hubTenant).GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := env.raw(t, http.MethodPut, hubGroupReq, `{"location":"eastus"}`, map[string]string{"Authorization": "Bearer " + tok.Token}); resp.StatusCode/100 != 2 {
		t.Fatalf("hub group: %d %s", resp.StatusCode, body)
	}
	p, err := hubVnets.BeginCreateOrUpdate(ctx, "net", "hub", armnetwork.VirtualNetwork{Location: to.Ptr("eastus"), Properties: &armnetwork.VirtualNetworkPropertiesFormat{
		AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
		Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	nicOf := func(c *armnetwork.InterfacesClient, name string) error {
		p, err := c.BeginCreateOrUpdate(ctx, "rg", name, armnetwork.Interface{Location: to.Ptr("eastus"), Properties: &armnetwork.InterfacePropertiesFormat{
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: to.Ptr("/subscriptions/" + hubSub + "/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/hub/subnets/nodes")}}}}}}, nil)
		if err != nil {
			return err
		}
		_, err = p.PollUntilDone(ctx, pollOpts)
		return err
	}
	without, err := armnetwork.NewInterfacesClient(testSub, cred(DefaultTenantID), opts())
	if err != nil {
		t.Fatal(err)
	}
	if code, status := errorCode(nicOf(without, "a")); code != "LinkedAuthorizationFailed" || status != http.StatusForbidden {
		t.Fatalf("without the auxiliary tenant: %s %d", code, status)
	}
	with, err := armnetwork.NewInterfacesClient(testSub, cred(DefaultTenantID, hubTenant), opts(hubTenant))
	if err != nil {
		t.Fatal(err)
	}
	if err := nicOf(with, "b"); err != nil {
		t.Fatalf("with the auxiliary tenant: %v", err)
	}
}
