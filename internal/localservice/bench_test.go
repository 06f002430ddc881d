package localservice

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
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
	benchChanges  = 1000 // endpoint changes per tick (5 per Service)
	benchNodes    = 20
)

// BenchmarkTick_200Services1000Changes: 1,000 endpoint changes spread over
// 200 Local Services between two ticks cost one GET and one PUT per pool,
// and the queue never holds more than one entry per pool.
func BenchmarkTick_200Services1000Changes(b *testing.B) {
	h := newHarness(b, harnessOptions{})
	for i := range benchNodes {
		h.addNode(fmt.Sprintf("n%02d", i), fmt.Sprintf("10.240.1.%d", i+1))
	}
	keys := make([]string, benchServices)
	for i := range keys {
		keys[i] = h.localService("bench", fmt.Sprintf("svc%03d", i))
	}
	// Track the largest queue the handlers ever build.
	var maxQueue int
	sample := func() {
		if n := h.u.QueueLen(); n > maxQueue {
			maxQueue = n
		}
	}
	var gets, puts, armGets, armPuts, ticks int
	b.ResetTimer()
	for iter := 0; iter < b.N; iter++ {
		b.StopTimer()
		final := make([]sets.Set[string], benchServices)
		for c := range benchChanges {
			s := c % benchServices
			round := c / benchServices // 0..4
			nodes := []string{
				fmt.Sprintf("n%02d", (s+iter+round)%benchNodes),
				fmt.Sprintf("n%02d", (s+iter+round+7)%benchNodes),
			}
			if round == benchChanges/benchServices-1 {
				final[s] = sets.New(nodes...)
			}
			h.setSlice("bench", fmt.Sprintf("svc%03d", s), fmt.Sprintf("svc%03d-slice", s), nodes...)
			if c%50 == 0 {
				sample()
			}
		}
		h.eventually("all changes queued", func() bool {
			sample()
			for s, key := range keys {
				op := h.queued(key, poolOf(key, v1.IPv4Protocol))
				if op == nil || !op.nodes.Equal(final[s]) {
					return false
				}
			}
			return true
		})
		h.resetRequests()
		g0, p0 := h.pools.attempts("get"), h.pools.attempts("put")
		b.StartTimer()
		h.tick(testInterval)
		b.StopTimer()
		gets += h.pools.attempts("get") - g0
		puts += h.pools.attempts("put") - p0
		for _, key := range keys {
			g, p := h.armCalls(poolOf(key, v1.IPv4Protocol))
			armGets += g
			armPuts += p
		}
		ticks++
		if q := h.u.QueueLen(); q != 0 {
			b.Fatalf("queue holds %d entries after the tick", q)
		}
		b.StartTimer()
	}
	b.StopTimer()
	pools := float64(benchServices * ticks)
	b.ReportMetric(float64(gets)/pools, "GET-calls/pool/tick")
	b.ReportMetric(float64(puts)/pools, "PUT-calls/pool/tick")
	b.ReportMetric(float64(armGets)/pools, "ARM-GETs/pool/tick")
	b.ReportMetric(float64(armPuts)/pools, "ARM-PUTs/pool/tick")
	b.ReportMetric(float64(maxQueue), "max-queue")
	if gets > benchServices*ticks || puts > benchServices*ticks {
		b.Fatalf("%d GET and %d PUT calls for %d pools x %d ticks", gets, puts, benchServices, ticks)
	}
	if maxQueue > benchServices {
		b.Fatalf("the queue reached %d entries for %d pools", maxQueue, benchServices)
	}
}

// armTimer records how long the updater's ARM calls take and when each
// PUT completes.
type armTimer struct {
	mu      sync.Mutex
	armTime time.Duration
	putDone chan time.Time
}

// BenchmarkLatency_EndpointChangeToPoolUpdated: with the real clock, a 1 s
// interval and 25 ms of emulator latency per ARM request, the time from an
// EndpointSlice change to the pool written is at most one interval plus the
// ARM time of the GET and the PUT.
func BenchmarkLatency_EndpointChangeToPoolUpdated(b *testing.B) {
	const interval = time.Second
	const armLatency = 25 * time.Millisecond
	h := newHarness(b, harnessOptions{emulator: emulator.Options{Latency: armLatency}, mutate: func(o *Options) {
		o.Clock = clock.RealClock{}
		o.Interval = interval
	}})
	h.addNode("n1", "10.240.0.4")
	h.addNode("n2", "10.240.0.5")
	h.localService("default", "web")
	tb := &armTimer{putDone: make(chan time.Time, 1)}
	h.pools.setHook(func(op, _ string, call func() error) error {
		start := time.Now()
		err := call()
		tb.mu.Lock()
		tb.armTime += time.Since(start)
		tb.mu.Unlock()
		if op == "put" && err == nil {
			tb.putDone <- time.Now()
		}
		return err
	})
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- h.u.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	var latencies []time.Duration
	var armTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		nodes := []string{"n1"}
		if i%2 == 0 {
			nodes = []string{"n1", "n2"}
		}
		tb.mu.Lock()
		tb.armTime = 0
		tb.mu.Unlock()
		changed := time.Now()
		h.setSlice("default", "web", "web-slice", nodes...)
		written := <-tb.putDone
		latencies = append(latencies, written.Sub(changed))
		tb.mu.Lock()
		arm := tb.armTime
		tb.mu.Unlock()
		armTotal += arm
		if lat := written.Sub(changed); lat > interval+arm+50*time.Millisecond {
			b.Errorf("change %d: %v from change to pool written; bound is interval %v + ARM time %v (+50ms scheduling slack)", i, lat, interval, arm)
		}
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	var sum time.Duration
	for _, l := range latencies {
		sum += l
	}
	b.ReportMetric(float64(sum.Milliseconds())/float64(len(latencies)), "ms-mean-change-to-pool")
	b.ReportMetric(float64(latencies[len(latencies)-1].Milliseconds()), "ms-max-change-to-pool")
	b.ReportMetric(float64(armTotal.Milliseconds())/float64(len(latencies)), "ms-ARM-GET+PUT-per-update")
}

// BenchmarkThrottle_60sRetryAfter: after a 429 with Retry-After: 60, ticks
// every second (fake clock) make no ARM call until the 60 s have passed.
func BenchmarkThrottle_60sRetryAfter(b *testing.B) {
	h, _ := webHarness(b, harnessOptions{mutate: func(o *Options) { o.Interval = time.Second }})
	var before, atExpiry int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		nodes := []string{"n1"}
		if i%2 == 0 {
			nodes = []string{"n2", "n3"}
		}
		h.setEndpoints("default", "web", nodes...)
		h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})
		h.tick(time.Second) // the throttled attempt
		h.resetRequests()
		b.StartTimer()
		for range 59 {
			h.tick(time.Second)
		}
		b.StopTimer()
		before += len(h.env.Emulator().Requests())
		h.tick(time.Second) // 60 s after the 429
		g, p := h.armCalls(webPool)
		atExpiry += g + p
		if h.u.QueueLen() != 0 {
			b.Fatalf("the update was not applied at the Retry-After")
		}
		h.rec.take()
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(before)/float64(b.N), "ARM-calls-before-Retry-After")
	b.ReportMetric(float64(atExpiry)/float64(b.N), "ARM-calls-at-Retry-After")
	if before != 0 {
		b.Fatalf("%d ARM requests before the Retry-After expired", before)
	}
}
