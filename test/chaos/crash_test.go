package chaos

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// TestCrashRecovery: the controller is killed (SIGKILL, kill -9) at random
// points of a churn and started again; after each crash point verify must
// come clean within the bound. A crash point is one round of CrashEvents
// churn events: the kill lands after a random event of the round, a
// random 0-800 ms after it (so mid-reconcile as often as not), the rest of
// the round's events happen while the controller is down, and the restart
// follows the round.
func TestCrashRecovery(t *testing.T) {
	p := suite.params
	ctx := context.Background()
	resetCluster(t)
	c := newChecker(t)
	w := newWorld(t, 4242, "cr")
	rnd := rand.New(rand.NewPCG(4242, 0xc4a5))
	r := startReplica(t, "a", false)
	if err := w.populate(ctx, 6, 8); err != nil {
		t.Fatal(err)
	}
	c.waitClean(t, 2*time.Minute)
	for point := 1; point <= p.Crashes; point++ {
		killAt := 1 + rnd.IntN(p.CrashEvents-1) // after this many events of the round
		delay := time.Duration(rnd.IntN(800)) * time.Millisecond
		var killed time.Time
		err := w.run(ctx, p.CrashEvents, func(i int) {
			if i == killAt {
				time.Sleep(delay) // where the kill lands in the churn, not synchronisation
				r.Kill()
				killed = time.Now()
			}
		})
		if err != nil {
			t.Fatalf("crash point %d: %v", point, err)
		}
		down := time.Since(killed)
		r.restart(t)
		converged := c.waitClean(t, p.Bound)
		figure(t, "crash", map[string]any{
			"point": point, "killAfterEvent": killAt, "killDelayMillis": delay.Milliseconds(), "secondsDown": down.Seconds(),
			"services": len(w.services), "nodes": len(w.nodes), "cleanSecondsAfterRestart": converged.Seconds(),
		})
	}
	verifyCLI(t)
}
