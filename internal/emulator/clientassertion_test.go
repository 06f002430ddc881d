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
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

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
