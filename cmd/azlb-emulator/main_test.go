package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"go.uber.org/goleak"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/emulator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func recordings(t *testing.T) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "fidelity", "arm-recordings")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("ARM recordings not found at %s: %v", dir, err)
	}
	return dir
}

func TestServeWritesCAAndShutsDown(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	var out, errOut syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"--listen", "127.0.0.1:0", "--ca-file", ca, "--latency", "1ms"}, &out, &errOut)
	}()

	re := regexp.MustCompile(`on (https://127\.0\.0\.1:\d+) \(CA certificate: ([^;]+);`)
	deadline := time.Now().Add(10 * time.Second)
	var m []string
	for m == nil {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no startup line; stdout %q stderr %q", out.String(), errOut.String())
		}
		m = re.FindStringSubmatch(out.String())
		if m == nil {
			<-time.After(5 * time.Millisecond)
		}
	}
	if m[2] != ca {
		t.Fatalf("CA path %q, want %q", m[2], ca)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CA file holds no certificate")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	resp, err := (&http.Client{Transport: tr}).Get(m[1] + "/_emulator/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not return after cancel")
	}
}

func TestServeRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--write-budget", "0"}, {"--bogus"},
		{"--throttle", "lenient"}, {"--throttle-reads", "250"}, {"--throttle-writes", "0:1/s"}, {"--throttle-deletes", "5:1/parsec"},
		{"--throttle-global-factor", "0.5"}, {"--throttle", "write-budget", "--throttle-reads", "none"},
		{"--write-budget", "500"}, {"--throttle", "off", "--write-budget-window", "1m"}, {"--throttle", "write-budget", "--write-budget-window", "0s"}, {"extra"}, {"--public-ipv4-cidr", "x", "--listen", "127.0.0.1:0"},
		{"--data-plane", "--public-ipv4-cidr", "20.40.0.0/16", "--listen", "127.0.0.1:0"},
		{"--feature", "SLBAllowConnectionDraining"}, {"--feature", "a/b/c"}, {"--feature", " Microsoft.Network/X"},
		{"--additional-tenant", "x"}, {"--additional-tenant", "0b0b0b0b-0000-4000-8000-00000000000b=not-a-guid", "--listen", "127.0.0.1:0"}} {
		var out, errOut syncBuffer
		if code := serve(context.Background(), args, &out, &errOut); code == 0 {
			t.Errorf("%v: exit 0", args)
		}
	}
}

func TestReplayInProcess(t *testing.T) {
	dir := recordings(t)
	var out, errOut syncBuffer
	code := run([]string{"replay", filepath.Join(dir, "loadbalancerclient.yaml"), filepath.Join(dir, "backendaddresspoolclient.yaml")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "PASS loadbalancerclient.yaml #0 PUT") || !strings.Contains(out.String(), ", 0 failed") {
		t.Fatalf("output %s", out.String())
	}
}

func TestReplayAgainstRunningEmulator(t *testing.T) {
	dir := recordings(t)
	srv, err := emulator.Start(emulator.Options{}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, srv.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	code := run([]string{"replay", "--emulator", srv.URL(), "--ca-file", ca, "--reset", "-v=false", filepath.Join(dir, "subnetclient.yaml")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	if strings.Contains(out.String(), "PASS ") || !strings.Contains(out.String(), "0 failed") {
		t.Fatalf("-v=false output %s", out.String())
	}
	// A cassette the emulator does not serve fails with a non-zero exit.
	unserved := filepath.Join(t.TempDir(), "unserved.yaml")
	if err := os.WriteFile(unserved, []byte(`version: 2
interactions:
- id: 0
  request:
    method: GET
    url: https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.KeyVault/vaults/v?api-version=2023-07-01
  response:
    code: 200
    body: '{"name":"v"}'
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut = syncBuffer{}, syncBuffer{}
	if code := run([]string{"replay", "--emulator", srv.URL(), "--ca-file", ca, unserved}, &out, &errOut); code != 1 {
		t.Fatalf("unserved cassette: exit %d", code)
	}
	if !strings.Contains(out.String(), "FAIL unserved.yaml") {
		t.Fatalf("output %s", out.String())
	}
}

func TestReplayUsage(t *testing.T) {
	var out, errOut syncBuffer
	if code := run([]string{"replay"}, &out, &errOut); code != 2 {
		t.Fatalf("no cassette: exit %d", code)
	}
	if code := run([]string{"replay", "/does/not/exist.yaml"}, &out, &errOut); code != 1 {
		t.Fatalf("missing cassette: exit %d", code)
	}
	cassette := filepath.Join(recordings(t), "resourcegroupclient.yaml")
	if code := run([]string{"replay", "--emulator", "https://127.0.0.1:1", "--ca-file", "/does/not/exist.pem", cassette}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "ca-file") {
		t.Fatalf("missing CA: exit %d: %s", code, errOut.String())
	}
}

func TestVersionFlagPrintsVersionAndServesNothing(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version", "--listen", "256.0.0.1:1"}, &out, &errOut); code != 0 {
		t.Fatalf("run --version = %d, stderr %q", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "azlb-emulator ") || !strings.Contains(out.String(), "commit ") {
		t.Errorf("--version printed %q, want the program name and its build", out.String())
	}
}

// The updateServices cap reaches the emulator's options (a negative one is
// refused by them, naming it).
func TestServeSGWMaxServicesPerUpdate(t *testing.T) {
	var out, errOut syncBuffer
	if code := serve(context.Background(), []string{"--sgw-max-services-per-update", "-1", "--listen", "127.0.0.1:0"}, &out, &errOut); code == 0 ||
		!strings.Contains(errOut.String(), "ServiceGatewayMaxServicesPerUpdate") {
		t.Errorf("exit %d, stderr %q; want a refusal naming ServiceGatewayMaxServicesPerUpdate", code, errOut.String())
	}
}

// TestServeThrottleFlags: --throttle-writes sets the write bucket of every
// subscription and principal; the 429 says when to come back.
func TestServeThrottleFlags(t *testing.T) {
	var out, errOut syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"--listen", "127.0.0.1:0", "--http", "--throttle-writes", "1:1/h"}, &out, &errOut)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, errOut.String())
		}
	}()
	re := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no startup line; stdout %q stderr %q", out.String(), errOut.String())
		}
		if m = re.FindStringSubmatch(out.String()); m == nil {
			<-time.After(5 * time.Millisecond)
		}
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	resp, err := hc.PostForm(m[1]+"/"+emulator.DefaultTenantID+"/oauth2/v2.0/token", map[string][]string{
		"grant_type": {"client_credentials"}, "client_id": {emulator.DefaultClientID}, "client_secret": {emulator.DefaultClientSecret},
		"scope": {"https://management.azure.com/.default"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %v", err)
	}
	put := func() *http.Response {
		req, _ := http.NewRequest(http.MethodPut, m[1]+"/subscriptions/11111111-2222-3333-4444-555555555555/resourcegroups/rg?api-version=2021-04-01", strings.NewReader(`{"location":"eastus"}`))
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if r := put(); r.StatusCode != http.StatusCreated || r.Header.Get("x-ms-ratelimit-remaining-subscription-writes") != "0" {
		t.Fatalf("first write: %d %v", r.StatusCode, r.Header)
	}
	if r := put(); r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "3600" {
		t.Fatalf("second write: %d %v, want 429 with Retry-After 3600", r.StatusCode, r.Header)
	}
}

// TestServeClientCertificate: --client-certificate registers the
// certificates of a PEM file, and the certificate credential azlb builds
// gets a token with their key; a file without a certificate is refused.
func TestServeClientCertificate(t *testing.T) {
	pemFile := filepath.Join("..", "..", "internal", "config", "testdata", "clientcert", "rsa.pem")
	for _, bad := range []string{filepath.Join(t.TempDir(), "missing.pem"), filepath.Join("..", "..", "internal", "config", "testdata", "clientcert", "README.md")} {
		var out, errOut syncBuffer
		if code := serve(context.Background(), []string{"--listen", "127.0.0.1:0", "--client-certificate", bad}, &out, &errOut); code == 0 ||
			!strings.Contains(errOut.String(), "--client-certificate") {
			t.Errorf("%s: exit %d, stderr %q", bad, code, errOut.String())
		}
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	var out, errOut syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- serve(ctx, []string{"--listen", "127.0.0.1:0", "--ca-file", ca, "--client-certificate", pemFile}, &out, &errOut)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, errOut.String())
		}
	}()
	re := regexp.MustCompile(`on (https://127\.0\.0\.1:\d+) `)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("no startup line; stdout %q stderr %q", out.String(), errOut.String())
		}
		if m = re.FindStringSubmatch(out.String()); m == nil {
			<-time.After(5 * time.Millisecond)
		}
	}
	caPEM, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	certs, key, err := config.LoadClientCertificate(pemFile, "")
	if err != nil {
		t.Fatal(err)
	}
	cred, err := azidentity.NewClientCertificateCredential(emulator.DefaultTenantID, emulator.DefaultClientID, certs, key,
		&azidentity.ClientCertificateCredentialOptions{ClientOptions: azcore.ClientOptions{
			Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: m[1] + "/"}, Transport: &http.Client{Transport: tr}},
			DisableInstanceDiscovery: true, SendCertificateChain: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://management.azure.com/.default"}}); err != nil {
		t.Fatalf("token with the registered certificate: %v", err)
	}
}
