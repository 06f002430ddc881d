// Package health tells the controller manager's /healthz whether one of
// azlb's controllers is working: running, and not stuck in one piece of work.
package health

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// StuckAfter is how long one piece of work (a batch, a sync) may run before
// the controller reports itself unhealthy. Azure calls are bounded by the
// SDK's timeouts and retries well below it.
const StuckAfter = 5 * time.Minute

// Worker records a controller's liveness. The zero value with a Clock set
// is ready; it is safe for concurrent use.
type Worker struct {
	Clock clock.PassiveClock

	mu      sync.Mutex
	running bool
	busy    map[int]time.Time // work in progress -> start
	next    int
}

// Start marks the controller running (its informers synced, workers up).
func (w *Worker) Start() {
	w.mu.Lock()
	w.running = true
	w.mu.Unlock()
}

// Stop marks it stopped.
func (w *Worker) Stop() {
	w.mu.Lock()
	w.running = false
	w.mu.Unlock()
}

// Busy records the start of a piece of work and returns the func that ends
// it.
func (w *Worker) Busy() (done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy == nil {
		w.busy = map[int]time.Time{}
	}
	id := w.next
	w.next++
	w.busy[id] = w.now()
	return func() {
		w.mu.Lock()
		delete(w.busy, id)
		w.mu.Unlock()
	}
}

func (w *Worker) now() time.Time {
	if w.Clock == nil {
		return time.Now()
	}
	return w.Clock.Now()
}

// Check is nil while the controller runs and no piece of work has taken
// longer than StuckAfter. It is the controller manager's
// healthz.UnnamedHealthChecker: the framework mounts it on /healthz under
// the controller's name.
func (w *Worker) Check(*http.Request) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.running {
		return fmt.Errorf("not running (informers not synced yet, or stopped)")
	}
	now := w.now()
	for _, since := range w.busy {
		if d := now.Sub(since); d > StuckAfter {
			return fmt.Errorf("a piece of work has been running for %s (more than %s)", d.Truncate(time.Second), StuckAfter)
		}
	}
	return nil
}
