package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// TestScaleDownDrain measures a node scale-down end to end (docs/admin-state.md,
// "Scale-down"): the real controller with the default azure.json, a real
// API server, and the emulator's data plane carrying 200 new connections per
// second to a Service on four loopback nodes, plus sessions (keep-alive
// connections sending a request every 100 ms) established on the leaving
// node before it leaves. The cluster autoscaler taints the node
// (ToBeDeletedByClusterAutoscaler), then the node goes in one of two orders:
//
//   - autoscaler-order: its VM is deleted 2 s after the taint and its Node
//     object 1 s later, as the autoscaler and the cloud node lifecycle
//     controller do it; the sessions end (close) 1.5 s after the taint,
//     while the node drains;
//   - node-first: its Node object is deleted 1 s after the taint while its
//     VM still serves (for 4 s after the taint); the sessions end 3 s after
//     the taint, after the node has left the pool.
//
// Wanted: no new connection fails (the taint takes the node Down before its
// VM goes) and no session is reset (Down keeps established flows, and the
// pool's drain period keeps them once the node has left the pool).
//
// Then a third node is tainted and stays: its LoadBalancerDrained condition
// must turn True no sooner than the drain period after the taint (what
// `kubectl wait --for=condition=LoadBalancerDrained` waits for), and False
// when the taint is removed.
func TestScaleDownDrain(t *testing.T) {
	// The subscription registered connection draining, which a pool's drain
	// period needs (docs/admin-state.md); the default deletion taints, and a
	// 30 s drain period.
	c := startDataPlaneClusterWith(t, "drain", 4, clusterOptions{features: []string{emulator.FeatureConnectionDraining},
		config: map[string]any{"loadBalancerBackendPoolDrainPeriodInSeconds": 30}})
	env, names := c.env, c.nodes
	frontend, backends := c.nodePortWeb(t)
	drain := logDrainPeriod(t, env)

	type order struct {
		name                    string
		vmStop, nodeDelete, end time.Duration // after the taint; end: when the sessions close
	}
	failed := false
	for i, o := range []order{
		{name: "autoscaler-order", vmStop: 2 * time.Second, nodeDelete: 3 * time.Second, end: 1500 * time.Millisecond},
		{name: "node-first", vmStop: 4 * time.Second, nodeDelete: time.Second, end: 3 * time.Second},
	} {
		node := names[i]
		ss := openSessions(t, frontend, node, 3)
		var timers []*time.Timer
		sc := testutil.CutoverScenario{Name: o.name, Taint: true, StopAfter: o.vmStop}
		rep := testutil.RunCutover(t, sc, testutil.Cutover{Frontend: frontend, Node: node,
			Taint: func(ctx context.Context) error {
				if err := taintForDeletion(ctx, node); err != nil {
					return err
				}
				timers = append(timers, time.AfterFunc(o.end, ss.finish), // the scenario's schedule
					time.AfterFunc(o.nodeDelete, func() { deleteNode(t, node) }))
				return nil
			},
			Stop: backends[node].Stop})
		resets := ss.wait()
		for _, tm := range timers {
			tm.Stop()
		}
		deleteNode(t, node) // when the scenario ended before its schedule
		t.Logf("%s: %d new connections from the taint on, %d failed; new connections reached the leaving node for %v; "+
			"%d of %d sessions established before the taint were reset", o.name, rep.Sent, rep.Failed, rep.Window.Round(time.Millisecond), resets, ss.n)
		t.Logf("timeline (100 ms per character; # %s, x failed, . other nodes, | taint, S VM stop):\n%s", node, rep.Timeline(node, 100*time.Millisecond))
		if rep.Failed != 0 || resets != 0 {
			failed = true
		}
	}
	if failed {
		t.Error("a scale-down failed new connections or reset established ones; want 0 and 0")
	}
	checkDrainedCondition(t, names[2], drain)
}

// checkDrainedCondition taints the node for deletion and waits, as
// `kubectl wait --for=condition=LoadBalancerDrained node/NAME
// --timeout=<drain period + 60s>` does, for its LoadBalancerDrained
// condition; it must not be True before the drain period has passed since
// the taint. Removing the taint must turn it False.
func checkDrainedCondition(t *testing.T, node string, drain time.Duration) {
	t.Helper()
	ctx := context.Background()
	tainted := time.Now()
	if err := taintForDeletion(ctx, node); err != nil {
		t.Fatal(err)
	}
	var cond v1.NodeCondition
	eventually(t, drain+60*time.Second, "LoadBalancerDrained True on "+node, func(ctx context.Context) (bool, error) {
		c, ok := drainedCondition(ctx, node)
		cond = c
		return ok && c.Status == v1.ConditionTrue, nil
	})
	seen := time.Since(tainted)
	t.Logf("LoadBalancerDrained True on %s seen %v after the taint (drain period %v); lastTransitionTime taint + %v; reason %s: %s",
		node, seen.Round(time.Millisecond), drain, cond.LastTransitionTime.Sub(tainted.Truncate(time.Second)), cond.Reason, cond.Message)
	if seen < drain || cond.LastTransitionTime.Time.Before(tainted.Truncate(time.Second).Add(drain)) {
		t.Errorf("LoadBalancerDrained True %v after the taint (lastTransitionTime %v), before the drain period %v had passed",
			seen, cond.LastTransitionTime.Time, drain)
	}
	if err := untaint(ctx, node, "ToBeDeletedByClusterAutoscaler"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "LoadBalancerDrained False on "+node, func(ctx context.Context) (bool, error) {
		c, ok := drainedCondition(ctx, node)
		return ok && c.Status == v1.ConditionFalse, nil
	})
}

// drainedCondition returns the node's LoadBalancerDrained condition.
func drainedCondition(ctx context.Context, node string) (v1.NodeCondition, bool) {
	n, err := suite.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return v1.NodeCondition{}, false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == adminstate.ConditionLoadBalancerDrained {
			return c, true
		}
	}
	return v1.NodeCondition{}, false
}

// untaint removes the node's taints with the key.
func untaint(ctx context.Context, node, key string) error {
	n, err := suite.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(tn v1.Taint) bool { return tn.Key == key })
	if _, err := suite.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("untaint %s: %w", node, err)
	}
	return nil
}

// taintForDeletion adds the cluster autoscaler's deletion taint, as it does
// (the value is the Unix time).
func taintForDeletion(ctx context.Context, node string) error {
	return addTaint(ctx, node, v1.Taint{Key: "ToBeDeletedByClusterAutoscaler",
		Value: strconv.FormatInt(time.Now().Unix(), 10), Effect: v1.TaintEffectNoSchedule})
}

func deleteNode(t *testing.T, node string) {
	err := suite.cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete node %s: %v", node, err)
	}
}

// logDrainPeriod logs and returns the cluster pool's drainPeriodInSeconds.
func logDrainPeriod(t *testing.T, env *devenv.Env) time.Duration {
	t.Helper()
	c, err := env.Clients(context.Background(), azure.ClientOptions{Source: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.BackendPool.Get(context.Background(), devenv.ResourceGroup, lbName, lbName)
	if err != nil {
		t.Fatal(err)
	}
	var d *int32
	if p.Properties != nil {
		d = p.Properties.DrainPeriodInSeconds
	}
	t.Logf("cluster pool %s/%s: drainPeriodInSeconds %v", lbName, lbName, ptr.Deref(d, 0))
	return time.Duration(ptr.Deref(d, 0)) * time.Second
}

// sessions are keep-alive connections that one node answers, each sending a
// request every 100 ms until finish; a request that fails before then is a
// reset established connection.
type sessions struct {
	n      int
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	mu     sync.Mutex
	resets int
}

func openSessions(t *testing.T, fe netip.AddrPort, node string, n int) *sessions {
	t.Helper()
	s := &sessions{n: n, done: make(chan struct{})}
	for range n {
		k := dialNode(t, fe, node)
		s.wg.Go(func() {
			defer k.Close()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-s.done:
					return
				case <-tick.C:
				}
				if _, err := k.Get(); err != nil {
					select {
					case <-s.done: // finished meanwhile: not a reset
					default:
						s.mu.Lock()
						s.resets++
						s.mu.Unlock()
					}
					return
				}
			}
		})
	}
	t.Cleanup(s.finish)
	return s
}

// finish ends the sessions: each closes its connection.
func (s *sessions) finish() { s.once.Do(func() { close(s.done) }) }

// wait finishes the sessions and returns how many were reset.
func (s *sessions) wait() int {
	s.finish()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resets
}

// dialNode opens a keep-alive connection that the node answers.
func dialNode(t *testing.T, fe netip.AddrPort, node string) *testutil.Conn {
	t.Helper()
	for range 200 {
		k, name, err := testutil.Dial(fe, 2*time.Second)
		if err == nil && name == node {
			return k
		}
		if k != nil {
			k.Close()
		}
	}
	t.Fatalf("no connection to %s reached %s in 200 tries", fe, node)
	return nil
}
