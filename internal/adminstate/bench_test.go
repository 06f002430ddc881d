package adminstate_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil/cputime"
)

// Benchmarks against the emulator with L = 25 ms per ARM call: 1,000 nodes,
// four load balancers (plus their internal twins, which do not exist), each
// with an IPv4 and an IPv6 pool holding every node: 8 pools per node.
//
//	go test -run '^$' -bench . -benchtime 100x ./internal/adminstate/

const (
	benchLatency = 25 * time.Millisecond
	benchNodes   = 1000
)

var fourLBs = []string{"kubernetes", "lb-2", "lb-3", "lb-4"}

func benchEnv(b *testing.B) (*emuEnv, []emuNode) {
	b.Helper()
	env := newEmuEnv(b, emulator.Options{Latency: benchLatency}, fourLBs...)
	nodes := emuNodes(benchNodes)
	env.seedLBs(nodes, noneSeed)
	return env, nodes
}

// waitDown waits for the node's Down event and returns when it was
// recorded (after every pool of the node was written).
func waitDown(b testing.TB, c *ctrl, name string) time.Time {
	b.Helper()
	var at time.Time
	poll(b, time.Minute, "Down event of "+name, func() bool {
		ts := c.events.Times(name, adminstate.EventReasonAdminStateDown)
		if len(ts) == 0 {
			return false
		}
		at = ts[0]
		return true
	})
	return at
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkCutoverLatency: time from the taint appearing on the API server
// (the fake clientset acknowledged the update; its watchers have the event)
// to AdminState=Down applied on every pool of the node, one node at a time.
// p50/p99-from-send-ms also count the API server's own handling of the
// update (the fake clientset's managed-fields work: 1-6 ms).
// "all-pools": every node is in all 8 pools (the worst case: 8 pools of
// 1,000 entries to read and write). "placed": as multiple-SLB node placement
// spreads nodes, each node is in the 2 pools (IPv4, IPv6) of one of the 4
// load balancers, 250 entries each (what node placement produces).
// nodes=120: all 8 pools again, with small pools (16 calls per cutover).
func BenchmarkCutoverLatency(b *testing.B) {
	for _, tc := range []struct {
		size   int
		spread bool
	}{{benchNodes, false}, {benchNodes, true}, {120, false}} {
		layout := "all-pools"
		if tc.spread {
			layout = "placed"
		}
		b.Run(fmt.Sprintf("nodes=%d/%s", tc.size, layout), func(b *testing.B) { benchCutover(b, tc.size, tc.spread) })
	}
}

func benchCutover(b *testing.B, size int, spread bool) {
	env := newEmuEnv(b, emulator.Options{Latency: benchLatency}, fourLBs...)
	nodes := emuNodes(size)
	env.seedPlaced(nodes, noneSeed, spread)
	c := env.runController(b, nodeObjects(nodes, nil)...)
	// Warm-up: the startup verification of all nodes, then one cutover.
	c.setTaints(b, nodes[0].name, taintOOS)
	waitDown(b, c, nodes[0].name)
	env.emu.ResetRequests()

	if b.N > size-1 {
		b.Fatalf("at most %d iterations with %d nodes", size-1, size)
	}
	lat := make([]time.Duration, 0, b.N)
	withWrite := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu := cputime.Start()
	for i := range b.N {
		n := nodes[1+i]
		sent, acked := c.setTaintsAt(b, n.name, taintOOS)
		at := waitDown(b, c, n.name)
		lat = append(lat, at.Sub(acked))
		withWrite = append(withWrite, at.Sub(sent))
	}
	b.StopTimer()
	cpuTime := cpu.Elapsed()
	slices.Sort(lat)
	slices.Sort(withWrite)
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(cpuTime)/float64(b.N), "cpu-ms/cutover")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(percentile(withWrite, 0.50)), "p50-from-send-ms")
	b.ReportMetric(ms(percentile(withWrite, 0.99)), "p99-from-send-ms")
	b.ReportMetric(float64(env.armCalls())/float64(b.N), "arm-calls/cutover")
	b.ReportMetric(float64(env.totalPoolWrites())/float64(b.N), "pool-puts/cutover")
	b.Logf("%d cutovers, %d nodes: p50 %v p99 %v max %v (targets: p50 <= %v, p99 <= %v)", len(lat), size, p50, p99, lat[len(lat)-1],
		2*benchLatency+10*time.Millisecond, 2*benchLatency+50*time.Millisecond)
	if !spread && !env.allAre(nodes[1], down) {
		b.Error("first measured node not Down on every pool")
	}
}

// BenchmarkMassEvent: 200 nodes tainted within one second; pool PUTs per
// pool until all 200 are Down. "burst" updates them back to back; "paced"
// spreads them evenly over one second (taint-spread-ms: first to last).
func BenchmarkMassEvent(b *testing.B) {
	for _, paced := range []bool{false, true} {
		name := "burst"
		if paced {
			name = "paced-1s"
		}
		b.Run(name, func(b *testing.B) {
			var maxPuts, totalPuts, spread, converge float64
			for range b.N {
				b.StopTimer()
				env, nodes := benchEnv(b)
				c := env.runController(b, nodeObjects(nodes, nil)...)
				c.setTaints(b, nodes[benchNodes-1].name, taintOOS) // warm-up and barrier
				waitDown(b, c, nodes[benchNodes-1].name)
				env.emu.ResetRequests()
				b.StartTimer()

				start := time.Now()
				for i := range 200 {
					if paced {
						// Load shaping, not synchronisation: taint i is due at
						// i × 5 ms, so the last is sent 995 ms after the first
						// (late ones go back to back to catch up).
						if d := time.Until(start.Add(time.Duration(i) * time.Second / 200)); d > 0 {
							<-time.After(d)
						}
					}
					c.setTaints(b, nodes[i].name, taintOOS)
				}
				sent := time.Since(start)
				var last time.Time
				for i := range 200 {
					if at := waitDown(b, c, nodes[i].name); at.After(last) {
						last = at
					}
				}
				b.StopTimer()
				per := env.poolWrites()
				m := 0
				for _, v := range per {
					m = max(m, v)
				}
				maxPuts = max(maxPuts, float64(m))
				totalPuts += float64(env.totalPoolWrites())
				spread += ms(sent)
				converge += ms(last.Sub(start))
				if len(per) != 2*len(fourLBs) {
					b.Errorf("pools written: %v", per)
				}
				b.Logf("%s: taints sent over %v, all Down after %v, PUTs per pool %v", name, sent, last.Sub(start), per)
				b.StartTimer()
			}
			b.ReportMetric(maxPuts, "max-puts/pool")
			b.ReportMetric(totalPuts/float64(b.N), "pool-puts/op")
			b.ReportMetric(spread/float64(b.N), "taint-spread-ms")
			b.ReportMetric(converge/float64(b.N), "all-down-ms")
		})
	}
}

// BenchmarkIdle: ARM calls per minute of fake-clock time while nothing
// changes. The controller's clock is fake and is stepped one minute per
// iteration; the node informer resyncs every second (its minimum), so every
// node gets no-op updates during the window.
func BenchmarkIdle(b *testing.B) {
	env, nodes := benchEnv(b)
	clk := clocktesting.NewFakeClock(time.Now())
	kube := fake.NewClientset(nodeObjects(nodes, nil)...)
	factory := informers.NewSharedInformerFactory(kube, time.Second)
	var resyncs atomic.Int64
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(o, n any) {
			if o == n {
				resyncs.Add(1)
			}
		},
	}); err != nil {
		b.Fatal(err)
	}
	mgr, err := adminstate.NewManager(env.store, adminstate.ManagerOptions{SubscriptionID: emuSub, Source: b.Name(),
		Policy: backendpool.PolicyFromConfig(env.cfg)})
	if err != nil {
		b.Fatal(err)
	}
	ev := &adminstate.EventLog{}
	c, err := adminstate.NewController(factory.Core().V1().Nodes(), mgr, ev, clk)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	cc := &ctrl{kube: kube, c: c, events: ev}
	// Startup verification, then a first barrier.
	cc.setTaints(b, nodes[0].name, taintOOS)
	waitDown(b, cc, nodes[0].name)

	b.ResetTimer()
	var calls int
	for i := range b.N {
		env.emu.ResetRequests()
		clk.Step(time.Minute)
		// Two full resyncs of every node, then a barrier: a taint that the
		// single worker handles after everything queued before it.
		from := resyncs.Load()
		poll(b, time.Minute, "two resyncs", func() bool { return resyncs.Load()-from >= 2*benchNodes })
		window := time.Now()
		barrierNode := nodes[1+i]
		cc.setTaints(b, barrierNode.name, taintOOS)
		waitDown(b, cc, barrierNode.name)
		for _, r := range env.emu.Requests() {
			if r.Kind == "arm" && r.Time.Before(window) {
				calls++
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(calls)/float64(b.N), "arm-calls/fake-minute")
	if calls != 0 {
		b.Errorf("%d ARM calls while idle", calls)
	}
}
