package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/emulator"
)

// The chart's lease (deploy/helm/azlb/values.yaml) and client-go's log line
// when a replica acquires it.
const (
	leaseNamespace = "kube-system"
	leaseName      = "azlb-controller-manager"
	acquiredLine   = "Successfully acquired lease"
	// takeoverBound is what docs/reliability.md promises: a standby leads
	// within 15 s of the leader's death or freeze (the chart's
	// leaseDuration 10 s + two standby polls of at most 2.2 s each).
	takeoverBound = 15 * time.Second
)

// term is one replica's leadership: from the Lease's acquireTime.
type term struct {
	replica  *replica
	acquired time.Time
}

// TestLeaderFailover: two replicas under the chart's leader election while
// a churn runs. Rounds alternate: the leader is killed (SIGKILL), or frozen
// (SIGSTOP) and resumed after the standby took over. Each time the standby
// must lead within 15 s, and the frozen leader must write nothing once
// resumed (the write fence) and exit. Finally the emulator's request log
// must show every replica's writes inside its own terms: a leader's last
// write before its successor acquired the lease.
func TestLeaderFailover(t *testing.T) {
	p := suite.params
	ctx := context.Background()
	resetCluster(t)
	deleteLease(t)
	c := newChecker(t)
	w := newWorld(t, 77, "lf")
	if err := w.populate(ctx, 6, 8); err != nil {
		t.Fatal(err)
	}
	a := startReplica(t, "a", true)
	b := startReplica(t, "b", true)
	first := waitAcquired(t, []*replica{a, b}, map[*replica]int{}, 60*time.Second)
	terms := []term{first}
	c.waitClean(t, 2*time.Minute)

	churn := startChurn(t, w)
	for round := 1; round <= p.Failovers; round++ {
		leader := terms[len(terms)-1].replica
		standby := a
		if leader == a {
			standby = b
		}
		waitWrote(t, leader, terms[len(terms)-1].acquired)
		before := map[*replica]int{standby: acquisitions(t, standby)}
		freeze := round%2 == 0
		var acted time.Time
		if freeze {
			if err := leader.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		} else {
			leader.Kill()
		}
		acted = time.Now()
		next := waitAcquired(t, []*replica{standby}, before, 30*time.Second)
		takeover := next.acquired.Sub(acted) // the Lease's acquireTime, not when this test noticed
		terms = append(terms, next)
		resumedWrites := -1
		if freeze {
			// The new leader works; the old one wakes up with its workers
			// mid-flight: the fence must refuse its writes until it exits.
			waitWrote(t, standby, next.acquired)
			if err := leader.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			select {
			case <-leader.Done():
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: the resumed leader %s did not exit after losing its lease", round, leader.name)
			}
			resumedWrites = len(writesBy(leader.userAgent, next.acquired))
		}
		leader.restart(t)
		figure(t, "leader-failover", map[string]any{
			"round": round, "mode": map[bool]string{true: "SIGSTOP", false: "SIGKILL"}[freeze], "from": leader.name, "to": standby.name,
			"takeoverSeconds": takeover.Seconds(), "writesOfResumedLeaderAfterTakeover": resumedWrites,
		})
		if takeover > takeoverBound {
			t.Errorf("round %d: %s took over %v after the leader's %s, want within %v", round, standby.name, takeover,
				map[bool]string{true: "freeze", false: "kill"}[freeze], takeoverBound)
		}
		if resumedWrites > 0 {
			t.Errorf("round %d: the resumed leader %s wrote %d times after %s took over", round, leader.name, resumedWrites, standby.name)
		}
	}
	events := churn.stop(t)
	c.waitClean(t, p.Bound)
	verifyCLI(t)
	periods := writePeriods(t, terms)
	figure(t, "leader-failover-log", map[string]any{"churnEvents": events, "terms": len(terms), "writePeriods": periods})
}

// writePeriods checks the request log: every ARM write comes from the
// replica leading at that moment (terms in order; the writes of term i
// fall before term i+1's acquireTime, none before term 0) and returns the
// number of writes per term.
func writePeriods(t *testing.T, terms []term) []int {
	t.Helper()
	counts := make([]int, len(terms))
	for _, rec := range writesOf(suite.env.Emulator().Requests()) {
		if rec.Time.Before(terms[0].acquired) {
			continue // the scenario's setup, before any replica ran
		}
		i := len(terms) - 1
		for i > 0 && rec.Time.Before(terms[i].acquired) {
			i--
		}
		if !strings.HasPrefix(rec.UserAgent, terms[i].replica.userAgent+" ") {
			t.Errorf("%s %s at %s by %q during %s's term (acquired %s): two replicas wrote in the same period",
				rec.Method, rec.Path, rec.Time.Format(time.StampMicro), rec.UserAgent, terms[i].replica.name, terms[i].acquired.Format(time.StampMicro))
			continue
		}
		counts[i]++
	}
	for i, n := range counts {
		if n == 0 {
			t.Errorf("term %d (%s) made no ARM write: the log proves nothing about it", i, terms[i].replica.name)
		}
	}
	return counts
}

// acquisitions counts the replica's "acquired lease" log lines.
func acquisitions(t *testing.T, r *replica) int {
	t.Helper()
	log, err := r.Log()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(log, acquiredLine)
}

// waitAcquired waits until one of the replicas logs an acquisition beyond
// the count in before and returns its term, with the Lease's acquireTime.
func waitAcquired(t *testing.T, rs []*replica, before map[*replica]int, timeout time.Duration) term {
	t.Helper()
	var got *replica
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for _, r := range rs {
			if acquisitions(t, r) > before[r] {
				got = r
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no replica acquired the lease within %v", timeout)
	}
	lease, err := suite.cs.CoordinationV1().Leases(leaseNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.AcquireTime == nil {
		t.Fatalf("lease %s/%s has no acquireTime", leaseNamespace, leaseName)
	}
	return term{replica: got, acquired: lease.Spec.AcquireTime.Time}
}

// waitWrote waits until the replica has made an ARM write since t0 (the
// churn keeps giving it work).
func waitWrote(t *testing.T, r *replica, t0 time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return len(writesBy(r.userAgent, t0)) > 0, nil
	})
	if err != nil {
		t.Fatalf("leader %s made no ARM write within a minute of its term", r.name)
	}
}

// writesBy lists the replica's ARM writes since t0.
func writesBy(ua string, t0 time.Time) []emulator.RequestRecord {
	return slices.DeleteFunc(writesOf(suite.env.Emulator().Requests()), func(r emulator.RequestRecord) bool {
		return !strings.HasPrefix(r.UserAgent, ua+" ") || r.Time.Before(t0)
	})
}

func deleteLease(t *testing.T) {
	t.Helper()
	err := suite.cs.CoordinationV1().Leases(leaseNamespace).Delete(context.Background(), leaseName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// churner runs the world's churn in the background until stopped.
type churner struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events int
	err    error
}

func startChurn(t *testing.T, w *world) *churner {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &churner{cancel: cancel}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for ctx.Err() == nil {
			if _, err := w.step(ctx); err != nil {
				if ctx.Err() == nil {
					c.err = fmt.Errorf("event %d: %w", c.events, err)
				}
				return
			}
			c.events++
			time.Sleep(time.Duration(50+w.rnd.IntN(100)) * time.Millisecond) // pacing of the churn, not synchronisation
		}
	}()
	t.Cleanup(func() { cancel(); c.wg.Wait() })
	return c
}

// stop ends the churn and returns how many events it made.
func (c *churner) stop(t *testing.T) int {
	t.Helper()
	c.cancel()
	c.wg.Wait()
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.events
}
