package emulator

import (
	"math"
	"sync"
	"time"
)

// tokenBucket is a write budget: capacity tokens, refilled continuously at
// capacity per window. It is guarded by the emulator's state lock.
type tokenBucket struct {
	capacity float64
	perSec   float64
	tokens   float64
	last     time.Time
}

func newTokenBucket(capacity int, window time.Duration, now time.Time) tokenBucket {
	c := float64(capacity)
	return tokenBucket{capacity: c, perSec: c / window.Seconds(), tokens: c, last: now}
}

func (b *tokenBucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = math.Min(b.capacity, b.tokens+now.Sub(b.last).Seconds()*b.perSec)
		b.last = now
	}
}

// take consumes one token. When none is left it reports the whole seconds
// until one is available (at least 1).
func (b *tokenBucket) take(now time.Time) (ok bool, retryAfter int) {
	b.refill(now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := (1 - b.tokens) / b.perSec
	secs := int(math.Ceil(wait))
	if secs < 1 {
		secs = 1
	}
	return false, secs
}

// remaining reports the whole tokens left at now without consuming any.
func (b *tokenBucket) remaining(now time.Time) int {
	t := b.tokens
	if now.After(b.last) {
		t = math.Min(b.capacity, t+now.Sub(b.last).Seconds()*b.perSec)
	}
	return int(math.Floor(t))
}

// budgets holds one write bucket per subscription.
type budgets struct {
	mu      sync.Mutex
	buckets map[string]*tokenBucket
}

// take consumes a write token of subscription sub. It returns the tokens
// left, or ok=false with the seconds to wait.
func (b *budgets) take(sub string, capacity int, window time.Duration, now time.Time) (ok bool, left, retryAfter int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buckets == nil {
		b.buckets = map[string]*tokenBucket{}
	}
	tb := b.buckets[sub]
	if tb == nil {
		nb := newTokenBucket(capacity, window, now)
		tb = &nb
		b.buckets[sub] = tb
	}
	ok, retryAfter = tb.take(now)
	return ok, tb.remaining(now), retryAfter
}

func (b *budgets) remaining(sub string, now time.Time) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	tb := b.buckets[sub]
	if tb == nil {
		return 0, false
	}
	return tb.remaining(now), true
}

func (b *budgets) reset() {
	b.mu.Lock()
	b.buckets = nil
	b.mu.Unlock()
}
