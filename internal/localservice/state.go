package localservice

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// poolState is what the Updater knows about one Local Service pool with
// work to do: whose it is, the retry state of the change being applied, and
// when it may next be attempted. The desired members are not kept here: an
// attempt reads them from the EndpointSlices, so it always applies the newest
// desired state.
type poolState struct {
	service string // namespace/name
	pool    string // the pool's name, as names.LocalServicePool gives it
	family  v1.IPFamily

	// retries is how many retriable failures the oldest change not yet
	// applied has consumed; fresh, the newest change's. They differ once a
	// change arrives while an earlier one is being retried: the newer change
	// has a budget of its own, and when the older one runs out it is
	// reported and dropped while the newer one lives on.
	retries, fresh int
	// notBefore, when in the future, parks the pool: the Retry-After of a
	// throttled attempt.
	notBefore time.Time
	// lastAttempt starts the pool's batching window: the next attempt is not
	// before lastAttempt + interval.
	lastAttempt time.Time
	// pending: a change arrived that no attempt has included yet.
	pending bool
}

// key is the queue key of a pool (ARM names are case-insensitive).
func key(pool string) string { return strings.ToLower(pool) }

// readyAt is when the pool may be attempted next.
func (s *poolState) readyAt(interval time.Duration) time.Time {
	t := s.notBefore
	if !s.lastAttempt.IsZero() {
		if w := s.lastAttempt.Add(interval); w.After(t) {
			t = w
		}
	}
	return t
}
