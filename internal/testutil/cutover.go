package testutil

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// CutoverScenario is one way a node leaves service while clients open new
// connections to a Service.
type CutoverScenario struct {
	Name string
	// Taint: the node gets the out-of-service taint; StopAfter later it
	// stops (0: both at once). Without Taint the node just stops and only
	// the load balancer's probes can notice.
	Taint     bool
	StopAfter time.Duration
}

// CutoverScenarios are the three scenarios of the admin-state measurements.
var CutoverScenarios = []CutoverScenario{
	{Name: "a-stop-probe-only"},
	{Name: "b-taint-then-stop-1s", Taint: true, StopAfter: time.Second},
	{Name: "c-taint-and-stop", Taint: true},
}

// Cutover is what RunCutover needs to act on one Service and node.
type Cutover struct {
	// Frontend is the Service's ingress address and port.
	Frontend netip.AddrPort
	// Node is the name the leaving node answers with.
	Node string
	// Taint applies the out-of-service taint to the node.
	Taint func(context.Context) error
	// Stop stops the node: it stops answering, and established
	// connections to it end.
	Stop func()
	// Rate is new connections per second (default 200).
	Rate int
	// Jitter, when set, waits a random time in [0, Jitter) of steady load
	// before the event: with the probe interval, the node stops at a random
	// point of the probe cycle, as it would in a real cluster.
	Jitter time.Duration
	// Quiet ends the measurement once no new connection reached the node
	// (or failed) for this long after the node stopped (default 1.5 s);
	// MaxAfter bounds it (default 25 s after the event).
	Quiet, MaxAfter time.Duration
}

// CutoverResult is one new connection of the load.
type CutoverResult struct {
	Start time.Time
	Node  string // the name that answered; "" when the connection failed
	Err   error
}

// CutoverReport is what clients felt in one scenario.
type CutoverReport struct {
	Scenario CutoverScenario
	// Event is when the node began to leave (taint, or stop); Stopped
	// when it stopped.
	Event, Stopped time.Time
	// Sent and Failed count new connections from Event on.
	Sent, Failed int
	// Window is from Event to the start of the last new connection that
	// still reached the leaving node (answered by it, or failed because it
	// was gone); 0 when none did.
	Window time.Duration
	// EstablishedSurvived: a connection to the node established before the
	// taint still worked after the admin state took effect and until the
	// node stopped (only measured when the node stops a while after the
	// taint).
	EstablishedSurvived *bool
	Results             []CutoverResult
}

// RunCutover opens new connections at Rate to c.Frontend, makes the node
// leave as sc says, and reports what the clients saw. It fails t if the
// Service does not answer before the event.
func RunCutover(t testing.TB, sc CutoverScenario, c Cutover) CutoverReport {
	t.Helper()
	if c.Rate <= 0 {
		c.Rate = 200
	}
	if c.Quiet <= 0 {
		c.Quiet = 1500 * time.Millisecond
	}
	if c.MaxAfter <= 0 {
		c.MaxAfter = 25 * time.Second
	}
	ctx := context.Background()
	var established *Conn
	if sc.Taint && sc.StopAfter > 0 {
		established = dialTo(t, c.Frontend, c.Node)
		defer established.Close()
	}
	load := startLoad(c.Frontend, c.Rate)
	defer load.stop()
	// Steady state first: more than half a second of answers.
	started := time.Now()
	Poll(t, 10*time.Second, "the Service answering before the node leaves", func() bool {
		return time.Since(started) > 600*time.Millisecond && load.answeredSince(time.Now().Add(-500*time.Millisecond)) >= c.Rate/4
	})
	if c.Jitter > 0 {
		time.Sleep(rand.N(c.Jitter)) // the scenario's schedule: a random phase
	}
	rep := CutoverReport{Scenario: sc, Event: time.Now()}
	if sc.Taint {
		if err := c.Taint(ctx); err != nil {
			t.Fatalf("taint %s: %v", c.Node, err)
		}
		if sc.StopAfter > 0 {
			// The established connection must survive the taint until the
			// node stops: use it once the taint had time to take effect.
			time.Sleep(sc.StopAfter / 2) // the scenario's schedule in wall time, not synchronisation
			_, err := established.Get()
			ok := err == nil
			rep.EstablishedSurvived = &ok
			time.Sleep(sc.StopAfter - sc.StopAfter/2) // the scenario's schedule
		}
	}
	rep.Stopped = time.Now()
	c.Stop()
	// Measure until the node has been quiet for a while.
	deadline := rep.Event.Add(c.MaxAfter)
	for time.Now().Before(deadline) {
		last := load.lastTo(c.Node, rep.Event)
		if last.IsZero() {
			last = rep.Stopped
		}
		if time.Since(last) >= c.Quiet && time.Since(rep.Stopped) >= c.Quiet {
			break
		}
		time.Sleep(50 * time.Millisecond) // polling for the quiet period
	}
	rep.Results = load.stop()
	for _, r := range rep.Results {
		if r.Start.Before(rep.Event) {
			continue
		}
		rep.Sent++
		if r.Err != nil {
			rep.Failed++
		}
		if r.Err != nil || r.Node == c.Node {
			rep.Window = max(rep.Window, r.Start.Sub(rep.Event))
		}
	}
	return rep
}

// dialTo opens a keep-alive connection that the node answers.
func dialTo(t testing.TB, fe netip.AddrPort, node string) *Conn {
	t.Helper()
	for range 200 {
		k, name, err := Dial(fe, 2*time.Second)
		if err == nil && name == node {
			return k
		}
		if k != nil {
			k.Close()
		}
	}
	t.Fatalf("no connection to %s reached %s in 200 tries", fe, node)
	return nil
}

// String is a one-line summary.
func (r CutoverReport) String() string {
	s := fmt.Sprintf("%s: %d new connections from the event on, %d failed; new connections reached the leaving node for %v",
		r.Scenario.Name, r.Sent, r.Failed, r.Window.Round(time.Millisecond))
	if r.EstablishedSurvived != nil {
		s += fmt.Sprintf("; the established connection survived the taint: %v", *r.EstablishedSurvived)
	}
	return s
}

// Timeline draws the connections from 0.5 s before the event on, one
// character per bin: '#' some reached the leaving node, 'x' some failed,
// '.' all went to other nodes, ' ' none started. '|' marks the event and
// 'S' the stop.
func (r CutoverReport) Timeline(node string, bin time.Duration) string {
	from := r.Event.Add(-500 * time.Millisecond)
	var end time.Time
	for _, x := range r.Results {
		end = maxTime(end, x.Start)
	}
	n := int(end.Sub(from)/bin) + 1
	if n <= 0 {
		return ""
	}
	cells := make([]byte, n)
	for i := range cells {
		cells[i] = ' '
	}
	for _, x := range r.Results {
		i := int(x.Start.Sub(from) / bin)
		if i < 0 || i >= n {
			continue
		}
		switch {
		case x.Err != nil:
			cells[i] = 'x'
		case x.Node == node && cells[i] != 'x':
			cells[i] = '#'
		case cells[i] == ' ':
			cells[i] = '.'
		}
	}
	var b strings.Builder
	for i, c := range cells {
		at := from.Add(time.Duration(i) * bin)
		if !at.Before(r.Event) && at.Before(r.Event.Add(bin)) {
			b.WriteByte('|')
		}
		if !at.Before(r.Stopped) && at.Before(r.Stopped.Add(bin)) && r.Stopped.After(r.Event.Add(bin/2)) {
			b.WriteByte('S')
		}
		b.WriteByte(c)
	}
	return b.String()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// load opens new connections at a fixed rate until stopped.
type load struct {
	mu      sync.Mutex
	results []CutoverResult
	stopped chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func startLoad(fe netip.AddrPort, rate int) *load {
	l := &load{stopped: make(chan struct{})}
	l.wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-l.stopped:
				return
			case <-tick.C:
			}
			l.wg.Go(func() {
				start := time.Now()
				name, err := Hello(fe, time.Second)
				l.mu.Lock()
				l.results = append(l.results, CutoverResult{Start: start, Node: name, Err: err})
				l.mu.Unlock()
			})
		}
	})
	return l
}

// stop ends the load, waits for connections in flight and returns every
// result.
func (l *load) stop() []CutoverResult {
	l.once.Do(func() { close(l.stopped) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]CutoverResult(nil), l.results...)
}

func (l *load) answeredSince(t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.results {
		if r.Err == nil && !r.Start.Before(t) {
			n++
		}
	}
	return n
}

// lastTo is the start of the last connection from since on that reached
// node or failed.
func (l *load) lastTo(node string, since time.Time) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, r := range l.results {
		if !r.Start.Before(since) && (r.Err != nil || r.Node == node) {
			last = maxTime(last, r.Start)
		}
	}
	return last
}
