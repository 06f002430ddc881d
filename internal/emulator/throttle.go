package emulator

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ThrottleMode selects how the emulator limits ARM requests
// (docs/emulator.md, Throttling).
type ThrottleMode string

const (
	// ThrottleAzure limits requests as Azure does: Azure Resource
	// Manager's token buckets per subscription and principal for reads,
	// writes and deletes, the subscription's global buckets (all
	// principals together) and Microsoft.Network's own limits per
	// subscription. The default.
	ThrottleAzure ThrottleMode = "azure"
	// ThrottleWriteBudget is the emulator's former model: one write bucket
	// per subscription (Options.WriteBudget per Options.WriteBudgetWindow)
	// for PUT, PATCH, POST and DELETE on resources and groups; reads are
	// not limited.
	ThrottleWriteBudget ThrottleMode = "write-budget"
	// ThrottleOff never answers 429 (faults aside).
	ThrottleOff ThrottleMode = "off"
)

// Limit is a token bucket: it holds at most Bucket tokens, starts full and
// is refilled continuously at Refill tokens a second. Each request takes one
// token; a request that finds none is answered 429.
type Limit struct {
	// Bucket is the bucket size. 0 takes the default of the limit it
	// configures; negative means no limit.
	Bucket int
	// Refill is the tokens added a second (more than 0 when Bucket is
	// positive).
	Refill float64
}

// NoLimit is a Limit that never refuses a request.
var NoLimit = Limit{Bucket: -1}

// Azure's limits (docs/emulator.md, Throttling, with sources).
var (
	// DefaultReadLimit, DefaultWriteLimit and DefaultDeleteLimit are Azure
	// Resource Manager's buckets per subscription and principal (one
	// region): reads 250 refilled at 25 a second, writes and deletes 200
	// at 10 a second.
	DefaultReadLimit   = Limit{Bucket: 250, Refill: 25}
	DefaultWriteLimit  = Limit{Bucket: 200, Refill: 10}
	DefaultDeleteLimit = Limit{Bucket: 200, Refill: 10}
	// DefaultNetworkWriteLimit and DefaultNetworkReadLimit are
	// Microsoft.Network's own limits per subscription (one region): 1,000
	// writes and deletes together, and 10,000 reads, per 5 minutes, read as
	// buckets of that size refilled evenly over 5 minutes.
	DefaultNetworkWriteLimit = Limit{Bucket: 1000, Refill: 1000.0 / 300}
	DefaultNetworkReadLimit  = Limit{Bucket: 10000, Refill: 10000.0 / 300}
)

// DefaultGlobalFactor is how many times a principal's buckets the
// subscription's global buckets (all principals together) are.
const DefaultGlobalFactor = 15

// NoThrottle turns every limit off: Options{Throttle: NoThrottle} is for
// tests and benchmarks that need unlimited calls and say so.
var NoThrottle = Throttle{Mode: ThrottleOff}

// Throttle configures how the emulator limits ARM requests. The zero value
// is Azure's behaviour.
type Throttle struct {
	// Mode is ThrottleAzure (""), ThrottleWriteBudget or ThrottleOff. The
	// fields below apply to ThrottleAzure only.
	Mode ThrottleMode
	// Reads (GET, HEAD, including polls of long-running operations),
	// Writes (PUT, PATCH, POST) and Deletes (DELETE) are Azure Resource
	// Manager's buckets per subscription and principal. A zero Limit takes
	// DefaultReadLimit, DefaultWriteLimit or DefaultDeleteLimit.
	Reads, Writes, Deletes Limit
	// GlobalFactor sizes the subscription's global buckets, which every
	// principal's requests draw from too: this many times the principal's
	// bucket and refill. 0 means DefaultGlobalFactor; negative means none.
	GlobalFactor float64
	// NetworkWrites (PUT, PATCH, POST and DELETE) and NetworkReads limit
	// Microsoft.Network's requests per subscription, after Azure Resource
	// Manager's buckets. A zero Limit takes DefaultNetworkWriteLimit or
	// DefaultNetworkReadLimit.
	NetworkWrites, NetworkReads Limit
}

// opKind is the kind of request a bucket counts.
type opKind int

const (
	kindRead opKind = iota
	kindWrite
	kindDelete
)

func (k opKind) String() string {
	return [...]string{"read", "write", "delete"}[k]
}

// headerWord is the word of the x-ms-ratelimit-remaining-subscription-*
// headers for the kind.
func (k opKind) headerWord() string {
	return [...]string{"Reads", "Writes", "Deletes"}[k]
}

func kindOf(method string) opKind {
	switch method {
	case http.MethodGet, http.MethodHead:
		return kindRead
	case http.MethodDelete:
		return kindDelete
	}
	return kindWrite
}

// layer names which limit a bucket belongs to.
type layer int

const (
	layerPrincipal layer = iota // Azure Resource Manager, subscription and principal
	layerGlobal                 // Azure Resource Manager, subscription (all principals)
	layerNetwork                // Microsoft.Network, subscription
	layerBudget                 // ThrottleWriteBudget's single write bucket
)

type bucketKey struct {
	layer     layer
	sub       string // lower case
	principal string
	kind      opKind
}

// limitBucket is a token bucket that also remembers the Retry-After it gave:
// a request sent before that time is refused again, whatever the bucket
// holds ("If you send a request before the retry value has elapsed, your
// request isn't processed and a new retry value is returned").
type limitBucket struct {
	tokenBucket
	blockedUntil time.Time
}

// check refills the bucket and reports whether it holds a token for a
// request at now, or the whole seconds to wait (then the bucket stays
// blocked until that time).
func (b *limitBucket) check(now time.Time) (ok bool, retryAfter int) {
	b.refill(now)
	if now.Before(b.blockedUntil) {
		return false, max(1, int(math.Ceil(b.blockedUntil.Sub(now).Seconds())))
	}
	if b.tokens >= 1 {
		return true, 0
	}
	secs := b.wait()
	b.blockedUntil = now.Add(time.Duration(secs) * time.Second)
	return false, secs
}

// throttler holds the buckets of every subscription and principal.
type throttler struct {
	cfg     Throttle // resolved: no zero Limit, GlobalFactor > 0 or < 0
	budget  int
	window  time.Duration
	mu      sync.Mutex
	buckets map[bucketKey]*limitBucket
	// refused counts the requests answered 429 by the limits (never
	// reset: Throttled).
	refused atomic.Int64
}

func newThrottler(opts Options) *throttler {
	t := opts.Throttle
	def := func(l *Limit, d Limit) {
		if *l == (Limit{}) {
			*l = d
		}
	}
	def(&t.Reads, DefaultReadLimit)
	def(&t.Writes, DefaultWriteLimit)
	def(&t.Deletes, DefaultDeleteLimit)
	def(&t.NetworkWrites, DefaultNetworkWriteLimit)
	def(&t.NetworkReads, DefaultNetworkReadLimit)
	if t.GlobalFactor == 0 {
		t.GlobalFactor = DefaultGlobalFactor
	}
	if t.Mode == "" {
		t.Mode = ThrottleAzure
	}
	return &throttler{cfg: t, budget: opts.WriteBudget, window: opts.WriteBudgetWindow}
}

// limitFor is the Limit of a bucket, or ok=false when that bucket does not
// exist (no limit).
func (t *throttler) limitFor(k bucketKey) (Limit, bool) {
	var l Limit
	switch k.layer {
	case layerPrincipal, layerGlobal:
		l = [...]Limit{t.cfg.Reads, t.cfg.Writes, t.cfg.Deletes}[k.kind]
		if k.layer == layerGlobal {
			if t.cfg.GlobalFactor < 0 || l.Bucket < 0 {
				return l, false
			}
			l = Limit{Bucket: int(math.Round(float64(l.Bucket) * t.cfg.GlobalFactor)), Refill: l.Refill * t.cfg.GlobalFactor}
		}
	case layerNetwork:
		l = t.cfg.NetworkWrites
		if k.kind == kindRead {
			l = t.cfg.NetworkReads
		}
	case layerBudget:
		l = Limit{Bucket: t.budget, Refill: float64(t.budget) / t.window.Seconds()}
	}
	return l, l.Bucket > 0
}

// bucket returns the bucket of k, creating it full, or nil when k has no
// limit. Called with t.mu held.
func (t *throttler) bucket(k bucketKey, now time.Time) *limitBucket {
	if b := t.buckets[k]; b != nil {
		return b
	}
	l, ok := t.limitFor(k)
	if !ok {
		return nil
	}
	if t.buckets == nil {
		t.buckets = map[bucketKey]*limitBucket{}
	}
	c := float64(l.Bucket)
	b := &limitBucket{tokenBucket: tokenBucket{capacity: c, perSec: l.Refill, tokens: c, last: now}}
	t.buckets[k] = b
	return b
}

// verdict is what the throttler decided for one request.
type verdict struct {
	ok         bool
	retryAfter int   // seconds, when !ok
	by         layer // the limit that refused, when !ok
	// left is the whole tokens left in the principal's and the global
	// bucket after the request (-1: no such bucket).
	left, globalLeft int
}

// admit decides a request of kind k from principal on subscription sub;
// network says Microsoft.Network serves it. Tokens are taken only from
// the limits that admit it: Azure Resource Manager's buckets together, then
// Microsoft.Network's (a request Microsoft.Network refuses has used Azure
// Resource Manager's tokens).
func (t *throttler) admit(sub, principal string, k opKind, network bool, now time.Time) verdict {
	sub = strings.ToLower(sub)
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.bucket(bucketKey{layer: layerPrincipal, sub: sub, principal: principal, kind: k}, now)
	g := t.bucket(bucketKey{layer: layerGlobal, sub: sub, kind: k}, now)
	v := verdict{ok: true, left: -1, globalLeft: -1}
	for _, c := range []struct {
		b *limitBucket
		l layer
	}{{p, layerPrincipal}, {g, layerGlobal}} {
		if c.b == nil {
			continue
		}
		if ok, secs := c.b.check(now); !ok && (v.ok || secs > v.retryAfter) {
			v.ok, v.retryAfter, v.by = false, secs, c.l
		}
	}
	if v.ok {
		for _, b := range []*limitBucket{p, g} {
			if b != nil {
				b.tokens--
			}
		}
	}
	if p != nil {
		v.left = p.remaining(now)
	}
	if g != nil {
		v.globalLeft = g.remaining(now)
	}
	if !v.ok || !network {
		return v
	}
	nk := kindWrite
	if k == kindRead {
		nk = kindRead
	}
	if n := t.bucket(bucketKey{layer: layerNetwork, sub: sub, kind: nk}, now); n != nil {
		if ok, secs := n.check(now); !ok {
			v.ok, v.retryAfter, v.by = false, secs, layerNetwork
			return v
		}
		n.tokens--
	}
	return v
}

// admitBudget is ThrottleWriteBudget's decision for a write.
func (t *throttler) admitBudget(sub string, now time.Time) (ok bool, left, retryAfter int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(bucketKey{layer: layerBudget, sub: strings.ToLower(sub)}, now)
	ok, retryAfter = b.take(now)
	return ok, b.remaining(now), retryAfter
}

// remaining lists the whole tokens left in every bucket of subscription sub
// that requests have used, by name (Dump).
func (t *throttler) remaining(sub string, now time.Time) map[string]int {
	sub = strings.ToLower(sub)
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for k, b := range t.buckets {
		if k.sub != sub {
			continue
		}
		var name string
		switch k.layer {
		case layerPrincipal:
			name = "principal " + k.principal + " " + k.kind.String() + "s"
		case layerGlobal:
			name = "global " + k.kind.String() + "s"
		case layerNetwork:
			name = "Microsoft.Network " + map[opKind]string{kindRead: "reads", kindWrite: "writes and deletes"}[k.kind]
		case layerBudget:
			name = "write budget"
		}
		out[name] = b.remaining(now)
	}
	return out
}

func (t *throttler) reset() {
	t.mu.Lock()
	t.buckets = nil
	t.mu.Unlock()
}

// throttle applies the limits to an ARM request: it sets the
// x-ms-ratelimit-remaining-* headers, or answers 429 and returns false.
func (e *Emulator) throttle(c *reqCtx, principal string) bool {
	switch e.throttler.cfg.Mode {
	case ThrottleOff:
		return true
	case ThrottleWriteBudget:
		return e.throttleBudget(c)
	}
	r, rt := c.r, c.rt
	k := kindOf(r.Method)
	network := strings.EqualFold(rt.ns, "Microsoft.Network")
	v := e.throttler.admit(rt.sub, principal, k, network, e.clock.Now())
	h := c.w.Header()
	if v.left >= 0 {
		h["X-Ms-Ratelimit-Remaining-Subscription-"+k.headerWord()] = []string{strconv.Itoa(v.left)}
	}
	if v.globalLeft >= 0 {
		h["X-Ms-Ratelimit-Remaining-Subscription-Global-"+k.headerWord()] = []string{strconv.Itoa(v.globalLeft)}
	}
	if v.ok {
		return true
	}
	var ae *armError
	switch v.by {
	case layerPrincipal:
		ae = gatewayError(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
			"Number of '%s' requests for subscription '%s' actor '%s' exceeded. Please try again after '%d' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling for additional information.",
			k, rt.sub, principal, v.retryAfter)
	case layerGlobal:
		ae = gatewayError(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
			"Number of '%s' requests for subscription '%s' exceeded the subscription's global limit. Please try again after '%d' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling for additional information.",
			k, rt.sub, v.retryAfter)
	default:
		what, l := "write and delete", e.throttler.cfg.NetworkWrites
		if k == kindRead {
			what, l = "read", e.throttler.cfg.NetworkReads
		}
		ae = nrpError(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
			"Number of %s requests for subscription '%s' to Microsoft.Network exceeded the limit of %s. Please try again after '%d' seconds.",
			what, rt.sub, l, v.retryAfter)
	}
	ae.header = map[string]string{"Retry-After": strconv.Itoa(v.retryAfter)}
	e.throttler.refused.Add(1)
	writeARMError(c.w, ae)
	return false
}

// throttleBudget is ThrottleWriteBudget: one write bucket per
// subscription for writes on groups and resources, reads unlimited.
func (e *Emulator) throttleBudget(c *reqCtx) bool {
	r, rt := c.r, c.rt
	h := c.w.Header()
	budgeted := isWriteMethod(r.Method) && (rt.kind == routeGroup || rt.kind == routeResource || rt.kind == routeChild ||
		(rt.kind == routeChildList && r.Method == http.MethodPost))
	if !budgeted {
		if r.Method == http.MethodGet {
			h["X-Ms-Ratelimit-Remaining-Subscription-Reads"] = []string{"16499"}
			h["X-Ms-Ratelimit-Remaining-Subscription-Global-Reads"] = []string{"16499"}
		}
		return true
	}
	ok, left, retry := e.throttler.admitBudget(rt.sub, e.clock.Now())
	if !ok {
		ae := gatewayError(http.StatusTooManyRequests, "SubscriptionRequestsThrottled",
			"Number of 'write' requests for subscription '%s' actor '%s' exceeded. Please try again after '%d' seconds after additional tokens are available. Refer to https://aka.ms/arm-throttling for additional information.",
			rt.sub, e.principalID, retry)
		ae.header = map[string]string{
			"Retry-After": strconv.Itoa(retry),
			"X-Ms-Ratelimit-Remaining-Subscription-Writes":        "0",
			"X-Ms-Ratelimit-Remaining-Subscription-Global-Writes": "0",
		}
		e.throttler.refused.Add(1)
		writeARMError(c.w, ae)
		return false
	}
	h["X-Ms-Ratelimit-Remaining-Subscription-Writes"] = []string{strconv.Itoa(left)}
	h["X-Ms-Ratelimit-Remaining-Subscription-Global-Writes"] = []string{strconv.Itoa(left)}
	if r.Method == http.MethodDelete {
		h["X-Ms-Ratelimit-Remaining-Subscription-Deletes"] = []string{strconv.Itoa(left)}
		h["X-Ms-Ratelimit-Remaining-Subscription-Global-Deletes"] = []string{strconv.Itoa(left)}
	}
	return true
}

// String renders the limit as ParseLimit reads it: "none" or
// "BUCKET:COUNT/PERIOD" with the shortest of the periods s, m, 5m and h
// that makes COUNT whole ("200:10/s", "1000:1000/5m").
func (l Limit) String() string {
	if l.Bucket < 0 {
		return "none"
	}
	for _, p := range []struct {
		unit string
		secs float64
	}{{"s", 1}, {"m", 60}, {"5m", 300}, {"h", 3600}} {
		n := l.Refill * p.secs
		if r := math.Round(n); r >= 1 && math.Abs(n-r) <= 1e-9*r {
			return strconv.Itoa(l.Bucket) + ":" + strconv.FormatFloat(r, 'f', -1, 64) + "/" + p.unit
		}
	}
	return strconv.Itoa(l.Bucket) + ":" + strconv.FormatFloat(l.Refill, 'g', -1, 64) + "/s"
}

// ParseLimit reads a limit written "BUCKET:COUNT/PERIOD" (a bucket of
// BUCKET tokens refilled at COUNT tokens per PERIOD, a Go duration or a bare
// unit: "200:10/s", "1000:1000/5m") or "none".
func ParseLimit(s string) (Limit, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "none") {
		return NoLimit, nil
	}
	bucket, rate, ok := strings.Cut(s, ":")
	count, period, ok2 := strings.Cut(rate, "/")
	if !ok || !ok2 {
		return Limit{}, fmt.Errorf("limit %q: want BUCKET:COUNT/PERIOD (e.g. 200:10/s) or none", s)
	}
	b, err := strconv.Atoi(bucket)
	if err != nil || b < 1 {
		return Limit{}, fmt.Errorf("limit %q: bucket %q must be a whole number of at least 1", s, bucket)
	}
	n, err := strconv.ParseFloat(count, 64)
	if err != nil || !(n > 0) || math.IsInf(n, 0) {
		return Limit{}, fmt.Errorf("limit %q: refill count %q must be a number above 0", s, count)
	}
	if period != "" && (period[0] < '0' || period[0] > '9') {
		period = "1" + period
	}
	d, err := time.ParseDuration(period)
	if err != nil || d <= 0 {
		return Limit{}, fmt.Errorf("limit %q: period %q must be a positive duration such as s, 5m or 1h", s, period)
	}
	return Limit{Bucket: b, Refill: n / d.Seconds()}, nil
}

// validate checks a Throttle's settings.
func (t Throttle) validate() error {
	switch t.Mode {
	case "", ThrottleAzure, ThrottleWriteBudget, ThrottleOff:
	default:
		return fmt.Errorf("emulator: throttle mode %q must be %s, %s or %s", t.Mode, ThrottleAzure, ThrottleWriteBudget, ThrottleOff)
	}
	for _, f := range []struct {
		name string
		l    Limit
	}{{"Reads", t.Reads}, {"Writes", t.Writes}, {"Deletes", t.Deletes}, {"NetworkWrites", t.NetworkWrites}, {"NetworkReads", t.NetworkReads}} {
		if f.l.Bucket > 0 && (!(f.l.Refill > 0) || math.IsInf(f.l.Refill, 0)) {
			return fmt.Errorf("emulator: throttle %s: refill %v must be above 0", f.name, f.l.Refill)
		}
		if f.l.Bucket == 0 && f.l.Refill != 0 {
			return fmt.Errorf("emulator: throttle %s: a refill needs a bucket size", f.name)
		}
	}
	if math.IsNaN(t.GlobalFactor) || math.IsInf(t.GlobalFactor, 0) || (t.GlobalFactor > 0 && t.GlobalFactor < 1) {
		return fmt.Errorf("emulator: throttle GlobalFactor %v must be at least 1 (0: the default, negative: none)", t.GlobalFactor)
	}
	return nil
}
