package adminstate

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
)

// testDrain is the drain period of the condition tests.
const testDrain = 30 * time.Second

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newDrainedEnv is a controller that writes the LoadBalancerDrained
// condition, with a 30 s drain period, over a fake clock at t0. Its worker
// is not started: the tests run batches with step.
func newDrainedEnv(t *testing.T, f *fakeARM, objs ...runtime.Object) (*ctrlEnv, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	policy := testPolicy
	policy.DrainPeriodInSeconds = int32(testDrain / time.Second)
	e := newOptsCtrlEnv(t, f, clk, policy, true, objs...)
	return e, clk
}

// step waits until n nodes are pending, then runs one batch.
func (e *ctrlEnv) step(t *testing.T, n int) {
	t.Helper()
	poll(t, waitFor, "nodes pending", func() bool { return e.c.queue.Len() == n })
	if !e.c.processNextWorkItem(e.ctx) {
		t.Fatal("queue shut down")
	}
}

// statusPatches counts the patches of nodes/status.
func (e *ctrlEnv) statusPatches() int {
	n := 0
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// drained returns the node's LoadBalancerDrained condition (nil: none).
func (e *ctrlEnv) drained(name string) *v1.NodeCondition {
	for _, c := range e.getNode(name).Status.Conditions {
		if c.Type == ConditionLoadBalancerDrained {
			return &c
		}
	}
	return nil
}

// The condition turns True only once the drain period has passed since
// Down took effect, with that time; applying again writes nothing; None
// turns it False; nodes that were never out of service never get it.
func TestDrainedConditionAfterDrainPeriod(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e, clk := newDrainedEnv(t, f, clusterNodes()...)
	e.step(t, 3) // startup verification
	e.setTaints("n1", taintOOS)
	e.step(t, 1)
	if !n1Is(f, down) {
		t.Fatal("n1 not Down")
	}
	if c := e.drained("n1"); c != nil || e.statusPatches() != 0 {
		t.Fatalf("condition %+v (%d patches) before the drain period passed", c, e.statusPatches())
	}

	clk.Step(testDrain - time.Second)
	if e.c.queue.Len() != 0 {
		t.Fatal("n1 requeued before its drain period passed")
	}
	clk.Step(time.Second)
	e.step(t, 1)
	c := e.drained("n1")
	if c == nil || c.Status != v1.ConditionTrue || c.Reason != DrainedReasonAdminStateDown {
		t.Fatalf("after the drain period: condition %+v, want True/%s", c, DrainedReasonAdminStateDown)
	}
	if want := t0.Add(testDrain); !c.LastTransitionTime.Time.Equal(want) {
		t.Errorf("lastTransitionTime %v, want Down time + drain period %v", c.LastTransitionTime.Time, want)
	}
	for _, part := range []string{"7 backend pool(s)", "lb-a/kubernetes", "lb-b/default-web", "node.kubernetes.io/out-of-service", "30s"} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("message %q lacks %q", c.Message, part)
		}
	}

	// Unchanged: no write.
	e.c.queue.Add("n1")
	e.step(t, 1)
	if n := e.statusPatches(); n != 1 {
		t.Fatalf("%d status patches after a repeat, want 1", n)
	}

	// Back in service: False.
	clk.Step(time.Minute)
	e.setTaints("n1")
	e.step(t, 1)
	c = e.drained("n1")
	if c == nil || c.Status != v1.ConditionFalse || c.Reason != DrainedReasonInService || !c.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Fatalf("after the taint went: condition %+v, want False/%s at %v", c, DrainedReasonInService, clk.Now())
	}
	e.c.queue.Add("n1")
	e.step(t, 1)
	if n := e.statusPatches(); n != 2 {
		t.Fatalf("%d status patches, want 2 (True, False)", n)
	}
	for _, n := range []string{"n2", "n3"} {
		if c := e.drained(n); c != nil {
			t.Errorf("%s, never out of service, has condition %+v", n, c)
		}
	}

	// Down again: a copy of the node that does not show the False write yet
	// (a lagging informer) must not pass for drained.
	stale := e.getNode("n1")
	stale.Status.Conditions = []v1.NodeCondition{{Type: ConditionLoadBalancerDrained, Status: v1.ConditionTrue}}
	e.setTaints("n1", taintOOS)
	e.step(t, 1)
	clk.Step(testDrain)
	e.c.syncDrained(e.ctx, stale, StateDown)
	if c := e.drained("n1"); c == nil || c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Fatalf("Down again, drain period passed, stale informer copy: condition %+v, want True at %v", c, clk.Now())
	}
}

// A restart re-verifies Down from Azure: a node already True is not
// written again; one without the condition gets it a drain period after
// the verification (the earlier Down time is not known).
func TestDrainedConditionAcrossRestart(t *testing.T) {
	f := newFakeARM(t)
	f.addPool("lb-a", "kubernetes", addr{"n1", "10.0.0.1", down}, addr{"n2", "10.0.0.2", down})
	before := metav1.NewTime(t0.Add(-time.Hour))
	n1 := node("n1", "u1", []string{"10.0.0.1"}, taintSpot)
	n1.Status.Conditions = []v1.NodeCondition{{Type: ConditionLoadBalancerDrained, Status: v1.ConditionTrue,
		Reason: DrainedReasonAdminStateDown, LastTransitionTime: before}}
	n2 := node("n2", "u2", []string{"10.0.0.2"}, taintSpot)
	e, clk := newDrainedEnv(t, f, n1, n2)
	e.step(t, 2)
	if _, puts := f.counts(); puts != 0 || e.statusPatches() != 0 {
		t.Fatalf("restart: %d pool writes, %d status patches; want 0 and 0", puts, e.statusPatches())
	}
	clk.Step(testDrain)
	e.step(t, 1) // n2, requeued for its drain period
	if c := e.drained("n1"); c == nil || !c.LastTransitionTime.Equal(&before) {
		t.Errorf("n1's condition rewritten: %+v", c)
	}
	if c := e.drained("n2"); c == nil || c.Status != v1.ConditionTrue || !c.LastTransitionTime.Time.Equal(t0.Add(testDrain)) {
		t.Errorf("n2's condition %+v, want True at verification + drain period", c)
	}
	if n := e.statusPatches(); n != 1 {
		t.Errorf("%d status patches, want 1 (n2)", n)
	}
}

// A tainted node that no pool holds is drained too (reason
// NotInBackendPools); an untainted node in no pool gets no condition.
func TestDrainedConditionNodeInNoPool(t *testing.T) {
	f := newFakeARM(t)
	e, clk := newDrainedEnv(t, f, node("n1", "u1", []string{"10.0.0.1"}, taintAutoscaler), node("n2", "u2", []string{"10.0.0.2"}))
	e.step(t, 2)
	clk.Step(testDrain)
	e.step(t, 1)
	if c := e.drained("n1"); c == nil || c.Status != v1.ConditionTrue || c.Reason != DrainedReasonNotInBackendPools {
		t.Errorf("n1's condition %+v, want True/%s", c, DrainedReasonNotInBackendPools)
	}
	if c := e.drained("n2"); c != nil {
		t.Errorf("n2's condition %+v, want none", c)
	}
}

// Without WithDrainedCondition no condition is written.
func TestDrainedConditionOffByDefault(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	clk := clocktesting.NewFakeClock(t0)
	e := newCtrlEnv(t, f, clk, clusterNodes()...)
	e.step(t, 3)
	e.setTaints("n1", taintOOS)
	e.step(t, 1)
	clk.Step(time.Hour)
	e.c.queue.Add("n1")
	e.step(t, 1)
	if n := e.statusPatches(); n != 0 {
		t.Errorf("%d status patches without WithDrainedCondition", n)
	}
}
