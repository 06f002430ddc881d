package localservice

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/emulator"
)

// Run with:
//
//	go test -run '^$' -bench . -benchtime 5x ./internal/localservice/
//
// Figures are reported as custom metrics (b.ReportMetric).

const (
	benchServices = 200
	benchChanges  = 1000 // endpoint changes per window (5 per Service)
	benchNodes    = 20
)

// BenchmarkBurst_200Services1000Changes: 1,000 endpoint changes spread over
// 200 Local Services within one window. The first change of each (idle)
// pool is applied at once; the other four of each Service coalesce into one
// write at the end of the window: at most one GET and one PUT per pool per
// window, and the pools end with each Service's last desired state.
func BenchmarkBurst_200Services1000Changes(b *testing.B) {
	h := newHarness(b, harnessOptions{})
	for i := range benchNodes {
		h.addNode(fmt.Sprintf("n%02d", i), fmt.Sprintf("10.240.1.%d", i+1))
	}
	keys := make([]string, benchServices)
	for i := range keys {
		keys[i] = h.localService("bench", fmt.Sprintf("svc%03d", i))
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- h.u.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var maxGets, maxPuts, windows int
	countWindow := func() {
		per := map[string][2]int{}
		for _, r := range h.env.Emulator().Requests() {
			i := strings.Index(strings.ToLower(r.Path), "/backendaddresspools/")
			if r.Kind != "arm" || i < 0 {
				continue
			}
			c := per[r.Path[i:]]
			switch r.Method {
			case http.MethodGet:
				c[0]++
			case http.MethodPut:
				c[1]++
			}
			per[r.Path[i:]] = c
		}
		for _, c := range per {
			maxGets, maxPuts = max(maxGets, c[0]), max(maxPuts, c[1])
		}
		windows++
		h.resetRequests()
	}
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		// Start from idle pools: let every window of the last round end.
		h.clock.Step(2 * testInterval)
		h.eventually("idle", func() bool { return h.u.QueueLen() == 0 })
		h.resetRequests()
		b.StartTimer()
		final := make([]string, benchServices)
		for c := range benchChanges {
			s := c % benchServices
			round := c / benchServices
			nodes := []string{fmt.Sprintf("n%02d", (s+iter+round)%benchNodes), fmt.Sprintf("n%02d", (s+iter+round+7)%benchNodes)}
			sort.Strings(nodes)
			final[s] = strings.Join(nodes, ",")
			h.setSlice("bench", fmt.Sprintf("svc%03d", s), fmt.Sprintf("svc%03d-slice", s), nodes...)
		}
		// The leading edge has written every pool once; the rest waits.
		h.eventually("leading-edge writes", func() bool { return h.u.queue.Len() == 0 && h.pendingAll(keys) })
		b.StopTimer()
		countWindow()
		b.StartTimer()
		// The end of the window: one write each. An endpoint event the
		// informer delivers after its pool's trailing write (the fake
		// clientset's watch runs on its own) opens a window of its own;
		// step to its end too, still at most one GET and one PUT per window.
		for w := 0; ; w++ {
			h.clock.Step(testInterval)
			h.eventually("trailing writes", func() bool { return h.u.queue.Len() == 0 && h.onlyNextWindow() })
			b.StopTimer()
			countWindow()
			if h.u.QueueLen() == 0 {
				break
			}
			if w == 2 {
				b.Fatalf("pools still queued after %d windows: %+v", w+1, h.queueList())
			}
			b.StartTimer()
		}
		for s, key := range keys {
			if got := strings.Join(h.poolNodes(poolOf(key, "IPv4")), ","); got != final[s] {
				b.Fatalf("%s holds %s, want the last desired state %s", key, got, final[s])
			}
		}
	}
	b.ReportMetric(float64(maxGets), "max-GETs/pool/window")
	b.ReportMetric(float64(maxPuts), "max-PUTs/pool/window")
	if maxGets > 1 || maxPuts > 1 {
		b.Fatalf("a pool had %d GETs and %d PUTs in one window", maxGets, maxPuts)
	}
}

// onlyNextWindow reports whether every pool still queued waits for a
// window that starts now (a change that came after its write), so nothing
// is due or in flight.
func (h *harness) onlyNextWindow() bool {
	now := h.clock.Now()
	for _, st := range h.queueList() {
		if !st.pending || !st.lastAttempt.Equal(now) {
			return false
		}
	}
	return true
}

// pendingAll reports whether every Service's pool has a change waiting for
// its window (after its leading-edge write).
func (h *harness) pendingAll(keys []string) bool {
	for _, key := range keys {
		st := h.queued(key, poolOf(key, "IPv4"))
		if st == nil || !st.pending || st.lastAttempt.IsZero() {
			return false
		}
	}
	return true
}

// BenchmarkLatency_EndpointChangeToPoolUpdated: with the real clock and 25
// ms of emulator latency per ARM request (L), the time from an EndpointSlice
// change of an idle pool to the pool written: target p50 <= 2L + 20 ms, p99
// <= 2L + 60 ms. Each change goes to another Service, so every pool is idle.
func BenchmarkLatency_EndpointChangeToPoolUpdated(b *testing.B) {
	const armLatency = 25 * time.Millisecond
	h := newHarness(b, harnessOptions{emulator: emulator.Options{Latency: armLatency}, mutate: func(o *Options) {
		o.Clock = clock.RealClock{}
	}})
	h.addNode("n1", "10.240.0.4")
	h.addNode("n2", "10.240.0.5")
	putDone := make(chan time.Time, 1)
	var mu sync.Mutex
	h.pools.setHook(func(op, _ string, call func() error) error {
		err := call()
		if op == "put" && err == nil {
			mu.Lock()
			putDone <- time.Now()
			mu.Unlock()
		}
		return err
	})
	services := make([]string, b.N)
	for i := range services {
		services[i] = fmt.Sprintf("svc%04d", i)
		h.localService("lat", services[i])
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- h.u.Run(ctx) }()
	defer func() { cancel(); <-done }()
	h.eventually("running", func() bool { return h.u.health.Check(nil) == nil })

	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		changed := time.Now()
		h.setSlice("lat", services[i], services[i]+"-slice", "n1", "n2")
		written := <-putDone
		latencies = append(latencies, written.Sub(changed))
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	p := func(q float64) float64 {
		return float64(latencies[int(q*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.5), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
	b.Logf("%d changes: p50 %.1f ms, p99 %.1f ms (targets: p50 <= %v, p99 <= %v)", len(latencies), p(0.5), p(0.99),
		2*armLatency+20*time.Millisecond, 2*armLatency+60*time.Millisecond)
}

// BenchmarkThrottle_60sRetryAfter: after a 429 with Retry-After: 60, no ARM
// call is made for the pool until the 60 s have passed.
//
// An iteration is a whole round (the throttled attempt, 59 quiet seconds,
// the write at the Retry-After), all of it timed, in a b.Loop: the function
// runs once, and the number of rounds is what -benchtime asks for (about a
// second of rounds by default, exactly N with -benchtime Nx). Timing only
// the 59 fake-clock ticks (microseconds) made Go raise b.N to ~74,000
// rounds of untimed setup, about 8 minutes of make bench (issue 27).
func BenchmarkThrottle_60sRetryAfter(b *testing.B) {
	h, _ := webHarness(b, harnessOptions{mutate: func(o *Options) { o.Interval = time.Second }})
	var rounds, before, atExpiry int
	for b.Loop() {
		h.clock.Step(2 * time.Second) // the last window is over
		nodes := []string{"n1"}
		if rounds%2 == 0 {
			nodes = []string{"n2", "n3"}
		}
		h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})
		h.setEndpoints("default", "web", nodes...)
		h.process() // the throttled attempt
		h.resetRequests()
		for range 59 {
			h.quietTick(time.Second)
		}
		before += len(h.env.Emulator().Requests())
		h.tick(time.Second) // 60 s after the 429
		g, p := h.armCalls(webPool)
		atExpiry += g + p
		if h.u.QueueLen() != 0 {
			b.Fatalf("the update was not applied at the Retry-After")
		}
		h.rec.take()
		rounds++
	}
	b.ReportMetric(float64(before)/float64(rounds), "ARM-calls-before-Retry-After")
	b.ReportMetric(float64(atExpiry)/float64(rounds), "ARM-calls-at-Retry-After")
	if before != 0 {
		b.Fatalf("%d ARM requests before the Retry-After expired", before)
	}
}
