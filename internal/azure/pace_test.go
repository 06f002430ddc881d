package azure

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// remaining answers with ARM's remaining-requests headers for the
// request's kind.
func remaining(left, global int) func(*http.Request) *http.Response {
	return func(req *http.Request) *http.Response {
		k := kindOf(req.Method)
		h := http.Header{}
		if left >= 0 {
			h.Set(k.remainingHeader(), strconv.Itoa(left))
		}
		if global >= 0 {
			h.Set(k.globalRemainingHeader(), strconv.Itoa(global))
		}
		return respond(req, http.StatusOK, h, `{}`)
	}
}

// TestPacerHoldsBackUntilTheTokenIsDue: once ARM reports its write bucket
// empty, the next write waits for the token Azure's refill (10 a second)
// brings, instead of being sent into a 429; reads are not held back.
func TestPacerHoldsBackUntilTheTokenIsDue(t *testing.T) {
	tp, tr := newTestThrottle()
	clk := tp.clock.(interface {
		Step(time.Duration)
		HasWaiters() bool
	})
	pl := newTestPipeline(tr, tp)
	tr.responses = []func(*http.Request) *http.Response{remaining(0, 2999), remaining(0, 2998)}
	if _, err := doRequest(t, pl, http.MethodPut); err != nil {
		t.Fatal(err)
	}
	if _, err := doRequest(t, pl, http.MethodGet); err != nil {
		t.Fatalf("a read with the write bucket empty: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := doRequest(t, pl, http.MethodPatch)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the write was not held back")
		}
		time.Sleep(time.Millisecond)
	}
	if n := tr.count(); n != 2 {
		t.Fatalf("ARM saw %d requests before the token was due, want 2", n)
	}
	clk.Step(99 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the write went out before its token was due: %v", err)
	default:
	}
	clk.Step(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := tr.count(); n != 3 {
		t.Fatalf("ARM saw %d requests, want 3", n)
	}
}

// TestPacerNoHeadersNoPacing: an endpoint that reports no remaining
// counts is never paced.
func TestPacerNoHeadersNoPacing(t *testing.T) {
	tp, tr := newTestThrottle()
	pl := newTestPipeline(tr, tp)
	for i := 0; i < 1000; i++ {
		if _, err := doRequest(t, pl, http.MethodDelete); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPacerLongWaitReturnedToTheCaller: a wait longer than maxPaceWait, or
// past the context's deadline, is returned at once as a throttle error
// with the time the token is due; nothing is sent and the token is not
// taken.
func TestPacerLongWaitReturnedToTheCaller(t *testing.T) {
	clk := newFakeClock()
	var p pacer
	p.init(azureLimits[kindWrite])
	p.known, p.tokens = true, -400 // 401 requests ahead: 40.1 s
	_, err := p.wait(context.Background(), clk)
	var te *ThrottleError
	if !errors.As(err, &te) || !te.RetryAfter.Equal(t0.Add(40100*time.Millisecond)) {
		t.Fatalf("wait: %v, want a throttle error for 40.1 s from now", err)
	}
	p.tokens = 0.5 // 50 ms
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(10*time.Millisecond))
	defer cancel()
	if _, err := p.wait(ctx, clk); !errors.As(err, &te) || !te.RetryAfter.Equal(t0.Add(50*time.Millisecond)) {
		t.Fatalf("wait past the deadline: %v", err)
	}
	if p.tokens != 0.5 || p.waiting != 0 || p.inflight != 0 {
		t.Fatalf("a refused wait changed the pacer: %v tokens, %d waiting, %d in flight", p.tokens, p.waiting, p.inflight)
	}
}

// TestPacerEstimate: lower reports always apply; higher ones only when
// they answer a request sent after the one that set the estimate; the
// requests sent after the one answered and still in flight, and those
// waiting, are not counted as available.
func TestPacerEstimate(t *testing.T) {
	clk := newFakeClock()
	var p pacer
	p.init(azureLimits[kindWrite])
	ctx := context.Background()
	a, _ := p.wait(ctx, clk)
	b, _ := p.wait(ctx, clk)
	c, _ := p.wait(ctx, clk)
	put := func(left int) *http.Response { return remaining(left, -1)(&http.Request{Method: http.MethodPut}) }
	p.done(b, put(10), clk.Now()) // a and c still in flight; ARM has counted a, sent before b
	if p.tokens != 9 || !p.known {
		t.Fatalf("after b: %v tokens, want 9", p.tokens)
	}
	p.done(a, put(11), clk.Now()) // older than b: does not raise
	if p.tokens != 9 {
		t.Fatalf("after a's late answer: %v tokens, want 9", p.tokens)
	}
	p.done(c, put(3), clk.Now()) // lower: applies
	if p.tokens != 3 {
		t.Fatalf("after c: %v tokens, want 3", p.tokens)
	}
	clk.Step(time.Second) // +10
	d, _ := p.wait(ctx, clk)
	if p.tokens != 12 {
		t.Fatalf("after a second and one more request: %v tokens, want 12", p.tokens)
	}
	p.done(d, put(500), clk.Now()) // an ARM with larger buckets
	if p.tokens != 500 || p.capacity != 501 {
		t.Fatalf("after a larger report: %v tokens of %v, want 500 of 501", p.tokens, p.capacity)
	}
	// The smaller of the principal's and the global count is taken.
	e, _ := p.wait(ctx, clk)
	p.done(e, remaining(7, 2)(&http.Request{Method: http.MethodPost}), clk.Now())
	if p.tokens != 2 {
		t.Fatalf("after a global count of 2: %v tokens", p.tokens)
	}
}
