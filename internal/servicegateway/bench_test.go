package servicegateway

import (
	"context"
	"fmt"
	"net/http"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// Run with:
//
//	go test -run '^$' -bench . -benchtime 1x ./internal/servicegateway/
//	go test -run '^$' -bench EndpointToGateway -benchtime 100x ./internal/servicegateway/
//	AZLB_BENCH_THROTTLED=1 go test -run '^$' -bench ColdStartThrottled -benchtime 1x -timeout 60m ./internal/servicegateway/
//
// Every benchmark runs the engine against the ARM emulator through the
// real SDK, with L = 25 ms added to every ARM call, the emulator answering
// service gateway POSTs as NRP does (200), and the production client
// settings (1 s LRO poll interval). Figures are custom metrics.

// benchLatency is L.
const benchLatency = 25 * time.Millisecond

// benchHarness is the emulator harness with latency L and no request limit
// (the figures count the calls; ARM's limits are discussed in
// docs/container-load-balancer.md).
func benchHarness(b *testing.B) (*harness, *devenv.Env) {
	return benchHarnessThrottle(b, emulator.NoThrottle)
}

// benchHarnessThrottle is benchHarness with the emulator's request limits
// (the zero Throttle: Azure's).
func benchHarnessThrottle(b *testing.B, limits emulator.Throttle) (*harness, *devenv.Env) {
	b.Helper()
	env := testutil.StartEmulator(b, emulator.Options{Latency: benchLatency, Throttle: limits}, devenv.PodIP)
	if err := env.SeedServiceGateway(context.Background()); err != nil {
		b.Fatal(err)
	}
	env.Emulator().ResetRequests()
	h := newHarness(b)
	h.realClock = true
	h.cfg = env.Config
	h.clients = testutil.Clients(b, env, azure.ClientOptions{Source: "servicegateway-bench"})
	return h, env
}

// benchNode names node i; its InternalIP is 10.240.<i/250>.<i%250+4>.
func benchNode(i int) (string, string) {
	return fmt.Sprintf("node-%03d", i), fmt.Sprintf("10.240.%d.%d", i/250, i%250+4)
}

// podIP is the IP of pod p of Service s (room for 100 pods per Service).
func podIP(s, p int) string {
	n := s*100 + p
	return fmt.Sprintf("10.%d.%d.%d", 100+n/65536, (n/256)%256, n%256)
}

// benchService creates a LoadBalancer Service without EnsureLoadBalancer
// (start-up picks it up, as after a controller restart).
func benchService(b *testing.B, h *harness, i int) *v1.Service {
	b.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("svc-%04d", i), UID: uuid.NewUUID()},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}
	created, err := h.cs.CoreV1().Services("bench").Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return created
}

// benchPods sets Service s's slice: pods p0..p0+n-1, pod p on node
// (s+p) % nodes.
func benchPods(h *harness, svc *v1.Service, s, p0, n, nodes int) {
	var eps []ep
	for p := p0; p < p0+n; p++ {
		name, _ := benchNode((s + p) % nodes)
		eps = append(eps, readyOn(name, podIP(s, p%100)))
	}
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, eps...)
}

// gatewayPOSTs are the updateAddressLocations requests the emulator
// served, with when they started and ended.
func gatewayPOSTs(e *emulator.Emulator) []emulator.RequestRecord {
	var out []emulator.RequestRecord
	for _, r := range e.Requests() {
		if r.Kind == "arm" && r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/updateAddressLocations") {
			out = append(out, r)
		}
	}
	return out
}

// maxInFlight is the largest number of requests served at once.
func maxInFlight(rs []emulator.RequestRecord) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, r := range rs {
		evs = append(evs, ev{r.Time, 1}, ev{r.Time.Add(r.Duration), -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	cur, best := 0, 0
	for _, e := range evs {
		cur += e.delta
		best = max(best, cur)
	}
	return best
}

// armCalls counts the emulator's ARM requests: reads and writes by kind.
func armCalls(e *emulator.Emulator) (reads, writes int, byOp map[string]int) {
	byOp = map[string]int{}
	for _, r := range e.Requests() {
		if r.Kind != "arm" {
			continue
		}
		if r.Method == http.MethodGet {
			reads++
		} else {
			writes++
		}
		seg := r.Path[strings.LastIndex(r.Path, "/providers/")+len("/providers/"):]
		parts := strings.Split(seg, "/")
		op := r.Method + " " + parts[1]
		if len(parts) > 3 {
			op += "/" + parts[3]
		}
		byOp[op]++
	}
	return reads, writes, byOp
}

func heapMB() float64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkEndpointToGateway: an endpoint becomes ready; how long until the
// gateway holds its address (the end of the updateAddressLocations that
// carries it, from the emulator's log), with an otherwise idle controller.
// Target: p50 <= 2L + 10 ms = 60 ms.
func BenchmarkEndpointToGateway(b *testing.B) {
	h, env := benchHarness(b)
	h.start()
	name, ip := benchNode(0)
	h.node(name, ip)
	svc := h.service("bench", "web")
	benchPods(h, svc, 0, 0, 1, 1)
	if err := h.ensure(svc); err != nil {
		b.Fatal(err)
	}
	h.waitReady(svc)
	testutil.Poll(b, waitFor, "first pod", func() bool { return len(gatewayPOSTs(env.Emulator())) == 1 })
	h.idle()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		h.idle()
		want := podIP(0, (i+1)%100)
		before := len(gatewayPOSTs(env.Emulator()))
		start := time.Now()
		// Replace the pod: the new one is ready, the old one leaves.
		h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn(name, want))
		var done time.Time
		testutil.Poll(b, waitFor, "address "+want, func() bool {
			for _, r := range gatewayPOSTs(env.Emulator())[before:] {
				if strings.Contains(r.Body, `"`+want+`"`) {
					done = r.Time.Add(r.Duration)
					return true
				}
			}
			return false
		})
		lat = append(lat, done.Sub(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(lat, 0.5))/1e6, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.9))/1e6, "p90-ms")
	b.ReportMetric(float64(percentile(lat, 1))/1e6, "max-ms")
	if p50 := percentile(lat, 0.5); p50 > 2*benchLatency+10*time.Millisecond {
		b.Errorf("p50 %v exceeds 2L + 10 ms", p50)
	}
}

// BenchmarkCoalescing_500Services5000ChangesPerSecond: 500 Services on 50
// nodes, endpoint changes at 5,000 per second for two seconds (each moves
// one Service's pods). At most one updateAddressLocations is in flight, each
// carries what arrived while the previous one was, and the gateway ends
// with every Service's last pods.
func BenchmarkCoalescing_500Services5000ChangesPerSecond(b *testing.B) {
	const services, nodes, rateHz, seconds = 500, 50, 5000, 2
	h, env := benchHarness(b)
	for i := range nodes {
		h.node(benchNode(i))
	}
	svcs := make([]*v1.Service, services)
	var initial []discoveryv1.EndpointSlice
	for i := range svcs {
		svcs[i] = benchService(b, h, i)
		initial = append(initial, *feedSlice(svcs[i], i, 0, 2, nodes))
	}
	feed := newSliceFeed(initial)
	h.sliceInformer = feed
	h.start()
	testutil.Poll(b, 5*time.Minute, "500 Services provisioned", func() bool { return converged(h, services, 2*services) })
	h.idle()
	b.ResetTimer()
	for it := range b.N {
		b.StopTimer()
		h.idle()
		env.Emulator().ResetRequests()
		heapBefore := heapMB()
		b.StartTimer()
		// Changes come in bursts of up to 100 (20 ms worth).
		lim := rate.NewLimiter(rate.Limit(rateHz), 100)
		start := time.Now()
		changes := rateHz * seconds
		last := make([]int, services)
		for c := range changes {
			if err := lim.Wait(context.Background()); err != nil {
				b.Fatal(err)
			}
			s := c % services
			last[s] = (c/services + it*7 + 1) % 50
			feed.modify(feedSlice(svcs[s], s, last[s], 2, nodes))
		}
		sent := time.Since(start)
		testutil.Poll(b, 2*time.Minute, "gateway holds the last pods", func() bool {
			if len(feed.w.ResultChan()) > 0 {
				return false
			}
			h.engine.mu.Lock()
			defer h.engine.mu.Unlock()
			return !h.engine.tracker.Pending() && h.engine.epQueue.Len() == 0 && h.engine.locQueue.Len() == 0 && !h.engine.busy()
		})
		h.idle()
		took := time.Since(start)
		b.StopTimer()
		posts := gatewayPOSTs(env.Emulator())
		got := gatewayAddresses(b, h.clients)
		want := map[string][]string{}
		for s := range services {
			for p := last[s]; p < last[s]+2; p++ {
				_, nip := benchNode((s + p) % nodes)
				want[nip] = append(want[nip], podIP(s, p%100)+"="+uid(svcs[s]))
			}
		}
		var wantLines []string
		for loc, as := range want {
			slices.Sort(as)
			wantLines = append(wantLines, loc+": "+strings.Join(as, " "))
		}
		slices.Sort(wantLines)
		if !slices.Equal(got, wantLines) {
			b.Fatalf("the gateway does not hold the last pods of every Service (%d locations, want %d)", len(got), len(wantLines))
		}
		if n := maxInFlight(posts); n > 1 {
			b.Fatalf("%d updateAddressLocations in flight at once", n)
		}
		b.ReportMetric(float64(changes)/sent.Seconds(), "changes/s")
		b.ReportMetric(float64(len(posts)), "POSTs")
		b.ReportMetric(float64(changes)/float64(max(1, len(posts))), "changes/POST")
		b.ReportMetric(float64(maxInFlight(posts)), "max-in-flight")
		b.ReportMetric(float64(took-sent)/1e6, "drain-ms")
		b.ReportMetric(heapMB(), "heap-MB")
		b.ReportMetric(heapMB()-heapBefore, "heap-growth-MB")
	}
}

// converged reports whether the engine has every Service registered and
// the gateway holds the given number of addresses.
func converged(h *harness, services, addresses int) bool {
	if h.engine == nil {
		return false
	}
	h.engine.mu.Lock()
	defer h.engine.mu.Unlock()
	if len(h.engine.tracker.registered) != services {
		return false
	}
	_, a := h.engine.tracker.NRPTotals()
	return a == addresses && !h.engine.tracker.Pending()
}

// BenchmarkColdStart_1000Services10000Pods: 1,000 LoadBalancer Services with
// 10 ready pods each on 100 nodes exist when the controller starts: how long
// until every Service has its load balancer, registration and ingress IP
// and the gateway holds all 10,000 pods, and how many ARM calls that took;
// then a restart with nothing changed: its time and writes (0).
func BenchmarkColdStart_1000Services10000Pods(b *testing.B) {
	coldStart(b, emulator.NoThrottle, true)
}

// BenchmarkColdStartThrottled_1000Services10000Pods is the cold start under
// the emulator's default limits (Azure's, docs/emulator.md), which throttle
// it. It takes minutes, so it runs only with
// AZLB_BENCH_THROTTLED=1:
//
//	AZLB_BENCH_THROTTLED=1 go test -run '^$' -bench ColdStartThrottled -benchtime 1x -timeout 60m ./internal/servicegateway/
func BenchmarkColdStartThrottled_1000Services10000Pods(b *testing.B) {
	if os.Getenv("AZLB_BENCH_THROTTLED") == "" {
		b.Skip("set AZLB_BENCH_THROTTLED=1 to run the throttled cold start (minutes)")
	}
	coldStart(b, emulator.Throttle{}, false)
}

// coldStart runs the cold start under the emulator's limits (the zero
// Throttle: Azure's), then, with restart, the restart with nothing changed.
func coldStart(b *testing.B, limits emulator.Throttle, restart bool) {
	const services, pods, nodes = 1000, 10, 100
	for range b.N {
		b.StopTimer()
		h, env := benchHarnessThrottle(b, limits)
		for i := range nodes {
			h.node(benchNode(i))
		}
		svcs := make([]*v1.Service, services)
		for i := range svcs {
			svcs[i] = benchService(b, h, i)
			benchPods(h, svcs[i], i, 0, pods, nodes)
		}
		b.StartTimer()
		start := time.Now()
		h.start()
		testutil.Poll(b, 50*time.Minute, "cold start converged", func() bool { return converged(h, services, services*pods) })
		testutil.Poll(b, 10*time.Minute, "ingress IPs", func() bool {
			list, _ := h.engine.services.Services("bench").List(labelsEverything())
			n := 0
			for _, s := range list {
				if len(s.Status.LoadBalancer.Ingress) > 0 {
					n++
				}
			}
			return n == services
		})
		took := time.Since(start)
		b.StopTimer()
		h.idle()
		reads, writes, byOp := armCalls(env.Emulator())
		b.ReportMetric(took.Seconds(), "cold-start-s")
		b.ReportMetric(float64(reads), "ARM-reads")
		b.ReportMetric(float64(writes), "ARM-writes")
		b.ReportMetric(float64(byOp["POST serviceGateways/updateAddressLocations"]), "address-POSTs")
		b.ReportMetric(float64(byOp["POST serviceGateways/updateServices"]), "updateServices")
		b.ReportMetric(float64(throttled(env.Emulator())), "429s")
		b.Logf("cold start ARM calls by operation: %v", byOp)
		if !restart {
			h.shutdown()
			continue
		}

		env.Emulator().ResetRequests()
		restart := time.Now()
		h.restart()
		h.idle()
		b.ReportMetric(time.Since(restart).Seconds(), "restart-s")
		reads, writes, byOp = armCalls(env.Emulator())
		b.ReportMetric(float64(writes), "restart-ARM-writes")
		b.ReportMetric(float64(reads), "restart-ARM-reads")
		if writes != 0 {
			b.Errorf("the restart wrote: %v", byOp)
		}
		h.shutdown()
	}
}

// throttled counts the ARM requests the emulator answered 429 (refused
// writes are in armCalls' counts too).
func throttled(e *emulator.Emulator) int {
	n := 0
	for _, r := range e.Requests() {
		if r.Kind == "arm" && r.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

func labelsEverything() labels.Selector { return labels.Everything() }

// sliceFeed is an EndpointSlice informer fed directly (no clientset): its
// watch channel is large and blocks when full, so a generator is slowed by
// the informer instead of overflowing a fake clientset's watch.
type sliceFeed struct {
	w   *watch.FakeWatcher
	inf cache.SharedIndexInformer
	rv  atomic.Int64
}

type feedLW struct {
	initial []discoveryv1.EndpointSlice
	w       watch.Interface
}

func (l feedLW) List(metav1.ListOptions) (runtime.Object, error) {
	return &discoveryv1.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: l.initial}, nil
}
func (l feedLW) Watch(metav1.ListOptions) (watch.Interface, error) { return l.w, nil }

// IsWatchListSemanticsUnSupported: a plain list and watch.
func (feedLW) IsWatchListSemanticsUnSupported() bool { return true }

func newSliceFeed(initial []discoveryv1.EndpointSlice) *sliceFeed {
	f := &sliceFeed{w: watch.NewFakeWithChanSize(1<<16, false)}
	f.rv.Store(1)
	f.inf = cache.NewSharedIndexInformer(feedLW{initial: initial, w: f.w}, &discoveryv1.EndpointSlice{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	return f
}

func (f *sliceFeed) Informer() cache.SharedIndexInformer { return f.inf }
func (f *sliceFeed) Lister() discoverylisters.EndpointSliceLister {
	return discoverylisters.NewEndpointSliceLister(f.inf.GetIndexer())
}

// modify delivers a new version of a slice.
func (f *sliceFeed) modify(s *discoveryv1.EndpointSlice) {
	s.ResourceVersion = strconv.FormatInt(f.rv.Add(1), 10)
	f.w.Modify(s)
}

// feedSlice is Service s's slice with pods p0..p0+n-1 (pod p on node
// (s+p) % nodes).
func feedSlice(svc *v1.Service, s, p0, n, nodes int) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-a",
			Labels:          map[string]string{discoveryv1.LabelServiceName: svc.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for p := p0; p < p0+n; p++ {
		name, _ := benchNode((s + p) % nodes)
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{podIP(s, p%100)}, NodeName: ptrTo(name)})
	}
	return sl
}

func ptrTo[T any](v T) *T { return &v }

// BenchmarkEgress_100Identities20Pods: 100 egress identities of 20 pods
// each (on 50 nodes) created at once; reported: the ARM writes and the time
// until every pod is in the gateway under its identity; then every pod is
// deleted: the time until the pods are released and nothing of the
// identities is left in Azure, and what leaked (must be 0).
func BenchmarkEgress_100Identities20Pods(b *testing.B) {
	const identities, perIdentity, nodes = 100, 20, 50
	// The fake clientset's watches hold 100 events; 2,000 pods created at
	// once (and the engine's finalizer updates) need more.
	defer func(n int32) { watch.DefaultChanSize = n }(watch.DefaultChanSize)
	watch.DefaultChanSize = 1 << 16
	for it := range b.N {
		b.StopTimer()
		h, env := benchHarness(b)
		for i := range nodes {
			h.node(benchNode(i))
		}
		h.start()
		h.idle()
		env.Emulator().ResetRequests()
		ctx := context.Background()
		b.StartTimer()
		start := time.Now()
		for i := range identities {
			for p := range perIdentity {
				node, _ := benchNode((i + p) % nodes)
				pod := &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("egress-%03d-%02d", i, p), UID: uuid.NewUUID(),
						Labels: map[string]string{EgressLabel: fmt.Sprintf("identity-%03d", i)}},
					Spec:   v1.PodSpec{NodeName: node},
					Status: v1.PodStatus{Phase: v1.PodRunning, PodIPs: []v1.PodIP{{IP: podIP(i, p)}}},
				}
				if _, err := h.cs.CoreV1().Pods("bench").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		testutil.Poll(b, 10*time.Minute, "every egress pod registered", func() bool {
			h.engine.mu.Lock()
			defer h.engine.mu.Unlock()
			_, addrs := h.engine.tracker.NRPTotals()
			return addrs == identities*perIdentity
		})
		created := time.Since(start)
		h.idle()
		writes := len(armWrites(env.Emulator()))
		regCalls, locCalls := countPOSTs(env.Emulator())
		env.Emulator().ResetRequests()
		start = time.Now()
		pods, err := h.cs.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		now := metav1.Now()
		for i := range pods.Items {
			p := &pods.Items[i]
			p.DeletionTimestamp = &now
			if _, err := h.cs.CoreV1().Pods("bench").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		testutil.Poll(b, 10*time.Minute, "every egress pod released", func() bool {
			left, err := h.cs.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
			return err == nil && len(left.Items) == 0
		})
		removed := time.Since(start)
		b.StopTimer()
		h.idle()
		removalWrites := len(armWrites(env.Emulator()))
		regCallsRm, locCallsRm := countPOSTs(env.Emulator())
		if os.Getenv("AZLB_BENCH_DEBUG") != "" {
			kinds := map[string]int{}
			for _, r := range env.Emulator().Requests() {
				if r.Kind == "arm" && r.Method != http.MethodGet {
					parts := strings.Split(r.Path, "/")
					kinds[fmt.Sprintf("%s %s %d", r.Method, parts[len(parts)-2], r.Status)]++
				}
			}
			b.Logf("removal writes: %v", kinds)
		}
		leaked := 0
		nats, err := h.clients.NatGateway.List(ctx, devenv.ResourceGroup)
		if err != nil {
			b.Fatal(err)
		}
		pips, err := h.clients.PublicIP.List(ctx, devenv.ResourceGroup)
		if err != nil {
			b.Fatal(err)
		}
		svcs, err := h.clients.ServiceGateway.GetServices(ctx, devenv.ResourceGroup, "servicegateway")
		if err != nil {
			b.Fatal(err)
		}
		leaked += len(nats) + len(pips) + len(svcs) - 3 // default-natgw: its NAT gateway, public IP, service
		leaked += len(gatewayAddresses(b, h.clients))
		if it == b.N-1 {
			b.ReportMetric(float64(writes), "writes")
			b.ReportMetric(float64(removalWrites), "writes-removal")
			b.ReportMetric(float64(regCalls), "updateServices")
			b.ReportMetric(float64(locCalls), "updateAddressLocations")
			b.ReportMetric(float64(regCallsRm), "updateServices-removal")
			b.ReportMetric(float64(locCallsRm), "updateAddressLocations-removal")
			b.ReportMetric(created.Seconds(), "s-all-registered")
			b.ReportMetric(removed.Seconds(), "s-all-removed")
			b.ReportMetric(float64(leaked), "leaked")
		}
		if leaked != 0 {
			b.Errorf("%d resources or addresses leaked", leaked)
		}
		h.shutdown()
	}
}

// countPOSTs counts the updateServices and updateAddressLocations the
// emulator served.
func countPOSTs(e *emulator.Emulator) (services, locations int) {
	for _, r := range e.Requests() {
		if r.Kind != "arm" || r.Method != http.MethodPost {
			continue
		}
		switch {
		case strings.HasSuffix(r.Path, "/updateServices"):
			services++
		case strings.HasSuffix(r.Path, "/updateAddressLocations"):
			locations++
		}
	}
	return services, locations
}
