package emulator

import (
	"context"
	crand "crypto/rand"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Emulator is an in-memory ARM + AAD emulator. It is an http.Handler.
// All methods are safe for concurrent use.
type Emulator struct {
	opts        Options
	clock       clock.Clock
	latency     atomic.Int64 // nanoseconds
	features    atomic.Pointer[[]string]
	clientCerts atomic.Pointer[[]*x509.Certificate]
	tenancy     tenancy
	ids         *idSource
	tokenKey    []byte
	principalID string
	tokCache    sync.Map // verified token -> tokenClaims
	tokCount    atomic.Int64
	configErr   error

	mu   sync.RWMutex // guards subs and ips
	subs map[string]*subscription
	// featureStates: subscription -> feature -> its registration
	// (features.go), both lower case; guarded by featMu (taken under mu
	// by writes that check a feature).
	featMu        sync.Mutex
	featureStates map[string]map[string]*featureState
	ips           *publicIPs
	v4, v6        netip.Prefix

	faults    faultSet
	log       requestLog
	throttler *throttler

	sgwPostStatus atomic.Int32 // SGWPostOK or SGWPostAccepted
	sgwPageSize   atomic.Int32

	dp *dataPlane // nil unless Options.DataPlane
}

// New returns an emulator with empty state. Invalid CIDRs in opts fall back
// to the defaults (Start reports them as errors).
func New(opts Options) *Emulator {
	opts = opts.withDefaults()
	e := &Emulator{opts: opts, clock: opts.Clock, ids: newIDSource()}
	e.SetFeatures(opts.Features...)
	e.SetClientCertificates(opts.ClientCertificates...)
	e.tenancy = newTenancy(opts)
	if err := opts.validate(); err != nil {
		e.configErr = err
		e.opts.PublicIPv4CIDR, e.opts.PublicIPv6CIDR = DefaultPublicIPv4CIDR, DefaultPublicIPv6CIDR
		if opts.DataPlane {
			e.opts.PublicIPv4CIDR = DefaultDataPlanePublicIPv4CIDR
		}
		if s := e.opts.ServiceGatewayPOSTStatus; s != SGWPostOK && s != SGWPostAccepted {
			e.opts.ServiceGatewayPOSTStatus = SGWPostOK
		}
		if n := e.opts.ServiceGatewayPageSize; n < 1 || n > 100000 {
			e.opts.ServiceGatewayPageSize = DefaultSGWPageSize
		}
		if (Options{PodLoopback: e.opts.PodLoopback}).withDefaults().validate() != nil {
			e.opts.PodLoopback = PrefixMap{} // maps nothing
		}
		if e.opts.validateThrottle() != nil {
			// Azure's limits: never more lenient than asked.
			e.opts.Throttle, e.opts.WriteBudget, e.opts.WriteBudgetWindow = Throttle{}, 0, 0
		}
	}
	e.throttler = newThrottler(e.opts)
	e.v4 = netip.MustParsePrefix(e.opts.PublicIPv4CIDR).Masked()
	e.v6 = netip.MustParsePrefix(e.opts.PublicIPv6CIDR).Masked()
	e.tokenKey = make([]byte, 32)
	_, _ = crand.Read(e.tokenKey)
	e.principalID = e.ids.uuid()
	e.latency.Store(int64(opts.Latency))
	e.sgwPostStatus.Store(int32(e.opts.ServiceGatewayPOSTStatus))
	e.sgwPageSize.Store(int32(e.opts.ServiceGatewayPageSize))
	e.resetState()
	if opts.DataPlane {
		if n := opts.DataPlaneNetwork; n != nil && e.configErr == nil {
			if err := n.Check(); err != nil {
				e.configErr, opts.DataPlaneNetwork = err, nil // nothing is served in it
			}
		}
		e.dp = newDataPlane(opts)
	}
	return e
}

// Close stops the data plane, if any: its listeners close and its flows
// end. The emulator keeps answering ARM calls.
func (e *Emulator) Close() error {
	if e.dp == nil {
		return nil
	}
	return e.dp.close()
}

func (e *Emulator) resetState() {
	e.mu.Lock()
	e.subs = map[string]*subscription{}
	e.ips = newPublicIPs(e.v4, e.v6)
	e.mu.Unlock()
}

// SetFeatures sets the subscription features registered (Options.Features).
func (e *Emulator) SetFeatures(names ...string) {
	f := slices.Clone(names)
	e.features.Store(&f)
}

// SetLatency sets the latency added to every ARM call (AAD calls are not
// delayed unless a fault says so).
func (e *Emulator) SetLatency(d time.Duration) {
	if d < 0 {
		d = 0
	}
	e.latency.Store(int64(d))
}

// AddFault installs a fault and returns its id.
func (e *Emulator) AddFault(f Fault) (string, error) { return e.faults.add(f) }

// RemoveFault removes an installed fault; unknown ids are ignored.
func (e *Emulator) RemoveFault(id string) { e.faults.remove(id) }

// ClearFaults removes all faults.
func (e *Emulator) ClearFaults() { e.faults.clear() }

// Faults lists the installed faults.
func (e *Emulator) Faults() []FaultStatus { return e.faults.list() }

// Requests returns the ARM and AAD requests served so far (not control API
// calls), oldest first.
func (e *Emulator) Requests() []RequestRecord { return e.log.snapshot(time.Time{}) }

// ResetRequests empties the request log.
func (e *Emulator) ResetRequests() { e.log.reset() }

// RefillLimits fills every throttling bucket and forgets every Retry-After
// given, as a long quiet spell would (benchmarks start their measurement
// from full buckets with it).
func (e *Emulator) RefillLimits() { e.throttler.reset() }

// Throttled is the number of ARM requests the limits answered 429 since
// the emulator started (injected faults are not counted; Reset and
// RefillLimits do not clear it). Test harnesses check it to keep a test
// that has not chosen its limits from being slowed by them.
func (e *Emulator) Throttled() int64 { return e.throttler.refused.Load() }

// Reset empties all state, faults and the request log. Issued tokens stay
// valid and the configured latency is kept.
func (e *Emulator) Reset() {
	e.resetState()
	e.faults.clear()
	e.log.reset()
	e.throttler.reset()
	e.syncDataPlane()
}

// statusWriter records the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
	// body is the request body a handler chose to log (service gateway
	// POSTs).
	body []byte
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP serves AAD, ARM and the /_emulator/ control API.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == "/_emulator" || strings.HasPrefix(path, "/_emulator/") {
		e.serveControl(w, r)
		return
	}
	if isIMDSPath(path) {
		e.serveIMDS(w, r)
		return
	}
	start := e.clock.Now()
	isARM := len(path) >= len("/subscriptions") && strings.EqualFold(path[:len("/subscriptions")], "/subscriptions") &&
		(len(path) == len("/subscriptions") || path[len("/subscriptions")] == '/')
	kind := "aad"
	if isARM || !isAADPath(path) {
		kind = "arm"
	}
	sw := &statusWriter{ResponseWriter: w}
	fault, faulted := e.faults.match(r.Method, path, kind == "arm", e.ids.float)
	defer func() {
		e.log.add(RequestRecord{
			Time: start, Method: r.Method, Path: path, Query: r.URL.RawQuery, Status: sw.status,
			Duration: e.clock.Since(start), Kind: kind, Faulted: faulted, Body: string(sw.body),
			UserAgent: r.UserAgent(),
		})
	}()

	var delay time.Duration
	if kind == "arm" {
		delay = time.Duration(e.latency.Load())
	}
	if faulted {
		delay += fault.Latency
	}
	if !e.wait(r.Context(), delay) {
		return // client went away
	}
	if faulted && fault.ResetConnection {
		e.resetConnection(sw)
		return
	}
	base := baseURL(r)
	if kind == "arm" {
		e.setARMHeaders(sw, r)
	}
	if faulted && fault.Status != 0 {
		e.writeFault(sw, r, fault)
		return
	}
	if kind == "aad" {
		tenant, rest, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		e.serveAAD(sw, r, tenant, rest, base)
		return
	}
	lro := ""
	if faulted {
		lro = fault.LROResult
	}
	e.serveARM(sw, r, base, lro)
	if e.dp != nil && isWriteMethod(r.Method) && sw.status/100 == 2 {
		e.syncDataPlane()
	}
}

// isAADPath reports whether path looks like /{tenant}/oauth2/... or
// /{tenant}/[v2.0/].well-known/openid-configuration.
func isAADPath(path string) bool {
	_, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok {
		return false
	}
	rest = strings.ToLower(rest)
	return strings.HasPrefix(rest, "oauth2/") || strings.HasPrefix(rest, "v2.0/.well-known/") ||
		strings.HasPrefix(rest, ".well-known/")
}

// wait blocks for d on the emulator clock; false means the request context
// ended first.
func (e *Emulator) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// resetConnection drops the connection without a response.
func (e *Emulator) resetConnection(w *statusWriter) {
	if hj, ok := w.ResponseWriter.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
				_ = tc.SetLinger(0)
			}
			_ = conn.Close()
			return
		}
	}
	// HTTP/2 (or a writer that cannot be hijacked): abort the stream.
	panic(http.ErrAbortHandler)
}

// baseURL is the scheme and host the client used to reach the emulator.
func baseURL(r *http.Request) string {
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host
}

// setARMHeaders sets the headers ARM puts on every response.
func (e *Emulator) setARMHeaders(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	reqID := e.ids.uuid()
	corr := r.Header.Get("x-ms-correlation-request-id")
	if corr == "" {
		corr = e.ids.uuid()
	}
	h["Cache-Control"] = []string{"no-cache"}
	h["Pragma"] = []string{"no-cache"}
	h["Expires"] = []string{"-1"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h["Strict-Transport-Security"] = []string{"max-age=31536000; includeSubDomains"}
	h["X-Ms-Request-Id"] = []string{reqID}
	h["X-Ms-Correlation-Request-Id"] = []string{corr}
	h["X-Ms-Routing-Request-Id"] = []string{"LOCAL:" + reqID}
	if cid := r.Header.Get("x-ms-client-request-id"); cid != "" && strings.EqualFold(r.Header.Get("x-ms-return-client-request-id"), "true") {
		h["X-Ms-Client-Request-Id"] = []string{cid}
	}
}

// writeJSON writes a JSON response with ARM's content type.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json; charset=utf-8"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// respBufs recycles buffers for encoding transient response bodies.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

// writeJSONTree encodes tree into a pooled buffer and writes it.
func writeJSONTree(w http.ResponseWriter, status int, tree any) {
	bp := respBufs.Get().(*[]byte)
	b, err := appendJSON((*bp)[:0], tree)
	if err != nil {
		b = mustMarshal(tree)
	}
	writeJSON(w, status, b)
	if cap(b) <= 1<<20 {
		*bp = b[:0]
		respBufs.Put(bp)
	}
}

// writeARMError writes an ARM error response.
func writeARMError(w http.ResponseWriter, ae *armError) {
	h := w.Header()
	for k, v := range ae.header {
		h.Set(k, v)
	}
	if ae.gateway {
		h.Set("X-Ms-Failure-Cause", "gateway")
	}
	writeJSON(w, ae.status, mustMarshal(ae.body()))
}

// writeFault answers with an injected failure.
func (e *Emulator) writeFault(w http.ResponseWriter, r *http.Request, f Fault) {
	code := f.Code
	if code == "" {
		code = defaultFaultCode(f.Status)
	}
	msg := f.Message
	if msg == "" {
		msg = "Injected failure: " + http.StatusText(f.Status) + "."
	}
	ae := &armError{status: f.Status, code: code, message: msg}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	if f.Status < 200 || f.Status == http.StatusNoContent || f.Status == http.StatusNotModified {
		w.WriteHeader(f.Status)
		return
	}
	writeARMError(w, ae)
}

func isWriteMethod(m string) bool {
	return m == http.MethodPut || m == http.MethodPatch || m == http.MethodPost || m == http.MethodDelete
}

// Dump returns the whole emulator state as JSON: subscriptions, resource
// groups, resources (as a GET would render them), operations and faults.
func (e *Emulator) Dump() ([]byte, error) {
	e.mu.RLock()
	now := e.clock.Now()
	subs := make([]any, 0, len(e.subs))
	for _, s := range e.subs {
		groups := make([]any, 0, len(s.groups))
		for _, g := range s.groups {
			if g.goneAt(now) {
				continue
			}
			res := make([]any, 0, len(g.resources))
			for _, en := range g.resources {
				if en.cur == nil || en.cur.phaseAt(now) == phaseGone {
					continue
				}
				res = append(res, json.RawMessage(e.renderVersion(en.kind, en.cur, en.cur.phaseAt(now)).bytes()))
			}
			groups = append(groups, map[string]any{
				"resourceGroup": json.RawMessage(e.renderGroup(s.id, g, now)),
				"resources":     res,
			})
		}
		ops := make([]any, 0, len(s.ops))
		for _, op := range s.ops {
			ops = append(ops, map[string]any{"id": op.id, "status": op.status(now), "start": op.start, "end": op.end})
		}
		m := map[string]any{
			"subscriptionId": s.id,
			"resourceGroups": groups,
			"operations":     ops,
		}
		if left := e.throttler.remaining(s.id, now); len(left) > 0 {
			m["throttleTokensLeft"] = left
		}
		subs = append(subs, m)
	}
	e.mu.RUnlock()
	return json.MarshalIndent(map[string]any{
		"time":          now,
		"subscriptions": subs,
		"faults":        e.faults.list(),
		"latency":       time.Duration(e.latency.Load()).String(),
	}, "", "  ")
}
