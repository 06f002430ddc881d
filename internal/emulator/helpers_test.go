package emulator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
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
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

const testSub = "11111111-2222-3333-4444-555555555555"

// sdkEnv is an emulator served over TLS plus SDK clients configured for it.
type sdkEnv struct {
	srv       *Server
	emu       *Emulator
	transport *http.Transport
	httpc     *http.Client
	cred      *azidentity.ClientSecretCredential
	opts      *arm.ClientOptions
	lbs       *armnetwork.LoadBalancersClient
	pools     *armnetwork.LoadBalancerBackendAddressPoolsClient
	pips      *armnetwork.PublicIPAddressesClient
	vnets     *armnetwork.VirtualNetworksClient
	subnets   *armnetwork.SubnetsClient
}

// newSDKEnv starts a TLS emulator and builds real SDK clients against it.
// Retries are disabled so tests observe ARM's answers directly.
func newSDKEnv(t testing.TB, o Options) *sdkEnv {
	t.Helper()
	srv, err := Start(o, "", false)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CACertPEM()) {
		t.Fatal("CA PEM did not parse")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true}
	hc := &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := srv.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
	})
	cfg := cloud.Configuration{
		ActiveDirectoryAuthorityHost: srv.URL() + "/",
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Audience: "https://management.core.windows.net/", Endpoint: srv.URL()},
		},
	}
	cred, err := azidentity.NewClientSecretCredential(DefaultTenantID, DefaultClientID, DefaultClientSecret,
		&azidentity.ClientSecretCredentialOptions{
			ClientOptions:            azcore.ClientOptions{Cloud: cfg, Transport: hc},
			DisableInstanceDiscovery: true,
		})
	if err != nil {
		t.Fatalf("credential: %v", err)
	}
	opts := &arm.ClientOptions{ClientOptions: policy.ClientOptions{
		Cloud: cfg, Transport: hc, Retry: policy.RetryOptions{MaxRetries: -1},
	}}
	env := &sdkEnv{srv: srv, emu: srv.Emulator(), transport: tr, httpc: hc, cred: cred, opts: opts}
	must := func(err error) {
		if err != nil {
			t.Fatalf("client: %v", err)
		}
	}
	env.lbs, err = armnetwork.NewLoadBalancersClient(testSub, cred, opts)
	must(err)
	env.pools, err = armnetwork.NewLoadBalancerBackendAddressPoolsClient(testSub, cred, opts)
	must(err)
	env.pips, err = armnetwork.NewPublicIPAddressesClient(testSub, cred, opts)
	must(err)
	env.vnets, err = armnetwork.NewVirtualNetworksClient(testSub, cred, opts)
	must(err)
	env.subnets, err = armnetwork.NewSubnetsClient(testSub, cred, opts)
	must(err)
	return env
}

// token fetches an access token for ARM.
func (env *sdkEnv) token(t testing.TB) string {
	t.Helper()
	tk, err := env.cred.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{"https://management.core.windows.net//.default"}})
	if err != nil {
		t.Fatalf("GetToken: %v", err)
	}
	return tk.Token
}

// raw sends an authenticated raw request to the TLS server.
func (env *sdkEnv) raw(t testing.TB, method, path, body string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	u := path
	if !strings.HasPrefix(path, "http") {
		u = env.srv.URL() + path
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+env.token(t))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := env.httpc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// createGroup creates a resource group through the REST API.
func (env *sdkEnv) createGroup(t testing.TB, rg, loc string) {
	t.Helper()
	resp, b := env.raw(t, http.MethodPut, "/subscriptions/"+testSub+"/resourcegroups/"+rg+"?api-version=2021-04-01", `{"location":"`+loc+`"}`, nil)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("create group %s: %d %s", rg, resp.StatusCode, b)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var pollOpts = &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}

// errorCode returns the ARM error code and status of err.
func errorCode(err error) (string, int) {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode, re.StatusCode
	}
	return "", 0
}

// --- handler-level helpers (no network) ---

// handlerEnv drives an Emulator directly through ServeHTTP.
type handlerEnv struct {
	emu *Emulator
	tok string
}

func newHandlerEnv(t testing.TB, o Options) *handlerEnv {
	t.Helper()
	e := New(o)
	h := &handlerEnv{emu: e}
	h.tok = h.fetchToken(t)
	return h
}

func (h *handlerEnv) fetchToken(t testing.TB) string {
	t.Helper()
	form := url.Values{
		"grant_type": {"client_credentials"}, "client_id": {h.emu.opts.ClientID},
		"client_secret": {h.emu.opts.ClientSecret}, "scope": {"https://management.azure.com/.default openid offline_access profile"},
	}
	req := httptest.NewRequest(http.MethodPost, "/"+h.emu.opts.TenantID+"/oauth2/v2.0/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.emu.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("token: %d %s", rec.Code, rec.Body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("token body %s: %v", rec.Body, err)
	}
	return tr.AccessToken
}

// do sends a request through the handler with the token and returns the
// recorder.
func (h *handlerEnv) do(t testing.TB, method, path, body string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "/", rd)
	rawPath, query, _ := strings.Cut(path, "?")
	u := &url.URL{Path: rawPath, RawQuery: query}
	if p, err := url.PathUnescape(rawPath); err == nil {
		u.Path, u.RawPath = p, rawPath
	}
	req.URL = u
	req.RequestURI = u.RequestURI()
	if h.tok != "" {
		req.Header.Set("Authorization", "Bearer "+h.tok)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	h.emu.ServeHTTP(rec, req)
	return rec
}

// mustDo is do plus a status assertion; it returns the decoded body.
func (h *handlerEnv) mustDo(t testing.TB, want int, method, path, body string) map[string]any {
	t.Helper()
	rec := h.do(t, method, path, body, nil)
	if rec.Code != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, rec.Code, want, rec.Body)
	}
	var m map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, rec.Body)
		}
	}
	return m
}

// errCodeOf extracts error.code from a recorder's body.
func errCodeOf(rec *httptest.ResponseRecorder) string {
	var m struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return m.Error.Code
}

// Paths used by the tests.
func rgPath(rg string) string {
	return "/subscriptions/" + testSub + "/resourcegroups/" + rg + "?api-version=2021-04-01"
}

func netPath(rg, typ, name string) string {
	p := "/subscriptions/" + testSub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/" + typ
	if name != "" {
		p += "/" + name
	}
	return p + "?api-version=" + NetworkAPIVersion
}

func netID(rg, typ, name string) string {
	return "/subscriptions/" + testSub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/" + typ + "/" + name
}
