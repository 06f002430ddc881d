package adminstate_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/emulator"
)

// Integration tests: the real provider and ARM clients against the
// in-process emulator, a fake clientset and real informers. Two public load
// balancers (their internal twins do not exist), each with an IPv4 and an
// IPv6 pool holding every node: four pools per node.

const waitFor = 20 * time.Second

var (
	poll     = adminstate.Poll
	twoLBs   = []string{"kubernetes", "lb-2"}
	noneSeed = func(emuNode) adminstate.State { return "" }
)

func nodeObjects(nodes []emuNode, taints map[string][]v1.Taint) []runtime.Object {
	var out []runtime.Object
	for _, n := range nodes {
		out = append(out, n.node(taints[n.name]...))
	}
	return out
}

// started waits until the controller verified every node at start.
func started(t *testing.T, env *emuEnv) {
	t.Helper()
	poll(t, waitFor, "startup verification (one GET per pool)", func() bool {
		return env.getsOfPools() >= 2*len(env.lbs)
	})
}

func TestEmulatorTaintFlows(t *testing.T) {
	tests := []struct {
		name  string
		taint v1.Taint
	}{
		{"out-of-service taint added", taintOOS},
		{"shutdown taint added", taintShutdown},
		{"spot-eviction taint added by hand", taintSpot},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newEmuEnv(t, emulator.Options{}, twoLBs...)
			nodes := emuNodes(3)
			env.seedLBs(nodes, noneSeed)
			c := env.runController(t, nodeObjects(nodes, nil)...)
			started(t, env)
			if w := env.totalPoolWrites(); w != 0 {
				t.Fatalf("startup wrote %d pools", w)
			}
			n := nodes[0]
			c.setTaints(t, n.name, tc.taint)
			poll(t, waitFor, "Down on every pool", func() bool { return env.allAre(n, down) })
			poll(t, waitFor, "Down event", func() bool { return len(c.events.Find(n.name, adminstate.EventReasonAdminStateDown)) == 1 })
			for pool, w := range env.poolWrites() {
				if w != 1 {
					t.Errorf("%s: %d PUTs, want 1", pool, w)
				}
			}
			if !env.allAre(nodes[1], none) {
				t.Error("another node's entries changed")
			}
			if _, ok := c.c.OutOfService()[n.name]; !ok {
				t.Error("node not in the out-of-service set")
			}

			// All supported taints removed (a cordon stays): None again.
			c.setTaints(t, n.name, taintCordon)
			poll(t, waitFor, "None on every pool", func() bool { return env.allAre(n, none) })
			poll(t, waitFor, "None event", func() bool { return len(c.events.Find(n.name, adminstate.EventReasonAdminStateNone)) == 1 })
			if got := env.totalPoolWrites(); got != 2*2*len(env.lbs) {
				t.Errorf("pool writes = %d, want %d (one per pool per transition)", got, 4*len(env.lbs))
			}
			if n := c.events.Count(adminstate.EventReasonAdminStateUpdateFailed); n != 0 {
				t.Errorf("%d failure events", n)
			}
		})
	}
}

func TestEmulatorPreemptScheduledFlow(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, twoLBs...)
	nodes := emuNodes(3)
	env.seedLBs(nodes, noneSeed)
	c := env.runController(t, nodeObjects(nodes, nil)...)
	started(t, env)
	n := nodes[0]
	ev := preemptEvent("preempt-1", n.name, "uid-"+n.name, time.Now())
	if _, err := c.kube.CoreV1().Events("default").Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, waitFor, "spot-eviction taint", func() bool { return c.hasTaint(t, n.name, backendpool.TaintDraining) })
	poll(t, waitFor, "Down on every pool", func() bool { return env.allAre(n, down) })
	poll(t, waitFor, "Down event", func() bool { return len(c.events.Find(n.name, adminstate.EventReasonAdminStateDown)) == 1 })

	// Duplicate events (a second object, and a repeat of the first) are
	// ignored while the taint exists.
	ev2 := preemptEvent("preempt-2", n.name, "uid-"+n.name, time.Now())
	if _, err := c.kube.CoreV1().Events("default").Create(context.Background(), ev2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev.Count, ev.LastTimestamp = 2, metav1.NewTime(time.Now().Add(time.Second))
	if _, err := c.kube.CoreV1().Events("default").Update(context.Background(), ev, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Barrier on the spot queue: a fresh event for another node.
	b := nodes[2]
	if _, err := c.kube.CoreV1().Events("default").Create(context.Background(), preemptEvent("preempt-b", b.name, "", time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, waitFor, "barrier Down", func() bool { return len(c.events.Find(b.name, adminstate.EventReasonAdminStateDown)) == 1 })
	if got := c.nodeWrites(); got != 2 {
		t.Errorf("node updates = %d, want 2 (one per node)", got)
	}
	for pool, w := range env.poolWrites() {
		if w != 2 {
			t.Errorf("%s: %d PUTs, want 2 (the node and the barrier)", pool, w)
		}
	}

	// The operator removes the taint: None.
	c.setTaints(t, n.name)
	poll(t, waitFor, "None after the taint is removed", func() bool { return env.allAre(n, none) })
}

func TestEmulatorReplacementNodeWithTheSameName(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, twoLBs...)
	nodes := emuNodes(2)
	env.seedLBs(nodes, noneSeed)
	c := env.runController(t, nodeObjects(nodes, nil)...)
	started(t, env)
	n := nodes[0]
	c.setTaints(t, n.name, taintSpot)
	poll(t, waitFor, "Down", func() bool { return env.allAre(n, down) })

	// Evicted and recreated with the same name and addresses; the pools
	// still hold the old entries until the Service reconcile rewrites them.
	ctx := context.Background()
	if err := c.kube.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repl := n.node()
	repl.UID = "uid-replacement"
	if _, err := c.kube.CoreV1().Nodes().Create(ctx, repl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, waitFor, "replacement back to None", func() bool { return env.allAre(n, none) })
	if _, ok := c.c.OutOfService()[n.name]; ok {
		t.Error("replacement inherited the out-of-service state")
	}
}

func TestEmulatorRestartWithSpotTaintMakesNoWrite(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, twoLBs...)
	nodes := emuNodes(3)
	tainted := nodes[1]
	env.seedLBs(nodes, func(n emuNode) adminstate.State {
		if n == tainted {
			return down
		}
		return ""
	})
	env.emu.ResetRequests()
	// The PreemptScheduled event that caused the taint is still listed.
	objs := append(nodeObjects(nodes, map[string][]v1.Taint{tainted.name: {taintSpot}}),
		preemptEvent("old-preempt", tainted.name, "uid-"+tainted.name, time.Now().Add(-10*time.Second)))
	c := env.runController(t, objs...)
	poll(t, waitFor, "Down reported after restart", func() bool {
		return len(c.events.Find(tainted.name, adminstate.EventReasonAdminStateDown)) == 1
	})
	if w := env.writes(); w != 0 {
		t.Errorf("restart made %d ARM writes, want 0", w)
	}
	if got := c.nodeWrites(); got != 0 {
		t.Errorf("restart updated nodes %d times, want 0", got)
	}
	if !env.allAre(tainted, down) || !env.allAre(nodes[0], none) {
		t.Error("states changed across the restart")
	}
}

func TestEmulatorFaultsDuringUpdate(t *testing.T) {
	tests := []struct {
		name        string
		fault       emulator.Fault
		wantWarning bool
	}{
		{"412 retried within the apply", emulator.Fault{Status: http.StatusPreconditionFailed, Count: 1}, false},
		{"409 retried within the apply", emulator.Fault{Status: http.StatusConflict, Code: "AnotherOperationInProgress", Count: 1}, false},
		{"two 412s retried within the apply", emulator.Fault{Status: http.StatusPreconditionFailed, Count: 2}, false},
		{"three 412s fail the apply, the queue retries", emulator.Fault{Status: http.StatusPreconditionFailed, Count: 3}, true},
		{"429 waits for Retry-After", emulator.Fault{Status: http.StatusTooManyRequests, Code: "SubscriptionRequestsThrottled", RetryAfter: "1", Count: 1}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newEmuEnv(t, emulator.Options{}, twoLBs...)
			nodes := emuNodes(2)
			env.seedLBs(nodes, noneSeed)
			c := env.runController(t, nodeObjects(nodes, nil)...)
			started(t, env)
			f := tc.fault
			f.Method = http.MethodPut
			f.PathRegex = `(?i)/loadBalancers/kubernetes/backendAddressPools/kubernetes$`
			if _, err := env.emu.AddFault(f); err != nil {
				t.Fatal(err)
			}
			n := nodes[0]
			c.setTaints(t, n.name, taintOOS)
			poll(t, waitFor, "Down despite the fault", func() bool {
				return len(c.events.Find(n.name, adminstate.EventReasonAdminStateDown)) == 1
			})
			if !env.allAre(n, down) {
				t.Fatal("not Down everywhere")
			}
			warnings := c.events.Messages(n.name, adminstate.EventReasonAdminStateUpdateFailed)
			if tc.wantWarning != (len(warnings) > 0) {
				t.Fatalf("warnings %q, want some: %v", warnings, tc.wantWarning)
			}
			if tc.wantWarning && !strings.Contains(warnings[0], "kubernetes/kubernetes") {
				t.Errorf("warning %q does not name the pool", warnings[0])
			}
			if tc.fault.Status == http.StatusTooManyRequests && len(warnings) != 1 {
				t.Errorf("%d warnings during a 1s throttle, want 1 (retry waits for Retry-After)", len(warnings))
			}
			for _, fs := range env.emu.Faults() {
				t.Errorf("fault not consumed: %+v", fs)
			}
		})
	}
}

// TestEmulatorAsynchronousWrites: when ARM answers pool writes
// asynchronously, a load balancer is busy until the operation ends. The two
// pools of one load balancer are written from the cache one after another,
// each with If-Match on the etag the previous write returned, so the second
// waits for the first operation to end and none is refused with 409
// AnotherOperationInProgress; the node goes Down on every pool without a
// Warning. (The retry of a pool refused as busy or changed underneath: lbstore's
// conflict tests.)
func TestEmulatorAsynchronousWrites(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{OperationDuration: 300 * time.Millisecond}, twoLBs...)
	nodes := emuNodes(2)
	env.seedLBs(nodes, noneSeed)
	c := env.runController(t, nodeObjects(nodes, nil)...)
	started(t, env)
	env.emu.ResetRequests()
	n := nodes[0]
	c.setTaints(t, n.name, taintOOS)
	poll(t, waitFor, "Down event", func() bool {
		return len(c.events.Find(n.name, adminstate.EventReasonAdminStateDown)) == 1
	})
	if !env.allAre(n, down) {
		t.Fatal("not Down on every pool")
	}
	if w := c.events.Messages(n.name, adminstate.EventReasonAdminStateUpdateFailed); len(w) > 0 {
		t.Errorf("warnings %q, want none", w)
	}
	busy := 0
	for _, r := range env.emu.Requests() {
		if r.Method == http.MethodPut && r.Status == http.StatusConflict {
			busy++
		}
	}
	if busy != 0 {
		t.Errorf("%d PUTs refused as busy, want none (the pools of a load balancer are written one after another)", busy)
	}
}

func TestEmulatorNoTaintNoWrites(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, twoLBs...)
	nodes := emuNodes(4)
	env.seedLBs(nodes, noneSeed)
	env.emu.ResetRequests()
	c := env.runController(t, nodeObjects(nodes, nil)...)
	started(t, env)
	// Cordon, label and condition churn: none is a trigger.
	c.setTaints(t, nodes[0].name, taintCordon)
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), nodes[1].name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels = map[string]string{"x": "y"}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
	if _, err := c.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Barrier: the queue is worked in order, so once a node tainted after
	// the churn is Down, the churn has been seen. The only writes allowed
	// are that node's: one PUT per pool holding it.
	c.setTaints(t, nodes[3].name, taintOOS)
	poll(t, waitFor, "barrier node Down", func() bool { return env.allAre(nodes[3], down) })
	perPool := env.poolWrites()
	for pool, n := range perPool {
		if n != 1 {
			t.Errorf("pool %s written %d times, want once (for the barrier node only)", pool, n)
		}
	}
	for _, nd := range nodes[:3] {
		if !env.allAre(nd, none) {
			t.Errorf("%s not None", nd.name)
		}
	}
	// The controller records the node after its write returns, which may be
	// after the pool already shows Down.
	poll(t, waitFor, "only the barrier node out of service", func() bool {
		oos := c.c.OutOfService()
		return len(oos) == 1 && len(oos[nodes[3].name]) == 1
	})
}

func TestEmulatorMetricsAndLock(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, twoLBs...)
	nodes := emuNodes(2)
	env.seedLBs(nodes, noneSeed)
	before := adminstate.LockWaits(t, adminstate.LockCaller)
	c := env.runController(t, nodeObjects(nodes, nil)...)
	started(t, env)
	c.setTaints(t, nodes[0].name, taintOOS)
	poll(t, waitFor, "Down", func() bool { return len(c.events.Find(nodes[0].name, adminstate.EventReasonAdminStateDown)) == 1 })
	if got := adminstate.LockWaits(t, adminstate.LockCaller) - before; got < 2 {
		t.Errorf("lock-wait observations for %s: %d, want >= 2", adminstate.LockCaller, got)
	}
	if obs, fails := adminstate.OpMetric(t, c.source); obs < 2 || fails != 0 {
		t.Errorf("operation metric: %d observations, %v failures", obs, fails)
	}
}
