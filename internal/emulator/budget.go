package emulator

import (
	"math"
	"time"
)

// tokenBucket holds capacity tokens, refilled continuously at perSec tokens
// a second. It is guarded by its owner's lock.
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
	return false, b.wait()
}

// wait is the whole seconds until the bucket holds a token (at least 1);
// call it after refill.
func (b *tokenBucket) wait() int {
	secs := int(math.Ceil((1 - b.tokens) / b.perSec))
	if secs < 1 {
		secs = 1
	}
	return secs
}

// remaining reports the whole tokens left at now without consuming any.
func (b *tokenBucket) remaining(now time.Time) int {
	t := b.tokens
	if now.After(b.last) {
		t = math.Min(b.capacity, t+now.Sub(b.last).Seconds()*b.perSec)
	}
	return int(math.Floor(t))
}
