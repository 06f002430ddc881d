package azure

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/metrics"
)

// ErrTooManyRequest is the sentinel every throttling error unwraps to. Test
// for throttling with errors.Is(err, ErrTooManyRequest), or extract the time
// with errors.As(err, &*ThrottleError) / ThrottleRetryAfter.
var ErrTooManyRequest = errors.New("too many requests: Azure Resource Manager throttled this client")

// ThrottleError is returned by the throttle policy both when ARM answers 429
// and when a request is blocked locally because the throttle gate is still
// closed. RetryAfter is the gate time: the earliest time a request of the
// same kind (read or write) on the same client will be sent to ARM again. It
// may be in the past (a 429 without a usable Retry-After header), in which
// case callers should fall back to their normal retry interval.
type ThrottleError struct {
	RetryAfter time.Time
}

// Error returns the text of ErrTooManyRequest.
func (e *ThrottleError) Error() string { return ErrTooManyRequest.Error() }

// Unwrap returns ErrTooManyRequest.
func (e *ThrottleError) Unwrap() error { return ErrTooManyRequest }

// NonRetriable marks the error as final for the Azure SDK retry policy: a
// throttled request is not retried inside the SDK (429 is not one of
// RetriableStatusCodes either). Callers own the wait, using RetryAfter.
func (e *ThrottleError) NonRetriable() {}

// gate is one throttle gate: requests are blocked while now < until.
type gate struct {
	mu    sync.Mutex
	until time.Time
}

func (g *gate) get() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.until
}

// onThrottled applies an ARM 429's Retry-After value and returns the new gate
// time. An absent header sets the gate to now, an integer number of seconds or
// an HTTP date sets it to that absolute time, an unparsable value leaves it
// unchanged. The gate never moves backwards, so a late 429 from a request that
// was in flight cannot reopen a gate a newer 429 closed.
func (g *gate) onThrottled(retryAfter string, now time.Time) (time.Time, bool) {
	t, ok := parseRetryAfter(retryAfter, now)
	g.mu.Lock()
	defer g.mu.Unlock()
	if ok && t.After(g.until) {
		g.until = t
	}
	return g.until, ok
}

// maxRetryAfterSeconds bounds integer Retry-After values so that converting
// them to a time.Duration cannot overflow.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// parseRetryAfter converts a Retry-After header value to an absolute time.
// It returns ok=false for a value that is neither a non-negative integer
// number of seconds nor an HTTP date (the forms http.ParseTime accepts, plus
// RFC1123 with any zone name or a numeric zone). An empty value means "now".
func parseRetryAfter(v string, now time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return now, true
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > maxRetryAfterSeconds {
			return time.Time{}, false
		}
		return now.Add(time.Duration(n) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	for _, layout := range []string{time.RFC1123, time.RFC1123Z} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// throttlePolicy holds one client's read and write throttle gates. It is a
// per-retry pipeline policy: every attempt of the SDK retry loop (and every
// LRO poll) passes the gate.
type throttlePolicy struct {
	client string
	clock  clock.PassiveClock
	labels labels
	read   gate
	write  gate
}

func newThrottlePolicy(client string, clk clock.PassiveClock, l labels) *throttlePolicy {
	return &throttlePolicy{client: client, clock: clk, labels: l}
}

func (p *throttlePolicy) gateFor(method string) (*gate, string) {
	if isRead(method) {
		return &p.read, "read"
	}
	return &p.write, "write"
}

// Do implements policy.Policy.
func (p *throttlePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	g, kind := p.gateFor(raw.Method)
	if until := g.get(); p.clock.Now().Before(until) {
		metrics.CountAPIRequestThrottled(p.labels.forRequest(raw))
		klog.FromContext(raw.Context()).V(4).Info("Azure request blocked by closed throttle gate",
			"client", p.client, "gate", kind, "method", raw.Method, "retryAfter", until)
		return nil, &ThrottleError{RetryAfter: until}
	}
	resp, err := req.Next()
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	header := resp.Header.Get("Retry-After")
	until, parsed := g.onThrottled(header, p.clock.Now())
	code := armErrorCode(resp)
	runtime.Drain(resp)
	metrics.CountAPIRequestThrottled(p.labels.forRequest(raw))
	logger := klog.FromContext(raw.Context())
	if !parsed {
		logger.Info("Ignoring unparsable Retry-After header of ARM 429; throttle gate unchanged",
			"client", p.client, "gate", kind, "retryAfterHeader", header, "gateUntil", until)
	}
	logger.V(2).Info("ARM throttled request; throttle gate set",
		"client", p.client, "gate", kind, "method", raw.Method, "code", code, "retryAfter", until)
	return nil, &ThrottleError{RetryAfter: until}
}
