package replay

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/azlb/azlb/internal/emulator"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recordingsDir finds ../shared/fidelity/arm-recordings relative to the
// module root.
func recordingsDir(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root (go.mod) not found")
		}
		dir = parent
	}
	rec := filepath.Join(dir, "..", "shared", "fidelity", "arm-recordings")
	if _, err := os.Stat(rec); err != nil {
		t.Skipf("ARM recordings not found at %s (they live in ../shared/fidelity next to the module): %v", rec, err)
	}
	return rec
}

// covered lists the cassettes the emulator must replay.
var covered = map[string]bool{
	"loadbalancerclient.yaml":             true,
	"backendaddresspoolclient.yaml":       true,
	"publicipaddressclient.yaml":          true,
	"resourcegroupclient.yaml":            true,
	"virtualnetworkclient.yaml":           true,
	"subnetclient.yaml":                   true,
	"securitygroupclient.yaml":            true,
	"publicipprefixclient.yaml":           true,
	"interfaceclient.yaml":                true,
	"natgatewayclient.yaml":               true,
	"virtualmachinescalesetclient.yaml":   true,
	"virtualmachinescalesetvmclient.yaml": true,
	"virtualmachineclient.yaml":           true,
	"availabilitysetclient.yaml":          true,
	"servicegatewayclient.yaml":           true,
	"privatelinkserviceclient.yaml":       true,
	"privateendpointclient.yaml":          true,
}

// notCovered lists cassettes the emulator deliberately does not serve.
var notCovered = map[string]string{}

func TestRecordingsAreClassified(t *testing.T) {
	dir := recordingsDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no cassettes in %s", dir)
	}
	for _, f := range files {
		n := filepath.Base(f)
		if _, ok := covered[n]; ok {
			continue
		}
		if _, ok := notCovered[n]; !ok {
			t.Errorf("cassette %s is neither replayed nor listed as not covered", n)
		}
	}
}

func newTarget(t *testing.T) (Target, func()) {
	t.Helper()
	srv, err := emulator.Start(emulator.Options{}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CACertPEM())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return Target{
			BaseURL: srv.URL(), Client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
			TenantID: emulator.DefaultTenantID, ClientID: emulator.DefaultClientID, ClientSecret: emulator.DefaultClientSecret,
		}, func() {
			tr.CloseIdleConnections()
			_ = srv.Close()
		}
}

func TestReplayRecordings(t *testing.T) {
	dir := recordingsDir(t)
	names := make([]string, 0, len(covered))
	for n := range covered {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Run(strings.TrimSuffix(n, ".yaml"), func(t *testing.T) {
			c, err := Load(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			replayAll(t, c, OptionsFor(n))
		})
	}
}

// The China-cloud recording of the service gateway client is the public
// one with the host management.chinacloudapi.cn and the region chinaeast2:
// the emulator serves any host and region, so that variant replays too.
func TestReplayServiceGatewayChinaCloudVariant(t *testing.T) {
	dir := recordingsDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "servicegatewayclient.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	china := strings.NewReplacer("management.azure.com", "management.chinacloudapi.cn", "eastus2", "chinaeast2").Replace(string(raw))
	if !strings.Contains(china, "chinaeast2") || strings.Contains(china, "eastus2") {
		t.Fatal("the substitution did not take")
	}
	c, err := Parse("servicegatewayclient-china.yaml", []byte(china))
	if err != nil {
		t.Fatal(err)
	}
	replayAll(t, c, OptionsFor("servicegatewayclient.yaml"))
}

// replayAll replays a cassette against a fresh emulator and fails on every
// interaction that does not match.
func replayAll(t *testing.T, c *Cassette, opts Options) {
	t.Helper()
	tgt, stop := newTarget(t)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results, err := Run(ctx, c, tgt, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(c.Interactions) {
		t.Fatalf("replayed %d of %d interactions", len(results), len(c.Interactions))
	}
	for _, r := range results {
		if !r.Passed() {
			t.Error(r.String())
		}
	}
}
