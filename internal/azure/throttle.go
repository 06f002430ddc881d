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

// requestKind is the kind of request Azure Resource Manager counts in one
// bucket: reads (GET, HEAD), deletes (DELETE) and writes (the others: PUT,
// PATCH, POST).
type requestKind int

const (
	kindRead requestKind = iota
	kindWrite
	kindDelete
	numKinds
)

func kindOf(method string) requestKind {
	switch {
	case isRead(method):
		return kindRead
	case method == http.MethodDelete:
		return kindDelete
	}
	return kindWrite
}

func (k requestKind) String() string { return [...]string{"read", "write", "delete"}[k] }

// remainingHeader and globalRemainingHeader are the headers in which ARM
// reports what is left of the principal's and of the subscription's
// bucket for the kind of the request answered.
func (k requestKind) remainingHeader() string {
	return "X-Ms-Ratelimit-Remaining-Subscription-" + [...]string{"Reads", "Writes", "Deletes"}[k]
}

func (k requestKind) globalRemainingHeader() string {
	return "X-Ms-Ratelimit-Remaining-Subscription-Global-" + [...]string{"Reads", "Writes", "Deletes"}[k]
}

// armLimits is what azlb knows of Azure Resource Manager's limits on its
// subscription and principal: for each kind of request a throttle gate,
// closed by a 429 until its Retry-After, and a pacer that follows the
// x-ms-ratelimit-remaining-subscription-* headers. ARM counts requests per
// subscription and principal, not per client, so every client of one
// Clients shares one armLimits: a 429 on a public IP write holds back the
// load balancer writes too, which ARM would refuse as well.
type armLimits struct {
	gates  [numKinds]gate
	pacers [numKinds]pacer
}

func newARMLimits() *armLimits {
	l := &armLimits{}
	for k := range numKinds {
		l.pacers[k].init(azureLimits[k])
	}
	return l
}

// throttlePolicy applies the shared armLimits to one client's requests. It
// is a per-retry pipeline policy: every attempt of the SDK retry loop (and
// every LRO poll) passes it.
type throttlePolicy struct {
	client string
	clock  clock.Clock
	labels labels
	limits *armLimits
	// read, write and del are limits' gates, by kind.
	read, write, del *gate
}

func newThrottlePolicy(client string, clk clock.Clock, l labels, limits *armLimits) *throttlePolicy {
	return &throttlePolicy{client: client, clock: clk, labels: l, limits: limits,
		read: &limits.gates[kindRead], write: &limits.gates[kindWrite], del: &limits.gates[kindDelete]}
}

// Do implements policy.Policy.
func (p *throttlePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	k := kindOf(raw.Method)
	g, pc := &p.limits.gates[k], &p.limits.pacers[k]
	if err := p.gateClosed(raw, g, k); err != nil {
		return nil, err
	}
	ticket, err := pc.wait(raw.Context(), p.clock)
	if err != nil {
		metrics.CountAPIRequestThrottled(p.labels.forRequest(raw))
		klog.FromContext(raw.Context()).V(4).Info("Azure request held back: ARM's remaining-requests headers say the bucket is empty",
			"client", p.client, "kind", k, "method", raw.Method, "err", err)
		return nil, err
	}
	if ticket.waited > 0 {
		metrics.ObserveLockWait("arm-pace", k.String(), ticket.waited)
		// A 429 may have closed the gate while this request waited.
		if err := p.gateClosed(raw, g, k); err != nil {
			pc.done(ticket, nil, p.clock.Now())
			return nil, err
		}
	}
	resp, err := req.Next()
	pc.done(ticket, resp, p.clock.Now())
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
			"client", p.client, "gate", k, "retryAfterHeader", header, "gateUntil", until)
	}
	logger.V(2).Info("ARM throttled request; throttle gate set",
		"client", p.client, "gate", k, "method", raw.Method, "code", code, "retryAfter", until)
	return nil, &ThrottleError{RetryAfter: until}
}

// gateClosed returns the throttle error of a closed gate, or nil.
func (p *throttlePolicy) gateClosed(raw *http.Request, g *gate, k requestKind) error {
	until := g.get()
	if !p.clock.Now().Before(until) {
		return nil
	}
	metrics.CountAPIRequestThrottled(p.labels.forRequest(raw))
	klog.FromContext(raw.Context()).V(4).Info("Azure request blocked by closed throttle gate",
		"client", p.client, "gate", k, "method", raw.Method, "retryAfter", until)
	return &ThrottleError{RetryAfter: until}
}
