package provider

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"k8s.io/utils/ptr"
)

// takeoverServices is a mix as the Azure cloud provider leaves it: public
// Services, a pair sharing a public IP, internal ones (one with the
// internal-subnet annotation, whose frontend is named a<uid>-<subnet>),
// one with source ranges, a UDP one.
func takeoverServices(n int) []devenv.TakeoverService {
	out := []devenv.TakeoverService{
		{Name: "dns-tcp", Port: 53, SharedIP: "dns-ip"},
		{Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP, SharedIP: "dns-ip"},
		{Name: "internal", Port: 80, Internal: true},
		{Name: "internal-subnet", Port: 80, Internal: true, Subnet: devenv.SubnetName},
		{Name: "restricted", Port: 443, SourceRanges: []string{"203.0.113.0/24"}},
	}
	for i := len(out); i < n; i++ {
		out = append(out, devenv.TakeoverService{Name: fmt.Sprintf("svc-%04d", i), Port: 80})
	}
	return out
}

// takeover seeds a resource group as the Azure cloud provider leaves it
// and returns the environment, the Services and their nodes.
func takeover(tb testing.TB, n int) (*devenv.Env, []*v1.Service, []*v1.Node, *devenv.TakeoverCluster) {
	tb.Helper()
	ctx := context.Background()
	// 500 Services' rules on one load balancer: above the default
	// maximumLoadBalancerRuleCount (250), as that provider's clusters
	// of this size had to raise it too.
	env, err := devenv.Start(ctx, tb.TempDir(), emulator.Options{Throttle: emulator.NoThrottle}, func(c *config.Config) { c.MaximumLoadBalancerRuleCount = 1000 })
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = env.Close() })
	// Node addresses away from the subnet's first ones, which internal
	// frontends take (the nodes have no network interface here).
	nodes := []*v1.Node{testNode("n1", "10.240.100.4"), testNode("n2", "10.240.100.5")}
	seeded, err := env.SeedCloudProviderCluster(ctx, fake.NewClientset(), devenv.TakeoverOptions{
		Nodes: map[string]string{"n1": "10.240.100.4", "n2": "10.240.100.5"}, Services: takeoverServices(n), NodePortBase: 30000,
	})
	if err != nil {
		tb.Fatal(err)
	}
	var svcs []*v1.Service
	for _, s := range takeoverServices(n) {
		svcs = append(svcs, seeded.Services[s.Name])
	}
	return env, svcs, nodes, seeded
}

// startTakeover is a controller's start on the seeded resource group: a
// new provider (new stores), every Service ensured once.
func startTakeover(tb testing.TB, env *devenv.Env, svcs []*v1.Service, nodes []*v1.Node) (writes []string) {
	tb.Helper()
	ctx := context.Background()
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(clients.Close)
	p := newSGProvider(tb, env.Config, clients, record.NewFakeRecorder(10000))
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range svcs {
		_ = idx.Add(s)
	}
	p.SetServiceLister(corelisters.NewServiceLister(idx))
	p.nodes = nodeLister(nodes...)
	env.Emulator().ResetRequests()
	// benchWorkers at once, as the service controller's workers.
	work := make(chan *v1.Service)
	var wg sync.WaitGroup
	for range benchWorkers {
		wg.Go(func() {
			for s := range work {
				st, err := p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes)
				if err != nil {
					tb.Errorf("%s: %v", s.Name, err)
					continue
				}
				if got, want := st.Ingress[0].IP, s.Status.LoadBalancer.Ingress[0].IP; got != want {
					tb.Errorf("%s: ingress %s, want %s, the address it had", s.Name, got, want)
				}
			}
		})
	}
	for _, s := range svcs {
		work <- s
	}
	close(work)
	wg.Wait()
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet {
			writes = append(writes, r.Method+" "+r.Path)
		}
	}
	return writes
}

// TestTakeoverFromAzureCloudProvider: azlb adopts the resource group the
// Azure cloud provider left: every Service keeps its IP, and nothing
// differs from azlb's layout (the frontends, a<uid>-<subnet> of an
// internal Service included, rules, probes, pools, public IPs, the shared
// IP and the NSG rules), so the first start writes nothing; neither does a
// second. With loadBalancerBackendPoolDrainPeriodInSeconds set (that
// provider sets none), the first start writes the two cluster pools' drain
// period, and nothing else.
func TestTakeoverFromAzureCloudProvider(t *testing.T) {
	env, svcs, nodes, _ := takeover(t, 12)
	if first := startTakeover(t, env, svcs, nodes); len(first) != 0 {
		t.Errorf("first start wrote %v, want nothing", first)
	}
	if second := startTakeover(t, env, svcs, nodes); len(second) != 0 {
		t.Fatalf("second start wrote %v, want nothing", second)
	}

	env.Config.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(30)
	env.Emulator().SetFeatures(emulator.FeatureConnectionDraining)
	drained := startTakeover(t, env, svcs, nodes)
	want := []string{"/loadBalancers/kubernetes/backendAddressPools/kubernetes", "/loadBalancers/kubernetes-internal/backendAddressPools/kubernetes"}
	if len(drained) != len(want) {
		t.Errorf("start with a drain period wrote %v, want only the two pools' drain period", drained)
	}
	for _, w := range drained {
		if !slices.ContainsFunc(want, func(p string) bool { return strings.HasSuffix(w, p) }) {
			t.Errorf("start with a drain period wrote %s: only the pools' drain period differs", w)
		}
	}
}

// BenchmarkTakeover500: the takeover of a 500-Service resource group the
// Azure cloud provider left (takeoverServices): ARM writes of the first
// start (target: only what differs from azlb's layout) and of a second
// start (target: 0).
//
//	go test -run '^$' -bench Takeover500 -benchtime 1x ./internal/provider/
func BenchmarkTakeover500(b *testing.B) {
	for i := 0; i < b.N; i++ {
		env, svcs, nodes, _ := takeover(b, 500)
		start := time.Now()
		first := startTakeover(b, env, svcs, nodes)
		elapsed := time.Since(start)
		second := startTakeover(b, env, svcs, nodes)
		if len(second) != 0 {
			b.Errorf("second start wrote %d times, want 0", len(second))
		}
		b.ReportMetric(float64(len(first)), "first-start-writes")
		b.ReportMetric(float64(len(second)), "second-start-writes")
		b.ReportMetric(elapsed.Seconds(), "s-first-start")
	}
}
