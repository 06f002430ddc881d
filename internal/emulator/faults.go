package emulator

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault describes an injected failure or delay for matching requests.
// Faults are matched in the order they were added; the first that matches
// and fires decides the outcome.
type Fault struct {
	// Method matches the HTTP method (case-insensitive); "" matches any.
	Method string `json:"method,omitempty"`
	// PathRegex is matched against the URL path. "" matches every ARM path;
	// a non-empty regex may also match AAD paths (/{tenant}/oauth2/...).
	PathRegex string `json:"pathRegex,omitempty"`
	// Count is how many times the fault fires before it expires; 0 means
	// unlimited.
	Count int `json:"count,omitempty"`
	// Probability in (0,1) makes the fault fire at random; 0 or 1 means
	// always.
	Probability float64 `json:"probability,omitempty"`
	// Status is the HTTP status to answer with (429, 409, 412, 500, ...).
	// 0 lets the request through (after Latency, or with LROResult).
	Status int `json:"status,omitempty"`
	// Code is the ARM error code in the body; "" derives one from Status.
	Code string `json:"code,omitempty"`
	// Message is the ARM error message; "" derives one.
	Message string `json:"message,omitempty"`
	// RetryAfter is sent verbatim as the Retry-After header when non-empty.
	RetryAfter string `json:"retryAfter,omitempty"`
	// Latency is added before answering.
	Latency time.Duration `json:"latency,omitempty"`
	// ResetConnection aborts the connection without a response.
	ResetConnection bool `json:"resetConnection,omitempty"`
	// LROResult ("Failed" or "Canceled") lets a write through but makes its
	// asynchronous operation end that way.
	LROResult string `json:"lroResult,omitempty"`
}

// faultEntry is an installed fault.
type faultEntry struct {
	id    string
	f     Fault
	re    *regexp.Regexp
	fired int
}

// FaultStatus is an installed fault as the control API lists it.
type FaultStatus struct {
	ID    string `json:"id"`
	Fault Fault  `json:"fault"`
	Fired int    `json:"fired"`
}

type faultSet struct {
	mu      sync.Mutex
	entries []*faultEntry
	nextID  int
	n       atomic.Int32 // len(entries), read without the lock
}

func (f Fault) validate() (*regexp.Regexp, error) {
	var re *regexp.Regexp
	if f.PathRegex != "" {
		var err error
		re, err = regexp.Compile(f.PathRegex)
		if err != nil {
			return nil, fmt.Errorf("fault pathRegex %q does not compile: %w", f.PathRegex, err)
		}
	}
	if f.Count < 0 {
		return nil, fmt.Errorf("fault count %d must not be negative", f.Count)
	}
	if f.Probability < 0 || f.Probability > 1 {
		return nil, fmt.Errorf("fault probability %v must be within [0,1]", f.Probability)
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
		return nil, fmt.Errorf("fault status %d is not an HTTP status code", f.Status)
	}
	if f.Latency < 0 {
		return nil, fmt.Errorf("fault latency %v must not be negative", f.Latency)
	}
	switch f.LROResult {
	case "", resultFailed, resultCanceled:
	default:
		return nil, fmt.Errorf("fault lroResult %q must be %q or %q", f.LROResult, resultFailed, resultCanceled)
	}
	if f.LROResult != "" && (f.Status != 0 || f.ResetConnection) {
		return nil, fmt.Errorf("fault lroResult cannot be combined with status or resetConnection")
	}
	if f.Status != 0 && f.ResetConnection {
		return nil, fmt.Errorf("fault status cannot be combined with resetConnection")
	}
	if f.Method != "" {
		switch strings.ToUpper(f.Method) {
		case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodPatch, http.MethodHead:
		default:
			return nil, fmt.Errorf("fault method %q is not one of GET, PUT, POST, DELETE, PATCH, HEAD", f.Method)
		}
	}
	return re, nil
}

func (s *faultSet) add(f Fault) (string, error) {
	re, err := f.validate()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := fmt.Sprintf("fault-%d", s.nextID)
	s.entries = append(s.entries, &faultEntry{id: id, f: f, re: re})
	s.n.Store(int32(len(s.entries)))
	return id, nil
}

func (s *faultSet) remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.entries {
		if e.id == id {
			s.entries = append(s.entries[:i:i], s.entries[i+1:]...)
			s.n.Store(int32(len(s.entries)))
			return true
		}
	}
	return false
}

func (s *faultSet) clear() {
	s.mu.Lock()
	s.entries = nil
	s.n.Store(0)
	s.mu.Unlock()
}

func (s *faultSet) list() []FaultStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]FaultStatus, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, FaultStatus{ID: e.id, Fault: e.f, Fired: e.fired})
	}
	return out
}

// match finds the first fault that applies to the request and fires it.
// isARM tells whether path is an ARM path (faults with an empty PathRegex
// only apply to ARM). isWrite tells whether the request is a write that
// starts an asynchronous operation candidate (LROResult faults only fire on
// PUT, PATCH and DELETE).
func (s *faultSet) match(method, path string, isARM bool, rnd func() float64) (Fault, bool) {
	if s.n.Load() == 0 {
		return Fault{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) == 0 {
		return Fault{}, false
	}
	for i, e := range s.entries {
		f := e.f
		if f.Method != "" && !strings.EqualFold(f.Method, method) {
			continue
		}
		if e.re == nil {
			if !isARM {
				continue
			}
		} else if !e.re.MatchString(path) {
			continue
		}
		if f.LROResult != "" && method != http.MethodPut && method != http.MethodPatch && method != http.MethodDelete && method != http.MethodPost {
			continue
		}
		if f.Probability > 0 && f.Probability < 1 && rnd() >= f.Probability {
			continue
		}
		e.fired++
		if f.Count > 0 && e.fired >= f.Count {
			s.entries = append(s.entries[:i:i], s.entries[i+1:]...)
			s.n.Store(int32(len(s.entries)))
		}
		return f, true
	}
	return Fault{}, false
}

// defaultFaultCode derives an ARM error code from an HTTP status.
func defaultFaultCode(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "TooManyRequests"
	case http.StatusConflict:
		return "Conflict"
	case http.StatusPreconditionFailed:
		return "PreconditionFailed"
	case http.StatusBadRequest:
		return "BadRequest"
	case http.StatusNotFound:
		return "NotFound"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailable"
	case http.StatusGatewayTimeout:
		return "GatewayTimeout"
	case http.StatusInternalServerError:
		return "InternalServerError"
	default:
		if status >= 500 {
			return "InternalServerError"
		}
		return strings.ReplaceAll(http.StatusText(status), " ", "")
	}
}
