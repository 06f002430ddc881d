package emulator

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // the x5t thumbprint under test
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
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

func tokenRequest(e *Emulator, tenant string, form url.Values) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/"+tenant+"/oauth2/v2.0/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func TestAADTokenEndpoint(t *testing.T) {
	e := New(Options{})
	good := func() url.Values {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {DefaultClientID},
			"client_secret": {DefaultClientSecret}, "scope": {"https://management.azure.com//.default openid profile offline_access"}}
	}
	cases := []struct {
		name   string
		tenant string
		mutate func(url.Values)
		status int
		err    string
		code   int
	}{
		{"ok", DefaultTenantID, func(url.Values) {}, 200, "", 0},
		{"wrong secret", DefaultTenantID, func(v url.Values) { v.Set("client_secret", "hunter2-wrong") }, 401, "invalid_client", 7000215},
		{"missing secret", DefaultTenantID, func(v url.Values) { v.Del("client_secret") }, 401, "invalid_client", 7000218},
		{"unknown client", DefaultTenantID, func(v url.Values) { v.Set("client_id", "someone-else") }, 400, "unauthorized_client", 700016},
		{"unknown tenant", "00000000-0000-0000-0000-00000000dead", func(url.Values) {}, 400, "invalid_request", 90002},
		{"wrong grant", DefaultTenantID, func(v url.Values) { v.Set("grant_type", "password") }, 400, "unsupported_grant_type", 70003},
		{"no scope", DefaultTenantID, func(v url.Values) { v.Del("scope") }, 400, "invalid_request", 900144},
		{"scope without .default", DefaultTenantID, func(v url.Values) { v.Set("scope", "https://management.azure.com/user_impersonation") }, 400, "invalid_scope", 1002012},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := good()
			tc.mutate(f)
			rec := tokenRequest(e, tc.tenant, f)
			if rec.Code != tc.status {
				t.Fatalf("status %d want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(rec.Body.String(), "hunter2-wrong") || strings.Contains(rec.Body.String(), DefaultClientSecret) {
				t.Fatal("a client secret leaked into the response")
			}
			if tc.status == 200 {
				if m["token_type"] != "Bearer" || m["access_token"] == "" || m["expires_in"] == nil || m["ext_expires_in"] == nil {
					t.Fatalf("token body %v", m)
				}
				return
			}
			codes, _ := m["error_codes"].([]any)
			if m["error"] != tc.err || len(codes) != 1 || int(codes[0].(float64)) != tc.code ||
				!strings.HasPrefix(m["error_description"].(string), "AADSTS") || m["trace_id"] == nil || m["correlation_id"] == nil {
				t.Fatalf("error body %v", m)
			}
		})
	}
}

func TestAADOpenIDConfiguration(t *testing.T) {
	e := New(Options{TenantID: "aaaaaaaa-0000-0000-0000-000000000001"})
	req := httptest.NewRequest(http.MethodGet, "https://127.0.0.1:9999/aaaaaaaa-0000-0000-0000-000000000001/v2.0/.well-known/openid-configuration", nil)
	req.TLS = nil
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	for _, k := range []string{"token_endpoint", "authorization_endpoint", "issuer"} {
		if s, _ := m[k].(string); !strings.HasPrefix(s, "http://127.0.0.1:9999/aaaaaaaa-0000-0000-0000-000000000001/") {
			t.Errorf("%s = %v", k, m[k])
		}
	}
	req = httptest.NewRequest(http.MethodGet, "/other/v2.0/.well-known/openid-configuration", nil)
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != 400 {
		t.Fatalf("unknown tenant: %d", rec.Code)
	}
}

func TestARMAuthentication(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	other := New(Options{})
	foreign, _ := other.issueToken("https://management.azure.com/", DefaultTenantID, time.Now())
	expired, _ := h.emu.issueToken("https://management.azure.com/", DefaultTenantID, time.Now().Add(-2*time.Hour))
	graph, _ := h.emu.issueToken("https://graph.microsoft.com/", DefaultTenantID, time.Now())
	cases := []struct {
		name, auth, code string
	}{
		{"missing", "", "AuthenticationFailed"},
		{"basic scheme", "Basic dXNlcjpwYXNz", "AuthenticationFailed"},
		{"garbage", "Bearer not.a.token", "InvalidAuthenticationToken"},
		{"foreign signature", "Bearer " + foreign, "InvalidAuthenticationToken"},
		{"tampered", "Bearer " + h.tok[:len(h.tok)-2] + "xx", "InvalidAuthenticationToken"},
		{"expired", "Bearer " + expired, "ExpiredAuthenticationToken"},
		{"wrong audience", "Bearer " + graph, "InvalidAuthenticationTokenAudience"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(t, http.MethodGet, rgPath("rg"), "", map[string]string{"Authorization": tc.auth})
			if rec.Code != http.StatusUnauthorized || errCodeOf(rec) != tc.code {
				t.Fatalf("%d %q: %s", rec.Code, errCodeOf(rec), rec.Body)
			}
			if w := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(w, "Bearer authorization_uri=") || !strings.Contains(w, `error="invalid_token"`) {
				t.Fatalf("WWW-Authenticate %q", w)
			}
			if rec.Header().Get("x-ms-request-id") == "" {
				t.Fatal("401 without x-ms-request-id")
			}
		})
	}
	if rec := h.do(t, http.MethodGet, rgPath("rg"), "", nil); rec.Code != http.StatusNotFound {
		t.Fatalf("valid token: %d", rec.Code)
	}
}

func TestAzidentityAgainstEmulator(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	tk, err := env.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err != nil || tk.Token == "" || time.Until(tk.ExpiresOn) < 50*time.Minute {
		t.Fatalf("GetToken: %v (expires %v)", err, tk.ExpiresOn)
	}
	cfg := cloud.Configuration{ActiveDirectoryAuthorityHost: env.srv.URL() + "/"}
	bad, err := azidentity.NewClientSecretCredential(DefaultTenantID, DefaultClientID, "definitely-wrong-secret",
		&azidentity.ClientSecretCredentialOptions{ClientOptions: azcore.ClientOptions{Cloud: cfg, Transport: env.httpc}, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err == nil || !strings.Contains(err.Error(), "AADSTS7000215") {
		t.Fatalf("wrong secret: %v", err)
	}
	if strings.Contains(err.Error(), "definitely-wrong-secret") {
		t.Fatal("the secret appears in the error")
	}
}

// testClientCert is a self-signed RSA certificate and its key, valid from
// notBefore to notAfter.
func testClientCert(t testing.TB, notBefore, notAfter time.Time) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "azlb-emulator-test"},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func validCert(t testing.TB) (*x509.Certificate, *rsa.PrivateKey) {
	return testClientCert(t, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// TestClientCertificateCredentialAgainstEmulator: azidentity's certificate
// credential (as azlb builds it) gets an ARM token from the emulator with a
// registered certificate, and AADSTS700027 with any other.
func TestClientCertificateCredentialAgainstEmulator(t *testing.T) {
	cert, key := validCert(t)
	env := newSDKEnv(t, Options{ClientCertificates: []*x509.Certificate{cert}})
	cfg := cloud.Configuration{ActiveDirectoryAuthorityHost: env.srv.URL() + "/"}
	credential := func(c *x509.Certificate, k crypto.PrivateKey) *azidentity.ClientCertificateCredential {
		cred, err := azidentity.NewClientCertificateCredential(DefaultTenantID, DefaultClientID, []*x509.Certificate{c}, k,
			&azidentity.ClientCertificateCredentialOptions{ClientOptions: azcore.ClientOptions{Cloud: cfg, Transport: env.httpc},
				DisableInstanceDiscovery: true, SendCertificateChain: true})
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	scope := policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}}
	tk, err := credential(cert, key).GetToken(context.Background(), scope)
	if err != nil {
		t.Fatalf("registered certificate: %v", err)
	}
	if _, ok := env.emu.verifyToken(tk.Token); !ok {
		t.Fatal("the token does not verify")
	}

	other, otherKey := validCert(t)
	_, err = credential(other, otherKey).GetToken(context.Background(), scope)
	if err == nil || !strings.Contains(err.Error(), "AADSTS700027") || !strings.Contains(err.Error(), "not registered on application") {
		t.Fatalf("unregistered certificate: %v", err)
	}
	env.emu.SetClientCertificates(cert, other)
	if _, err := credential(other, otherKey).GetToken(context.Background(), scope); err != nil {
		t.Fatalf("certificate registered at run time: %v", err)
	}
}

// assertion builds a client assertion; mutate edits header and claims
// before it is signed with key.
func assertion(t testing.TB, cert *x509.Certificate, key *rsa.PrivateKey, alg string, mutate func(h, c map[string]any)) string {
	t.Helper()
	now := time.Now()
	h := map[string]any{"alg": alg, "typ": "JWT"}
	if alg == "RS256" {
		s := sha1.Sum(cert.Raw) //nolint:gosec // see import
		h["x5t"] = base64.RawURLEncoding.EncodeToString(s[:])
	} else {
		s := sha256.Sum256(cert.Raw)
		h["x5t#S256"] = base64.StdEncoding.EncodeToString(s[:]) // as MSAL writes it
	}
	c := map[string]any{"aud": "http://example.com/" + DefaultTenantID + "/oauth2/v2.0/token", "iss": DefaultClientID, "sub": DefaultClientID,
		"jti": "8a5d7b1e-0000-4000-8000-000000000001", "nbf": now.Unix(), "exp": now.Add(10 * time.Minute).Unix()}
	if mutate != nil {
		mutate(h, c)
	}
	hb, _ := json.Marshal(h)
	cb, _ := json.Marshal(c)
	signed := base64.RawURLEncoding.EncodeToString(hb) + "." + base64.RawURLEncoding.EncodeToString(cb)
	digest := sha256.Sum256([]byte(signed))
	var sig []byte
	var err error
	switch alg {
	case "PS256":
		sig, err = rsa.SignPSS(rand.Reader, key, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
	default:
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// TestClientAssertionChecks: each way an assertion can be wrong is
// refused with AAD's error; the right ones pass. The handler is reached as
// http://example.com (httptest's host), so that is the token endpoint.
func TestClientAssertionChecks(t *testing.T) {
	cert, key := validCert(t)
	expiredCert, expiredKey := testClientCert(t, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	_, otherKey := validCert(t)
	e := New(Options{ClientCertificates: []*x509.Certificate{cert, expiredCert}})
	form := func(a string, edit func(url.Values)) url.Values {
		v := url.Values{"grant_type": {"client_credentials"}, "client_id": {DefaultClientID}, "scope": {"https://management.azure.com/.default"},
			"client_assertion_type": {clientAssertionType}, "client_assertion": {a}}
		if edit != nil {
			edit(v)
		}
		return v
	}
	set := func(k string, v any) func(h, c map[string]any) { return func(_, c map[string]any) { c[k] = v } }
	for _, tc := range []struct {
		name string
		form url.Values
		code int
		text string
	}{
		{"PS256 with x5t#S256", form(assertion(t, cert, key, "PS256", nil), nil), 0, ""},
		{"RS256 with x5t", form(assertion(t, cert, key, "RS256", nil), nil), 0, ""},
		{"x5c naming the certificate", form(assertion(t, cert, key, "PS256", func(h, _ map[string]any) {
			h["x5c"] = []string{base64.StdEncoding.EncodeToString(cert.Raw)}
		}), nil), 0, ""},
		{"audience a list of one", form(assertion(t, cert, key, "PS256", set("aud", []string{"http://example.com/" + DefaultTenantID + "/oauth2/v2.0/token"})), nil), 0, ""},
		{"no assertion type", form(assertion(t, cert, key, "PS256", nil), func(v url.Values) { v.Del("client_assertion_type") }), 900144, "client_assertion_type"},
		{"wrong assertion type", form(assertion(t, cert, key, "PS256", nil), func(v url.Values) { v.Set("client_assertion_type", "bearer") }), 50027, "client_assertion_type"},
		{"secret and assertion", form(assertion(t, cert, key, "PS256", nil), func(v url.Values) { v.Set("client_secret", DefaultClientSecret) }), 90014, "one credential"},
		{"not a JWT", form("abc.def", nil), 50027, "compact serialization"},
		{"HS256", form(assertion(t, cert, key, "PS256", func(h, _ map[string]any) { h["alg"] = "HS256" }), nil), 50027, "'HS256' is not supported"},
		{"no thumbprint", form(assertion(t, cert, key, "PS256", func(h, _ map[string]any) { delete(h, "x5t#S256") }), nil), 50027, "No certificate thumbprint"},
		{"unregistered key", form(assertion(t, cert, otherKey, "PS256", func(h, _ map[string]any) { h["x5t#S256"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }), nil),
			700027, "not registered on application"},
		{"signed by another key", form(assertion(t, cert, otherKey, "PS256", nil), nil), 700027, "did not match the expected signature"},
		{"expired certificate", form(assertion(t, expiredCert, expiredKey, "PS256", nil), nil), 700027, "The key used is expired"},
		{"x5c of another certificate", form(assertion(t, cert, key, "PS256", func(h, _ map[string]any) {
			h["x5c"] = []string{base64.StdEncoding.EncodeToString(expiredCert.Raw)}
		}), nil), 50027, "x5c"},
		{"issuer not the client", form(assertion(t, cert, key, "PS256", set("iss", "someone-else")), nil), 700021, "doesn't match 'client_id'"},
		{"subject not the client", form(assertion(t, cert, key, "PS256", set("sub", "someone-else")), nil), 700021, "doesn't match 'client_id'"},
		{"audience another tenant's", form(assertion(t, cert, key, "PS256", set("aud", "http://example.com/other-tenant/oauth2/v2.0/token")), nil), 700023, "audience"},
		{"audience the v1 endpoint", form(assertion(t, cert, key, "PS256", set("aud", "http://example.com/"+DefaultTenantID+"/oauth2/token")), nil), 700023, "audience"},
		{"no audience", form(assertion(t, cert, key, "PS256", func(_, c map[string]any) { delete(c, "aud") }), nil), 700023, "audience"},
		{"no jti", form(assertion(t, cert, key, "PS256", func(_, c map[string]any) { delete(c, "jti") }), nil), 50027, "jti"},
		{"no exp", form(assertion(t, cert, key, "PS256", func(_, c map[string]any) { delete(c, "exp") }), nil), 50027, "exp"},
		{"expired", form(assertion(t, cert, key, "PS256", set("exp", time.Now().Add(-time.Second).Unix())), nil), 700024, "not within its valid time range"},
		{"not yet valid", form(assertion(t, cert, key, "PS256", set("nbf", time.Now().Add(time.Minute).Unix())), nil), 700024, "not within its valid time range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tokenRequest(e, DefaultTenantID, tc.form)
			var m map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			if tc.code == 0 {
				if rec.Code != 200 || m["access_token"] == nil {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				return
			}
			codes, _ := m["error_codes"].([]any)
			if rec.Code/100 != 4 || len(codes) != 1 || int(codes[0].(float64)) != tc.code || !strings.Contains(m["error_description"].(string), tc.text) {
				t.Fatalf("status %d, want AADSTS%d with %q: %s", rec.Code, tc.code, tc.text, rec.Body)
			}
		})
	}
}

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
