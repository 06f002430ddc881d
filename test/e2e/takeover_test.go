package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/verify"
)

// TestTakeoverFromAzureCloudProvider: the real controller starts on a
// resource group as the Azure cloud provider leaves it
// (devenv.SeedCloudProviderCluster: its frontend, rule, probe and public IP
// names and tags, a shared IP, an internal frontend named a<uid>-<subnet>,
// its NSG rules) and on the Services that provider served. Every Service
// keeps its IP; the first start writes only what differs from azlb's
// layout (the two cluster pools' drain period); azlb verify is clean; a
// second start writes nothing.
func TestTakeoverFromAzureCloudProvider(t *testing.T) {
	ctx := context.Background()
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	notThrottled(t, env)
	nodes := map[string]string{"tko-n1": "10.240.100.4", "tko-n2": "10.240.100.5"}
	for n, ip := range nodes {
		createNode(t, n, ip, nil)
	}
	ns := createNamespace(t)
	seeded, err := env.SeedCloudProviderCluster(ctx, suite.cs, devenv.TakeoverOptions{Namespace: ns, Nodes: nodes, Services: []devenv.TakeoverService{
		{Name: "web", Port: 80},
		{Name: "api", Port: 8080},
		{Name: "dns-tcp", Port: 53, SharedIP: "dns-ip"},
		{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP, SharedIP: "dns-ip"},
		{Name: "internal", Port: 80, Internal: true},
		{Name: "internal-subnet", Port: 80, Internal: true, Subnet: devenv.SubnetName},
		{Name: "restricted", Port: 443, SourceRanges: []string{"203.0.113.0/24"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for name := range seeded.Services {
		t.Cleanup(func() { deleteService(t, ns, name) })
	}
	cfgPath := writeConfigFor(t, env, nil)
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	clients := armClients(t, env)

	start := func(name string) []string {
		t.Helper()
		env.Emulator().ResetRequests()
		// The previous start's events go, so that only this start's
		// EnsuredLoadBalancer events count.
		if err := suite.cs.CoreV1().Events(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		c := startController(t, name, cfgPath, false)
		eventually(t, 90*time.Second, "every Service ensured", func(ctx context.Context) (bool, error) {
			return ensured(ctx, ns, len(seeded.Services))
		})
		for name, want := range seeded.IPs {
			if got := ingressIP(t, ns, name); got != want {
				t.Errorf("%s: ingress %s, want %s, the address it had", name, got, want)
			}
		}
		eventually(t, 30*time.Second, "azlb verify clean", func(ctx context.Context) (bool, error) {
			rep, err := verify.Run(ctx, cfg, clients, suite.cs)
			return err == nil && rep.Clean(), nil
		})
		c.stop()
		var writes []string
		for _, r := range env.Emulator().Requests() {
			if r.Kind == "arm" && r.Method != http.MethodGet {
				writes = append(writes, r.Method+" "+r.Path)
			}
		}
		return writes
	}
	first := start("a")
	t.Logf("first start: %d ARM writes: %v", len(first), first)
	for _, w := range first {
		if !strings.HasSuffix(w, "/backendAddressPools/kubernetes") {
			t.Errorf("first start wrote %s: only the cluster pools' drain period differs from azlb's layout", w)
		}
	}
	if second := start("b"); len(second) != 0 {
		t.Errorf("second start wrote %v, want nothing", second)
	}
}

// ensured reports whether n Services of ns have an EnsuredLoadBalancer
// event.
func ensured(ctx context.Context, ns string, n int) (bool, error) {
	evs, err := suite.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=EnsuredLoadBalancer"})
	if err != nil {
		return false, err
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		seen[e.InvolvedObject.Name] = true
	}
	return len(seen) >= n, nil
}
