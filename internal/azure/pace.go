package azure

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// bucketLimit is a token bucket of Azure Resource Manager: size tokens,
// refilled at refill tokens a second.
type bucketLimit struct{ size, refill float64 }

// azureLimits are Azure Resource Manager's buckets per subscription and
// principal (docs/azure-client.md, Pacing), by requestKind. The pacer
// refills its estimate at these rates between answers; the size is only
// the starting estimate, which the first answer's header replaces.
var azureLimits = [numKinds]bucketLimit{
	kindRead:   {size: 250, refill: 25},
	kindWrite:  {size: 200, refill: 10},
	kindDelete: {size: 200, refill: 10},
}

// maxPaceWait is the longest a request waits in the pipeline for its
// token. A longer wait is returned as a *ThrottleError at once, for the
// caller to retry at that time.
const maxPaceWait = 30 * time.Second

// pacer estimates how many requests of one kind ARM would take now, from
// the x-ms-ratelimit-remaining-subscription-* headers of its answers, and
// holds a request back until its token is due instead of sending it into
// a 429. It paces only once ARM has reported a remaining count (an
// endpoint that reports none is not paced).
//
// The estimate: the last remaining count reported, less the requests
// sent after the one answered and still in flight (ARM may not have
// counted them yet; those sent before it, it most likely has) and those
// waiting here, refilled at Azure's rate since. A lower report always
// lowers it; a higher one raises it only when it answers a request sent
// after the one whose report set it last (an older answer arriving late
// does not know of the requests after it).
type pacer struct {
	mu       sync.Mutex
	refill   float64 // tokens a second
	capacity float64
	tokens   float64
	last     time.Time
	known    bool
	seq      uint64 // requests sent so far
	applied  uint64 // the request whose report set tokens last
	inflight int
	waiting  int
	// sent are the sequence numbers of the requests in flight.
	sent map[uint64]struct{}
}

// ticket is one request's passage through the pacer.
type ticket struct {
	seq    uint64
	waited time.Duration
}

func (p *pacer) init(l bucketLimit) {
	p.refill, p.capacity, p.tokens = l.refill, l.size, l.size
}

// refillTo adds the tokens ARM added since the last update. Called with
// p.mu held.
func (p *pacer) refillTo(now time.Time) {
	if p.last.IsZero() {
		p.last = now
		return
	}
	if now.After(p.last) {
		p.tokens = math.Min(p.capacity, p.tokens+now.Sub(p.last).Seconds()*p.refill)
		p.last = now
	}
}

// wait returns when the request may be sent: at once while the estimate
// holds a token, else when the token is due. A wait longer than
// maxPaceWait, or past ctx's deadline, is not waited: the request is not
// sent and a *ThrottleError names the time.
func (p *pacer) wait(ctx context.Context, clk clock.Clock) (ticket, error) {
	p.mu.Lock()
	now := clk.Now()
	p.refillTo(now)
	if !p.known || p.tokens >= 1 {
		p.tokens--
		t := p.send()
		p.mu.Unlock()
		return t, nil
	}
	d := time.Duration(math.Ceil((1 - p.tokens) / p.refill * float64(time.Second)))
	if dl, ok := ctx.Deadline(); d > maxPaceWait || (ok && dl.Before(now.Add(d))) {
		p.mu.Unlock()
		return ticket{}, &ThrottleError{RetryAfter: now.Add(d)}
	}
	p.tokens--
	p.waiting++
	p.mu.Unlock()

	timer := clk.NewTimer(d)
	defer timer.Stop()
	var err error
	select {
	case <-timer.C():
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting--
	if err != nil {
		p.tokens++
		return ticket{}, err
	}
	t := p.send()
	t.waited = d
	return t, nil
}

// send counts a request going out. Called with p.mu held.
func (p *pacer) send() ticket {
	p.seq++
	p.inflight++
	if p.sent == nil {
		p.sent = map[uint64]struct{}{}
	}
	p.sent[p.seq] = struct{}{}
	return ticket{seq: p.seq}
}

// sentAfter counts the requests in flight that were sent after seq.
// Called with p.mu held.
func (p *pacer) sentAfter(seq uint64) int {
	n := 0
	for s := range p.sent {
		if s > seq {
			n++
		}
	}
	return n
}

// done records the end of a request sent with t: resp is its answer (nil
// when none came).
func (p *pacer) done(t ticket, resp *http.Response, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight--
	delete(p.sent, t.seq)
	if resp == nil {
		return
	}
	left, ok := reportedRemaining(resp)
	if !ok {
		return
	}
	p.known = true
	p.refillTo(now)
	if c := float64(left) + 1; c > p.capacity {
		p.capacity = c // an ARM with larger buckets
	}
	avail := float64(left - p.sentAfter(t.seq) - p.waiting)
	if avail < p.tokens || t.seq > p.applied {
		p.tokens = avail
		p.applied = max(p.applied, t.seq)
	}
}

// reportedRemaining is the smaller of the remaining counts an answer
// reports for its kind of request (the principal's and the subscription's
// global bucket), or ok=false when it reports none.
func reportedRemaining(resp *http.Response) (int, bool) {
	if resp.Request == nil {
		return 0, false
	}
	k := kindOf(resp.Request.Method)
	left, ok := 0, false
	for _, h := range []string{k.remainingHeader(), k.globalRemainingHeader()} {
		v := strings.TrimSpace(resp.Header.Get(h))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			continue
		}
		if !ok || n < left {
			left, ok = n, true
		}
	}
	return left, ok
}
