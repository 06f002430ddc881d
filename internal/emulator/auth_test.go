package emulator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
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
