package azure

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azlb/azlb/internal/metrics"
)

// ErrWriteFenced is what every write returns while the write fence is
// closed (see Clients.SetWriteFence). Test with errors.Is.
var ErrWriteFenced = errors.New("write refused: this replica is not the current leader")

// WriteFence says whether this process may write to ARM now: nil allows,
// an error refuses (and says why). It is called before every attempt of
// every write request (PUT, PATCH, POST, DELETE) and before each socket
// write of it, never for reads or operation polls, and must be cheap and
// safe for concurrent use.
type WriteFence func() error

// callPolicy runs once per method call, before the SDK retry loop: it starts
// the User-Agent with azure.json's userAgent.
type callPolicy struct {
	userAgent string
}

func (p *callPolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if p.userAgent != "" {
		if ua := raw.Header.Get("User-Agent"); ua != "" {
			raw.Header.Set("User-Agent", p.userAgent+" "+ua)
		} else {
			raw.Header.Set("User-Agent", p.userAgent)
		}
	}
	return req.Next()
}

// fencePolicy refuses a write attempt while the write fence is closed and
// marks the attempts it admits as writes (markWrite), so that the transport
// NewClients builds sends them on fenced connections (armTransport). It runs
// for every attempt after the token, the throttle gate's wait and the SDK's
// retry delay (only the metrics policy, which must not time a refused
// attempt as a request, and the SDK's logging follow; a refusal is counted
// as an API request error with code "fenced"): a replica frozen (SIGSTOP, a VM pause)
// while a write waited there, or between two attempts of one write, is
// asked again when it wakes, and by then its lease is stale. A freeze after
// this check, while the request passes the remaining policies and the HTTP
// transport's queues, is caught by the fenced connection, which asks again
// before each socket write. With an injected ClientOptions.Transport (tests)
// only this check applies.
type fencePolicy struct {
	fence *fenceSlot
	// labels count a refusal as an API request error with code "fenced",
	// as the socket's refusals are (metricsPolicy).
	labels labels
}

func (p *fencePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if raw.Method == http.MethodGet || raw.Method == http.MethodHead {
		return req.Next()
	}
	if err := p.fence.allow(); err != nil {
		metrics.CountAPIRequestError(p.labels.forRequest(raw), "fenced")
		return nil, &fencedError{method: raw.Method, path: raw.URL.Path, err: err}
	}
	return req.WithContext(markWrite(raw.Context())).Next()
}

// fenceSlot holds the write fence SetWriteFence installed, if any. The
// pipelines' fencePolicy and the write transport (armTransport) ask it.
type fenceSlot struct{ f atomic.Pointer[WriteFence] }

// allow asks the installed fence; without one every write is allowed.
func (s *fenceSlot) allow() error {
	if f := s.f.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// fencedError is a write the fence refused. It is final for the SDK retry
// policy and unwraps to ErrWriteFenced and the fence's reason.
type fencedError struct {
	method, path string
	err          error
}

func (e *fencedError) Error() string {
	return fmt.Sprintf("%s %s: %v: %v", e.method, e.path, ErrWriteFenced, e.err)
}

func (e *fencedError) Unwrap() []error { return []error{ErrWriteFenced, e.err} }

// NonRetriable keeps the SDK from retrying a fenced write.
func (e *fencedError) NonRetriable() {}

// SetWriteFence installs (or, with nil, removes) the fence every attempt of
// every write of every client passes just before it is sent, and every
// socket write of it again (armTransport). The controller manager installs one under
// leader election, so a replica that lost its lease (frozen, partitioned)
// writes nothing even before it notices. Without a fence every write is
// allowed.
func (c *Clients) SetWriteFence(f WriteFence) {
	if f == nil {
		c.fence.f.Store(nil)
		return
	}
	c.fence.f.Store(&f)
}
