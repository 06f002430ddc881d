package azure

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/config"
)

func TestResolveCloud(t *testing.T) {
	publicRM := cloud.AzurePublic.Services[cloud.ResourceManager]
	tests := []struct {
		name          string
		auth          config.AuthConfig
		wantAuthority string
		wantRM        string
		wantAudience  string
		wantNoDisc    bool
		wantErr       string
	}{
		{name: "default is public", wantAuthority: cloud.AzurePublic.ActiveDirectoryAuthorityHost, wantRM: publicRM.Endpoint, wantAudience: publicRM.Audience},
		{name: "public", auth: config.AuthConfig{Cloud: "AzurePublicCloud"}, wantAuthority: "https://login.microsoftonline.com/", wantRM: publicRM.Endpoint, wantAudience: publicRM.Audience},
		{name: "china case-insensitive", auth: config.AuthConfig{Cloud: "azurechinacloud"}, wantAuthority: "https://login.chinacloudapi.cn/",
			wantRM: cloud.AzureChina.Services[cloud.ResourceManager].Endpoint, wantAudience: cloud.AzureChina.Services[cloud.ResourceManager].Audience},
		{name: "us government", auth: config.AuthConfig{Cloud: "AzureUSGovernmentCloud"}, wantAuthority: "https://login.microsoftonline.us/",
			wantRM: cloud.AzureGovernment.Services[cloud.ResourceManager].Endpoint, wantAudience: cloud.AzureGovernment.Services[cloud.ResourceManager].Audience},
		{name: "custom endpoints (Azure Stack)", auth: config.AuthConfig{Cloud: "AzureStackCloud", ResourceManagerEndpoint: "https://management.local.azurestack.external/",
			ActiveDirectoryAuthorityHost: "https://adfs.local.azurestack.external/"},
			wantAuthority: "https://adfs.local.azurestack.external/", wantRM: "https://management.local.azurestack.external/",
			wantAudience: "https://management.local.azurestack.external/", wantNoDisc: true},
		{name: "public name with custom endpoints", auth: config.AuthConfig{ResourceManagerEndpoint: "https://127.0.0.1:8443", ActiveDirectoryAuthorityHost: "https://127.0.0.1:8443/"},
			wantAuthority: "https://127.0.0.1:8443/", wantRM: "https://127.0.0.1:8443", wantAudience: "https://127.0.0.1:8443", wantNoDisc: true},
		{name: "known authority keeps instance discovery", auth: config.AuthConfig{ResourceManagerEndpoint: "https://arm.example", ActiveDirectoryAuthorityHost: "https://login.microsoftonline.com"},
			wantAuthority: "https://login.microsoftonline.com", wantRM: "https://arm.example", wantAudience: "https://arm.example"},
		{name: "unknown cloud without endpoints", auth: config.AuthConfig{Cloud: "AzureGermanCloud"}, wantErr: `cloud "AzureGermanCloud" is not one of`},
		{name: "unknown cloud with only RM", auth: config.AuthConfig{Cloud: "Stack", ResourceManagerEndpoint: "https://arm.example"}, wantErr: "needs both resourceManagerEndpoint and activeDirectoryAuthorityHost"},
		{name: "http endpoint", auth: config.AuthConfig{ResourceManagerEndpoint: "http://arm.example"}, wantErr: `resourceManagerEndpoint "http://arm.example" must be an absolute https URL`},
		{name: "relative authority", auth: config.AuthConfig{ActiveDirectoryAuthorityHost: "login"}, wantErr: `activeDirectoryAuthorityHost "login" must be an absolute https URL`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := resolveCloud(tc.auth)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			rm := cs.cloud.Services[cloud.ResourceManager]
			if cs.cloud.ActiveDirectoryAuthorityHost != tc.wantAuthority || rm.Endpoint != tc.wantRM || rm.Audience != tc.wantAudience || cs.disableInstanceDiscovery != tc.wantNoDisc {
				t.Errorf("got authority=%q rm=%q audience=%q noDiscovery=%v", cs.cloud.ActiveDirectoryAuthorityHost, rm.Endpoint, rm.Audience, cs.disableInstanceDiscovery)
			}
		})
	}
	if got := cloud.AzurePublic.Services[cloud.ResourceManager]; got != publicRM {
		t.Errorf("resolveCloud mutated azcore's public cloud: %+v", got)
	}
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewBaseTransportCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()

	if _, err := newBaseTransport(filepath.Join(t.TempDir(), "missing.pem")); err == nil || !strings.Contains(err.Error(), "caCertFile") {
		t.Errorf("missing file: %v, want an error naming caCertFile", err)
	}
	if _, err := newBaseTransport(writeFile(t, "junk.pem", "not a certificate")); err == nil || !strings.Contains(err.Error(), "contains no PEM certificate") {
		t.Errorf("junk file: %v", err)
	}

	// Without the bundle (the system roots only) the server's private CA
	// is not trusted.
	plain, err := newBaseTransport("")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: plain}).Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("untrusted server accepted without CA bundle")
	}

	pemText := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	tr, err := newBaseTransport(writeFile(t, "ca.pem", pemText))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatalf("GET with CA bundle: %v", err)
	}
	resp.Body.Close()
}

func TestNewCredentialKinds(t *testing.T) {
	const secret = "Sup3r-S3cret-Value"
	tokenFile := writeFile(t, "token", "eyJhbGciOi.fake.jwt")
	copts := azcore.ClientOptions{Cloud: cloud.AzurePublic}
	tests := []struct {
		name    string
		auth    config.AuthConfig
		want    string
		wantErr string
	}{
		{"client secret", config.AuthConfig{TenantID: "t", AADClientID: "c", AADClientSecret: secret}, "*azidentity.ClientSecretCredential", ""},
		{"managed identity system-assigned", config.AuthConfig{UseManagedIdentityExtension: true, AADClientSecret: "msi"}, "*azidentity.ManagedIdentityCredential", ""},
		{"managed identity user-assigned", config.AuthConfig{UseManagedIdentityExtension: true, UserAssignedIdentityID: "00000000-0000-0000-0000-0000000000aa"}, "*azidentity.ManagedIdentityCredential", ""},
		{"workload identity", config.AuthConfig{UseFederatedWorkloadIdentityExtension: true, TenantID: "t", AADClientID: "c", AADFederatedTokenFile: tokenFile}, "*azidentity.WorkloadIdentityCredential", ""},
		{"nothing configured", config.AuthConfig{}, "", "no Azure credential configured"},
		{"both identities", config.AuthConfig{UseManagedIdentityExtension: true, UseFederatedWorkloadIdentityExtension: true}, "", "no Azure credential configured"},
		{"secret without tenant", config.AuthConfig{AADClientID: "c", AADClientSecret: secret}, "", "needs tenantId and aadClientId"},
		{"secret with bad tenant", config.AuthConfig{TenantID: "bad tenant!", AADClientID: "c", AADClientSecret: secret}, "", "clientSecret credential"},
		{"client certificate", config.AuthConfig{TenantID: "t", AADClientID: "c", AADClientCertPath: "../config/testdata/clientcert/rsa-legacy.p12",
			AADClientCertPassword: "p12-Pa55word"}, "*azidentity.ClientCertificateCredential", ""},
		{"client certificate, wrong password", config.AuthConfig{TenantID: "t", AADClientID: "c", AADClientCertPath: "../config/testdata/clientcert/rsa-legacy.p12",
			AADClientCertPassword: secret}, "", "aadClientCertPath"},
		{"client certificate without tenant", config.AuthConfig{AADClientID: "c", AADClientCertPath: "../config/testdata/clientcert/rsa.pem"}, "", "needs tenantId and aadClientId"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{AuthConfig: tc.auth}
			cred, err := newCredential(klog.Background(), cfg, copts, false)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("error leaks the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := typeName(cred); got != tc.want {
				t.Errorf("credential type %s, want %s", got, tc.want)
			}
		})
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *azidentity.ClientSecretCredential:
		return "*azidentity.ClientSecretCredential"
	case *azidentity.ManagedIdentityCredential:
		return "*azidentity.ManagedIdentityCredential"
	case *azidentity.WorkloadIdentityCredential:
		return "*azidentity.WorkloadIdentityCredential"
	case *azidentity.ClientCertificateCredential:
		return "*azidentity.ClientCertificateCredential"
	}
	return "other"
}

func TestRedactError(t *testing.T) {
	base := &ThrottleError{}
	err := redactError(&wrapWithText{msg: "token request failed: client_secret=abc123 rejected", err: base}, "abc123")
	if strings.Contains(err.Error(), "abc123") || !strings.Contains(err.Error(), Redacted) {
		t.Errorf("not redacted: %q", err.Error())
	}
	if Classify(err) != ClassThrottled {
		t.Error("redaction broke the error chain")
	}
	plain := &wrapWithText{msg: "nothing secret"}
	if redactError(plain, "abc123") != error(plain) { //nolint:errorlint // the very same value is the point
		t.Error("error without the secret was rewrapped")
	}
	if redactError(plain, "") != error(plain) { //nolint:errorlint // the very same value is the point
		t.Error("empty secret rewrapped")
	}
}

type wrapWithText struct {
	msg string
	err error
}

func (w *wrapWithText) Error() string { return w.msg }
func (w *wrapWithText) Unwrap() error { return w.err }
