package provider

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// The figures of issue 4, measured against the emulator with 25 ms of
// latency on every ARM call:
//
//	go test -run '^$' -bench 'ColdStart|NodeChurn' -benchtime 1x ./internal/provider/
const (
	benchLatency  = 25 * time.Millisecond
	benchServices = 1000
	benchNodes    = 500
	benchWorkers  = 10 // the controller manager's default --concurrent-service-syncs
)

func benchEnv(b *testing.B) (*devenv.Env, *Provider) {
	b.Helper()
	ctx := context.Background()
	env, err := devenv.Start(ctx, b.TempDir(), emulator.Options{Throttle: emulator.NoThrottle}, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
			{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3"},
		}
		c.MaximumLoadBalancerRuleCount = 1000
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Close() })
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(clients.Close)
	p := newSGProvider(b, env.Config, clients, nil)
	p.nodes = nodeLister(benchNodeList(benchNodes)...)
	env.Emulator().SetLatency(benchLatency)
	return env, p
}

func benchNodeList(n int) []*v1.Node {
	nodes := make([]*v1.Node, n)
	for i := range nodes {
		nodes[i] = testNode(fmt.Sprintf("node-%04d", i), fmt.Sprintf("10.240.%d.%d", i/250, i%250+4))
	}
	return nodes
}

func benchServiceList(n int) []*v1.Service {
	svcs := make([]*v1.Service, n)
	for i := range svcs {
		svcs[i] = testService(fmt.Sprintf("svc-%04d", i), fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), nil, 80)
		svcs[i].UID = types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i))
	}
	return svcs
}

// ensureAll runs EnsureLoadBalancer for every Service with benchWorkers
// workers, as the service controller does, and returns the statuses.
func ensureAll(b *testing.B, p *Provider, svcs []*v1.Service, nodes []*v1.Node) []*v1.LoadBalancerStatus {
	b.Helper()
	out := make([]*v1.LoadBalancerStatus, len(svcs))
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < benchWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				st, err := p.EnsureLoadBalancer(context.Background(), "kubernetes", svcs[i], nodes)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s: %w", svcs[i].Name, err)
					}
					mu.Unlock()
					continue
				}
				out[i] = st
			}
		}()
	}
	for i := range svcs {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	return out
}

func armWrites(e *emulator.Emulator) int {
	n := 0
	for _, r := range e.Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet {
			n++
		}
	}
	return n
}

// writeKinds counts ARM writes by resource: public IPs, load balancers,
// backend pools, network security groups, and the writes ARM refused with
// a conflict (409/412).
func writeKinds(e *emulator.Emulator) (pips, lbs, pools, nsgs, conflicts int) {
	for _, r := range e.Requests() {
		if r.Kind != "arm" || r.Method == http.MethodGet {
			continue
		}
		path := strings.ToLower(r.Path)
		switch {
		case r.Status == http.StatusConflict || r.Status == http.StatusPreconditionFailed:
			conflicts++
		case strings.Contains(path, "/publicipaddresses/"):
			pips++
		case strings.Contains(path, "/backendaddresspools/"):
			pools++
		case strings.Contains(path, "/loadbalancers/"):
			lbs++
		case strings.Contains(path, "/networksecuritygroups/"):
			nsgs++
		}
	}
	return pips, lbs, pools, nsgs, conflicts
}

// BenchmarkColdStart: 1,000 LoadBalancer Services on 500 nodes across 3 load
// balancers, from nothing to every Service with its ingress IP. Reports the
// wall time, ARM writes per Service, and the writes of a following resync
// (steady state, must be 0).
func BenchmarkColdStart(b *testing.B) {
	for i := 0; i < b.N; i++ {
		coldStart(b, benchServiceList(benchServices))
	}
}

// BenchmarkColdStartSharedIPs is BenchmarkColdStart where 200 of the 1,000
// Services share 100 public IPs two by two (azure-pip-name; TCP 80 and TCP
// 443), as a DNS or ingress pair does: each pair must end on one address.
func BenchmarkColdStartSharedIPs(b *testing.B) {
	for i := 0; i < b.N; i++ {
		svcs := benchServiceList(benchServices)
		for j := 0; j < 200; j++ {
			svcs[j].Annotations = map[string]string{"service.beta.kubernetes.io/azure-pip-name": fmt.Sprintf("shared-%03d", j/2)}
			if j%2 == 1 {
				svcs[j].Spec.Ports[0].Port, svcs[j].Spec.Ports[0].NodePort = 443, 30443
			}
		}
		statuses := coldStart(b, svcs)
		for j := 0; j < 200; j += 2 {
			if statuses[j].Ingress[0].IP != statuses[j+1].Ingress[0].IP {
				b.Fatalf("%s and %s got %s and %s: want one shared IP", svcs[j].Name, svcs[j+1].Name, statuses[j].Ingress[0].IP, statuses[j+1].Ingress[0].IP)
			}
		}
	}
}

// coldStart ensures every Service from nothing, reports the figures and
// checks that a resync writes nothing.
func coldStart(b *testing.B, svcs []*v1.Service) []*v1.LoadBalancerStatus {
	b.Helper()
	env, p := benchEnv(b)
	p.SetServiceLister(serviceLister(svcs...))
	nodes := benchNodeList(benchNodes)
	env.Emulator().ResetRequests()
	start := time.Now()
	statuses := ensureAll(b, p, svcs, nodes)
	elapsed := time.Since(start)
	for j, st := range statuses {
		if st == nil || len(st.Ingress) == 0 || st.Ingress[0].IP == "" {
			b.Fatalf("service %s has no ingress IP", svcs[j].Name)
		}
	}
	writes := armWrites(env.Emulator())
	pips, lbs, pools, nsgs, conflicts := writeKinds(env.Emulator())

	env.Emulator().ResetRequests()
	ensureAll(b, p, svcs, nodes)
	resyncWrites := armWrites(env.Emulator())
	if resyncWrites != 0 {
		b.Errorf("steady-state resync made %d ARM writes, want 0", resyncWrites)
	}
	b.ReportMetric(elapsed.Seconds(), "s-to-converge")
	b.ReportMetric(float64(writes)/float64(len(svcs)), "writes/service")
	b.ReportMetric(float64(resyncWrites), "resync-writes")
	b.ReportMetric(float64(pips), "pip-writes")
	b.ReportMetric(float64(lbs), "lb-writes")
	b.ReportMetric(float64(pools), "pool-writes")
	b.ReportMetric(float64(nsgs), "nsg-writes")
	b.ReportMetric(float64(conflicts), "conflicts")
	return statuses
}

// BenchmarkNodeChurn: 100 nodes join a converged cluster of 300 Services;
// the service controller calls UpdateLoadBalancer for every Service. Reports
// pool writes per pool (target: at most one per affected pool).
func BenchmarkNodeChurn(b *testing.B) {
	for i := 0; i < b.N; i++ {
		env, p := benchEnv(b)
		svcs, nodes := benchServiceList(300), benchNodeList(benchNodes)
		ensureAll(b, p, svcs, nodes)
		more := benchNodeList(benchNodes + 100)
		env.Emulator().ResetRequests()
		var wg sync.WaitGroup
		work := make(chan *v1.Service)
		for w := 0; w < benchWorkers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for svc := range work {
					if err := p.UpdateLoadBalancer(context.Background(), "kubernetes", svc, more); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for _, svc := range svcs {
			work <- svc
		}
		close(work)
		wg.Wait()
		pools := map[string]int{}
		for _, r := range env.Emulator().Requests() {
			if r.Kind == "arm" && r.Method == http.MethodPut {
				pools[r.Path]++
			}
		}
		most := 0
		for _, n := range pools {
			most = max(most, n)
		}
		b.ReportMetric(float64(len(pools)), "pools-written")
		b.ReportMetric(float64(most), "max-writes/pool")
	}
}

// BenchmarkDriftPass: one drift pass over a converged cluster of 1,000
// Services on 5,000 nodes across 3 load balancers, with nothing drifted.
// Reports the pass's ARM reads (the bound: a fixed number per
// pass, not one per Service) and writes (must be 0), and its wall time.
//
//	go test -run '^$' -bench DriftPass -benchtime 1x ./internal/provider/
func BenchmarkDriftPass(b *testing.B) {
	const nodesAtScale = 5000
	for i := 0; i < b.N; i++ {
		env, p := benchEnv(b)
		svcs, nodes := benchServiceList(benchServices), benchNodeList(nodesAtScale)
		for _, s := range svcs {
			s.Finalizers = []string{serviceCleanupFinalizer}
		}
		p.nodes = nodeLister(nodes...)
		p.SetServiceLister(serviceLister(svcs...))
		ensureAll(b, p, svcs, nodes)
		env.Emulator().ResetRequests()
		start := time.Now()
		ctx, _, err := p.BeginRepairPass(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		work := make(chan *v1.Service)
		var wg sync.WaitGroup
		for range 4 { // drift.Workers
			wg.Go(func() {
				for s := range work {
					if rs, err := p.RepairService(ctx, s, nodes); err != nil || len(rs) != 0 {
						b.Errorf("%s: repairs %v, error %v", s.Name, rs, err)
					}
				}
			})
		}
		for _, s := range svcs {
			work <- s
		}
		close(work)
		wg.Wait()
		elapsed := time.Since(start)
		reads := 0
		for _, r := range env.Emulator().Requests() {
			if r.Kind == "arm" && r.Method == http.MethodGet {
				reads++
			}
		}
		writes := armWrites(env.Emulator())
		if writes != 0 {
			b.Errorf("a pass without drift made %d writes, want 0", writes)
		}
		b.ReportMetric(float64(reads), "reads/pass")
		b.ReportMetric(float64(writes), "writes/pass")
		b.ReportMetric(elapsed.Seconds(), "s/pass")
	}
}
