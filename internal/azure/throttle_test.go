package azure

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func newTestThrottle() (*throttlePolicy, *scriptedTransport) {
	clk := newFakeClock()
	return newThrottlePolicy(ClientLoadBalancer, clk, labels{subscriptionID: "sub", source: "throttle-test", metricPrefix: "loadbalancer"}, newARMLimits()), &scriptedTransport{}
}

func mustThrottleError(t *testing.T, err error) *ThrottleError {
	t.Helper()
	var te *ThrottleError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a *ThrottleError", err, err)
	}
	return te
}

func TestThrottleError_ARM429IntegerSecondsRetryAfter(t *testing.T) {
	tp, tr := newTestThrottle()
	tr.responses = append(tr.responses, throttled429("10"))
	_, err := doRequest(t, newTestPipeline(tr, tp), http.MethodPut)
	te := mustThrottleError(t, err)
	if want := t0.Add(10 * time.Second); !te.RetryAfter.Equal(want) {
		t.Errorf("RetryAfter = %v, want %v", te.RetryAfter, want)
	}
	if got := tp.write.get(); !got.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("write gate = %v, want now+10s", got)
	}
	if n := tr.count(); n != 1 {
		t.Errorf("ARM saw %d requests, want 1 (the SDK must not retry a throttle error)", n)
	}
}

func TestThrottleError_ARM429RFC1123RetryAfter(t *testing.T) {
	tp, tr := newTestThrottle()
	at := t0.Add(90 * time.Second)
	tr.responses = append(tr.responses, throttled429(at.Format(http.TimeFormat)))
	_, err := doRequest(t, newTestPipeline(tr, tp), http.MethodPut)
	te := mustThrottleError(t, err)
	if !te.RetryAfter.Equal(at) {
		t.Errorf("RetryAfter = %v, want %v", te.RetryAfter, at)
	}
	// RFC1123 with a numeric zone is accepted too.
	tp2, tr2 := newTestThrottle()
	tr2.responses = append(tr2.responses, throttled429(at.Format(time.RFC1123)))
	_, err = doRequest(t, newTestPipeline(tr2, tp2), http.MethodGet)
	if te := mustThrottleError(t, err); !te.RetryAfter.Equal(at) {
		t.Errorf("RFC1123 RetryAfter = %v, want %v", te.RetryAfter, at)
	}
}

func TestThrottleError_ARM429WithoutRetryAfterIsNow(t *testing.T) {
	tp, tr := newTestThrottle()
	tr.responses = append(tr.responses, throttled429(""))
	_, err := doRequest(t, newTestPipeline(tr, tp), http.MethodPut)
	te := mustThrottleError(t, err)
	if !te.RetryAfter.Equal(t0) {
		t.Errorf("RetryAfter = %v, want now (%v)", te.RetryAfter, t0)
	}
	if te.RetryAfter.After(tp.clock.Now()) {
		t.Error("RetryAfter is in the future")
	}
	// The gate is open: the next request reaches ARM.
	tr.responses = []func(*http.Request) *http.Response{status(http.StatusOK)}
	if _, err := doRequest(t, newTestPipeline(tr, tp), http.MethodPut); err != nil {
		t.Fatalf("request after 429 without Retry-After: %v", err)
	}
	if n := tr.count(); n != 2 {
		t.Errorf("ARM saw %d requests, want 2", n)
	}
}

func TestThrottleError_ARM429UnparsableRetryAfterKeepsGate(t *testing.T) {
	for _, prior := range []time.Duration{0, -30 * time.Second, 30 * time.Second} {
		t.Run(fmt.Sprint("prior gate now", prior), func(t *testing.T) {
			tp, tr := newTestThrottle()
			clk := tp.clock.(interface{ SetTime(time.Time) })
			// Establish a previous gate value through an earlier 429.
			prev := t0.Add(prior)
			tp.write.onThrottled(prev.Format(http.TimeFormat), t0)
			clk.SetTime(t0.Add(time.Minute)) // past the prior gate so the request is sent
			tr.responses = append(tr.responses, throttled429("soon-ish"))
			_, err := doRequest(t, newTestPipeline(tr, tp), http.MethodPut)
			te := mustThrottleError(t, err)
			if !te.RetryAfter.Equal(prev) {
				t.Errorf("RetryAfter = %v, want the previous gate %v", te.RetryAfter, prev)
			}
			if got := tp.write.get(); !got.Equal(prev) {
				t.Errorf("gate changed to %v, want unchanged %v", got, prev)
			}
		})
	}
}

func TestThrottleError_LocalGateActiveReturnsFutureRetryAfter(t *testing.T) {
	tp, tr := newTestThrottle()
	tr.responses = append(tr.responses, throttled429("60"))
	pl := newTestPipeline(tr, tp)
	if _, err := doRequest(t, pl, http.MethodPut); err == nil {
		t.Fatal("first request: want throttle error")
	}
	tp.clock.(interface{ Step(time.Duration) }).Step(20 * time.Second)
	for i := 0; i < 5; i++ {
		_, err := doRequest(t, pl, http.MethodPut)
		te := mustThrottleError(t, err)
		if !te.RetryAfter.After(tp.clock.Now()) {
			t.Errorf("RetryAfter %v is not in the future of %v", te.RetryAfter, tp.clock.Now())
		}
		if !te.RetryAfter.Equal(t0.Add(time.Minute)) {
			t.Errorf("RetryAfter = %v, want the gate %v", te.RetryAfter, t0.Add(time.Minute))
		}
	}
	if n := tr.count(); n != 1 {
		t.Errorf("ARM saw %d requests, want 1: the closed gate must block locally", n)
	}
	// Once the clock passes the gate, requests flow again.
	tp.clock.(interface{ Step(time.Duration) }).Step(40 * time.Second)
	tr.responses = []func(*http.Request) *http.Response{status(http.StatusOK)}
	if _, err := doRequest(t, pl, http.MethodPut); err != nil {
		t.Fatalf("after the gate: %v", err)
	}
	if n := tr.count(); n != 2 {
		t.Errorf("ARM saw %d requests, want 2", n)
	}
}

func TestThrottleError_IsErrTooManyRequest(t *testing.T) {
	err := error(&ThrottleError{RetryAfter: t0})
	if !errors.Is(err, ErrTooManyRequest) {
		t.Error("errors.Is(ThrottleError, ErrTooManyRequest) = false")
	}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), ErrTooManyRequest) {
		t.Error("errors.Is through wrapping = false")
	}
}

func TestThrottleError_AsExtractsRetryAfter(t *testing.T) {
	want := t0.Add(42 * time.Second)
	err := fmt.Errorf("azure loadBalancer get rg/lb: %w", &ThrottleError{RetryAfter: want})
	var te *ThrottleError
	if !errors.As(err, &te) {
		t.Fatal("errors.As failed")
	}
	if !te.RetryAfter.Equal(want) {
		t.Errorf("RetryAfter = %v, want %v", te.RetryAfter, want)
	}
}

func TestThrottleError_ErrorMatchesSentinel(t *testing.T) {
	if got, want := (&ThrottleError{RetryAfter: t0}).Error(), ErrTooManyRequest.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Unwrap(&ThrottleError{}) != ErrTooManyRequest { //nolint:errorlint // Unwrap's result itself is tested
		t.Error("Unwrap() is not ErrTooManyRequest")
	}
}

// TestThrottleGatesByKind: reads, writes and deletes have a gate each, as
// ARM has a bucket each; a 429 closes the gate of its kind only.
func TestThrottleGatesByKind(t *testing.T) {
	tp, tr := newTestThrottle()
	pl := newTestPipeline(tr, tp)
	tr.responses = []func(*http.Request) *http.Response{throttled429("30"), status(http.StatusOK)}
	if _, err := doRequest(t, pl, http.MethodPut); !errors.Is(err, ErrTooManyRequest) {
		t.Fatalf("PUT: %v, want throttled", err)
	}
	// Reads and deletes still flow while the write gate is closed.
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodDelete} {
		if _, err := doRequest(t, pl, m); err != nil {
			t.Errorf("%s with closed write gate: %v", m, err)
		}
	}
	// Every write method is blocked.
	for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodPost} {
		if _, err := doRequest(t, pl, m); !errors.Is(err, ErrTooManyRequest) {
			t.Errorf("%s with closed write gate: %v, want throttled", m, err)
		}
	}
	if n := tr.count(); n != 4 {
		t.Errorf("ARM saw %d requests, want 4 (1 PUT + GET + HEAD + DELETE)", n)
	}
	// A read 429 closes only the read gate, a delete 429 only the delete
	// gate.
	for _, c := range []struct{ throttled, open, closed string }{
		{http.MethodGet, http.MethodPut, http.MethodHead},
		{http.MethodDelete, http.MethodGet, http.MethodDelete},
	} {
		tp2, tr2 := newTestThrottle()
		pl2 := newTestPipeline(tr2, tp2)
		tr2.responses = []func(*http.Request) *http.Response{throttled429("30"), status(http.StatusOK)}
		if _, err := doRequest(t, pl2, c.throttled); !errors.Is(err, ErrTooManyRequest) {
			t.Fatalf("%s: %v, want throttled", c.throttled, err)
		}
		if _, err := doRequest(t, pl2, c.open); err != nil {
			t.Errorf("%s after a %s 429: %v", c.open, c.throttled, err)
		}
		if _, err := doRequest(t, pl2, c.closed); !errors.Is(err, ErrTooManyRequest) {
			t.Errorf("%s after a %s 429: %v, want throttled", c.closed, c.throttled, err)
		}
	}
}

// TestThrottleGatesSharedByClients: ARM counts per subscription and
// principal, so a 429 one client saw holds back the others' requests of
// that kind.
func TestThrottleGatesSharedByClients(t *testing.T) {
	limits := newARMLimits()
	clk := newFakeClock()
	l := labels{subscriptionID: "sub", source: "throttle-test"}
	lb, tr := newThrottlePolicy(ClientLoadBalancer, clk, l, limits), &scriptedTransport{}
	pip, tr2 := newThrottlePolicy(ClientPublicIPAddress, clk, l, limits), &scriptedTransport{}
	tr.responses = []func(*http.Request) *http.Response{throttled429("30")}
	if _, err := doRequest(t, newTestPipeline(tr, lb), http.MethodPut); !errors.Is(err, ErrTooManyRequest) {
		t.Fatalf("load balancer PUT: %v, want throttled", err)
	}
	tr2.responses = []func(*http.Request) *http.Response{status(http.StatusOK)}
	_, err := doRequest(t, newTestPipeline(tr2, pip), http.MethodPut)
	if te := mustThrottleError(t, err); !te.RetryAfter.Equal(t0.Add(30 * time.Second)) {
		t.Errorf("public IP PUT: RetryAfter %v, want the load balancer's 429's", te.RetryAfter)
	}
	if tr2.count() != 0 {
		t.Error("the public IP client sent a write through the closed gate")
	}
	if _, err := doRequest(t, newTestPipeline(tr2, pip), http.MethodGet); err != nil {
		t.Errorf("public IP GET: %v", err)
	}
}

func TestThrottleGateNeverMovesBackwards(t *testing.T) {
	var g gate
	g.onThrottled("60", t0)
	if got, _ := g.onThrottled("5", t0); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("gate = %v after a shorter Retry-After, want it kept at %v", got, t0.Add(time.Minute))
	}
	if got, _ := g.onThrottled("120", t0); !got.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("gate = %v after a longer Retry-After, want %v", got, t0.Add(2*time.Minute))
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		in     string
		want   time.Time
		wantOK bool
	}{
		{"", t0, true},
		{"  ", t0, true},
		{"0", t0, true},
		{"10", t0.Add(10 * time.Second), true},
		{" 7 ", t0.Add(7 * time.Second), true},
		{"-1", time.Time{}, false},
		{"1.5", time.Time{}, false},
		{"99999999999999999999", time.Time{}, false},
		{"9223372036", t0.Add(9223372036 * time.Second), true},
		{"9223372037", time.Time{}, false},
		{"Sun, 01 Mar 2026 13:00:00 +0000", t0.Add(time.Hour), true},
		{t0.Add(time.Hour).Format(http.TimeFormat), t0.Add(time.Hour), true},
		{t0.Add(-time.Hour).Format(http.TimeFormat), t0.Add(-time.Hour), true},
		{"Sunday, 01-Mar-26 13:00:00 GMT", t0.Add(time.Hour), true},
		{"tomorrow", time.Time{}, false},
	}
	for _, tc := range tests {
		got, ok := parseRetryAfter(tc.in, t0)
		if ok != tc.wantOK || (ok && !got.Equal(tc.want)) {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "10", "-5", "Sun, 01 Mar 2026 12:00:00 GMT", "junk", "99999999999999999999", "9223372036"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, ok := parseRetryAfter(v, t0)
		if !ok && !got.IsZero() {
			t.Errorf("parseRetryAfter(%q) not ok but returned %v", v, got)
		}
		var g gate
		g.until = t0
		after, _ := g.onThrottled(v, t0)
		if after.Before(t0) {
			t.Errorf("gate moved backwards to %v for %q", after, v)
		}
	})
}
