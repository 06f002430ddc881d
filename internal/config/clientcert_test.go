package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// certPassword is the password of the test PKCS#12 files
// (testdata/clientcert/README.md).
const certPassword = "p12-Pa55word"

func certFile(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "clientcert", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// certDoc is an azure.json authenticating with the client certificate at
// path (and password, if set).
func certDoc(t testing.TB, path, password string) []byte {
	t.Helper()
	o := map[string]any{"aadClientSecret": nil, "aadClientCertPath": path}
	if password != "" {
		o["aadClientCertPassword"] = password
	}
	return doc(t, o)
}

func TestClientCertificateLoads(t *testing.T) {
	for _, tt := range []struct{ file, password string }{
		{"rsa.pem", ""},
		{"rsa-legacy.p12", certPassword},
		{"rsa-nopass.p12", ""},
	} {
		t.Run(tt.file, func(t *testing.T) {
			c := mustLoad(t, certDoc(t, certFile(t, tt.file), tt.password))
			if m := c.AuthMethod(); m != AuthMethodClientCertificate {
				t.Fatalf("AuthMethod = %q, want %q", m, AuthMethodClientCertificate)
			}
			certs, key, err := c.ClientCertificate()
			if err != nil || len(certs) != 1 || key == nil {
				t.Fatalf("ClientCertificate: %d certs, key %T, %v", len(certs), key, err)
			}
			if got := certs[0].Subject.CommonName; got != "azlb-test-client" {
				t.Errorf("certificate %q, want azlb-test-client", got)
			}
			if s := c.String(); !strings.Contains(s, "auth=clientCertificate(aadClientId=") {
				t.Errorf("String() = %s", s)
			}
		})
	}
}

// TestClientCertificateRefused: every file or combination azlb cannot
// authenticate with is refused when the configuration loads, naming the
// field and what is wrong; the password is in no message.
func TestClientCertificateRefused(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		data     []byte
		field    string
		contains string
	}{
		{"missing file", certDoc(t, filepath.Join(dir, "nope.pem"), ""), "aadClientCertPath", "no such file"},
		{"a directory", certDoc(t, dir, ""), "aadClientCertPath", "not a regular file"},
		{"empty file", certDoc(t, empty, ""), "aadClientCertPath", "is empty"},
		{"wrong password", certDoc(t, certFile(t, "rsa-legacy.p12"), "not-the-password"), "aadClientCertPath", "aadClientCertPassword is not its password"},
		{"no password", certDoc(t, certFile(t, "rsa-legacy.p12"), ""), "aadClientCertPath", "it has a password; set aadClientCertPassword"},
		{"AES PKCS#12", certDoc(t, certFile(t, "rsa-aes.p12"), certPassword), "aadClientCertPath", "openssl pkcs12 -export -legacy"},
		{"PEM with a password", certDoc(t, certFile(t, "rsa.pem"), certPassword), "aadClientCertPath", "encrypted PEM key is not supported"},
		{"encrypted PEM key", certDoc(t, certFile(t, "rsa-encrypted-key.pem"), ""), "aadClientCertPath", "encrypted PEM private key"},
		{"ECDSA key", certDoc(t, certFile(t, "ec.pem"), ""), "aadClientCertPath", "ecdsa.PrivateKey; Azure AD client assertions are signed with an RSA key"},
		{"key of another certificate", certDoc(t, certFile(t, "mismatched.pem"), ""), "aadClientCertPath", "belongs to none of its 1 certificate(s)"},
		{"certificate without key", certDoc(t, certFile(t, "cert-only.pem"), ""), "aadClientCertPath", "no (unencrypted) private key"},
		{"not a certificate", certDoc(t, certFile(t, "README.md"), ""), "aadClientCertPath", "neither PEM"},
		{"with a client secret", doc(t, map[string]any{"aadClientCertPath": certFile(t, "rsa.pem")}), "aadClientCertPath", "cannot be combined with aadClientSecret"},
		{"with managed identity", doc(t, map[string]any{"aadClientSecret": nil, "useManagedIdentityExtension": true, "aadClientCertPath": certFile(t, "rsa.pem")}),
			"aadClientCertPath", "cannot be combined with useManagedIdentityExtension"},
		{"with workload identity", doc(t, map[string]any{"aadClientSecret": nil, "useFederatedWorkloadIdentityExtension": true, "aadFederatedTokenFile": "/t",
			"aadClientCertPath": certFile(t, "rsa.pem")}), "aadClientCertPath", "cannot be combined with useFederatedWorkloadIdentityExtension"},
		{"password without certificate", doc(t, map[string]any{"aadClientCertPassword": certPassword}), "aadClientCertPassword", "requires aadClientCertPath"},
		{"no tenant", doc(t, map[string]any{"aadClientSecret": nil, "tenantId": nil, "aadClientCertPath": certFile(t, "rsa.pem")}), "tenantId", "client certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := loadErr(t, tt.data)
			var fields []string
			for _, fe := range fieldErrors(err) {
				fields = append(fields, fe.Field)
			}
			if !strings.Contains(strings.Join(fields, ","), tt.field) {
				t.Errorf("error fields %q, want %s:\n%v", fields, tt.field, err)
			}
			assertErrorContains(t, err, tt.field+": ", tt.contains)
			if strings.Contains(err.Error(), certPassword) || strings.Contains(err.Error(), "not-the-password") {
				t.Errorf("error holds the password:\n%v", err)
			}
		})
	}
}

// TestClientCertPasswordNeverPrints: the password is redacted wherever the
// configuration is shown, as the client secret is, and scrubbed from the
// error of a file that does not parse next to it.
func TestClientCertPasswordNeverPrints(t *testing.T) {
	c := mustLoad(t, certDoc(t, certFile(t, "rsa-legacy.p12"), certPassword))
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), string(b)} {
		if strings.Contains(out, certPassword) {
			t.Errorf("the password is printed: %s", out)
		}
	}
	broken := []byte(`{"aadClientCertPassword": "` + certPassword + `" "location": "x"}`)
	_, err = Load(bytes.NewReader(broken))
	if err == nil || strings.Contains(err.Error(), certPassword) {
		t.Errorf("error of a broken file: %v", err)
	}
	yamlBroken := []byte("aadClientCertPassword: " + certPassword + "\nlocation: [\n")
	_, err = Load(bytes.NewReader(yamlBroken))
	if err == nil || strings.Contains(err.Error(), certPassword) {
		t.Errorf("error of a broken YAML file: %v", err)
	}
}
