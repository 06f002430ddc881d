package servicegateway

import (
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// Retry timing of Service operations and address updates.
const (
	serviceBackoffBase   = time.Second
	serviceBackoffCap    = 30 * time.Second
	locationsBackoffBase = time.Second
	locationsBackoffCap  = 30 * time.Second
	// maxJitter is the largest fraction a retry delay is lengthened by.
	maxJitter = 0.2
	// MaxBurst is how many attempts in a row a Service operation gets
	// before it is parked for Cooldown.
	MaxBurst = 12
	// Cooldown is how long a Service operation that failed MaxBurst times
	// waits before it is tried again on its own.
	Cooldown = 5 * time.Minute
)

// jittered is the workqueue's per-item exponential backoff with up to
// maxJitter added, so that Services failing together do not retry in
// lock-step.
type jittered struct {
	workqueue.TypedRateLimiter[string]
}

//nolint:unparam // the queues' bases are separate settings, equal today
func newBackoff(base, limit time.Duration) workqueue.TypedRateLimiter[string] {
	return jittered{workqueue.NewTypedItemExponentialFailureRateLimiter[string](base, limit)}
}

func (j jittered) When(item string) time.Duration {
	return wait.Jitter(j.TypedRateLimiter.When(item), maxJitter)
}
