package adminstate

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
)

const waitFor = 10 * time.Second

func clusterNodes() []runtime.Object {
	return []runtime.Object{
		node("n1", "u1", n1IPs),
		node("n2", "u2", n2IPs),
		node("n3", "u3", []string{"10.0.0.3", "fd00::3"}),
	}
}

// n1Down reports whether every pool entry of n1 has the state.
func n1Is(f *fakeARM, s State) bool {
	for _, p := range append(allPools(), lbstore.PoolRef{LoadBalancer: "lb-b", Pool: "default-web"}) {
		ip := "10.0.0.1"
		if p.Pool == "kubernetes-IPv6" {
			ip = "fd00::1"
		}
		if f.state(p.LoadBalancer, p.Pool, ip) != s {
			return false
		}
	}
	return true
}

// barrier takes n3 out of service and waits until that is applied: the
// single worker handles the queue in order, so every change made before the
// barrier has been handled once it returns.
func barrier(t *testing.T, e *ctrlEnv, f *fakeARM) {
	t.Helper()
	e.setTaints("n3", taintOOS)
	poll(t, waitFor, "barrier node n3 Down", func() bool { return len(e.events.Find("n3", EventReasonAdminStateDown)) == 1 })
}

func TestControllerTaintTransitions(t *testing.T) {
	tests := []struct {
		name   string
		taints []v1.Taint
		down   bool
	}{
		{"out-of-service", []v1.Taint{taintOOS}, true},
		{"shutdown", []v1.Taint{taintShutdown}, true},
		{"spot eviction", []v1.Taint{taintSpot}, true},
		{"all three", []v1.Taint{taintOOS, taintShutdown, taintSpot}, true},
		{"draining with another value", []v1.Taint{taintOther}, false},
		{"cordon", []v1.Taint{taintCordon}, false},
		{"cluster autoscaler deletion", []v1.Taint{taintAutoscaler}, true},
		{"Karpenter disruption", []v1.Taint{taintKarpenter}, true},
		{"Karpenter's key, another effect", []v1.Taint{{Key: backendpool.TaintKarpenterDisrupted, Effect: v1.TaintEffectPreferNoSchedule}}, false},
		{"the autoscaler's deletion candidate", []v1.Taint{{Key: "DeletionCandidateOfClusterAutoscaler", Value: "1", Effect: v1.TaintEffectPreferNoSchedule}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeARM(t)
			clusterLayout(f)
			e := newCtrlEnv(t, f, nil, clusterNodes()...)
			e.run()
			// Startup verifies every node (GETs only).
			poll(t, waitFor, "startup verification", func() bool { g, _ := f.counts(); return g > 0 && e.c.queue.Len() == 0 })
			if _, puts := f.counts(); puts != 0 {
				t.Fatalf("startup wrote %d pools, want 0", puts)
			}

			e.setTaints("n1", tc.taints...)
			if !tc.down {
				barrier(t, e, f)
				if !n1Is(f, none) {
					t.Fatal("n1 taken out of rotation by an unsupported signal")
				}
				if _, puts := f.counts(); puts != 6 {
					t.Errorf("puts = %d, want 6 (the barrier node only)", puts)
				}
				if got := e.events.Find("n1", EventReasonAdminStateDown); len(got) != 0 {
					t.Errorf("unexpected Down event: %v", got)
				}
				if _, ok := e.c.OutOfService()["n1"]; ok {
					t.Error("n1 in the out-of-service set")
				}
				return
			}
			poll(t, waitFor, "n1 Down on every pool", func() bool { return n1Is(f, down) })
			poll(t, waitFor, "Down event", func() bool { return len(e.events.Find("n1", EventReasonAdminStateDown)) == 1 })
			if msg := e.events.Find("n1", EventReasonAdminStateDown)[0].Message; !strings.Contains(msg, "7 backend pool") {
				t.Errorf("Down event message %q", msg)
			}
			reasons := e.c.OutOfService()["n1"]
			if len(reasons) != len(tc.taints) {
				t.Errorf("out-of-service reasons %v, want %d", reasons, len(tc.taints))
			}

			// Removing all supported taints restores None (a cordon stays).
			e.setTaints("n1", taintCordon)
			poll(t, waitFor, "n1 None on every pool", func() bool { return n1Is(f, none) })
			poll(t, waitFor, "None event", func() bool { return len(e.events.Find("n1", EventReasonAdminStateNone)) == 1 })
			if _, ok := e.c.OutOfService()["n1"]; ok {
				t.Error("n1 still in the out-of-service set")
			}
			if n := e.events.Count(EventReasonAdminStateUpdateFailed); n != 0 {
				t.Errorf("%d failure events", n)
			}
		})
	}
}

// A node no pool holds (multiple load balancers: its load balancer serves
// no Service yet) gets an event that says so, not "Down on 0 backend
// pool(s)" (issue 32 item 5).
func TestControllerNodeInNoPoolEventSaysSo(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, append(clusterNodes(), node("n9", "u9", []string{"10.0.0.9"}))...)
	e.run()
	e.setTaints("n9", taintOOS)
	poll(t, waitFor, "Down event", func() bool { return len(e.events.Find("n9", EventReasonAdminStateDown)) == 1 })
	if msg := e.events.Find("n9", EventReasonAdminStateDown)[0].Message; !strings.HasPrefix(msg, "No backend pool holds the node") {
		t.Errorf("Down event message %q", msg)
	}
	e.setTaints("n9")
	poll(t, waitFor, "None event", func() bool { return len(e.events.Find("n9", EventReasonAdminStateNone)) == 1 })
	if msg := e.events.Find("n9", EventReasonAdminStateNone)[0].Message; !strings.HasPrefix(msg, "No backend pool holds the node") {
		t.Errorf("None event message %q", msg)
	}
}

func TestControllerPartialTaintRemovalKeepsDown(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	e.setTaints("n1", taintOOS, taintShutdown)
	poll(t, waitFor, "n1 Down", func() bool { return n1Is(f, down) })
	_, puts := f.counts()
	e.setTaints("n1", taintShutdown)
	barrier(t, e, f)
	if !n1Is(f, down) {
		t.Fatal("n1 restored while the shutdown taint remains")
	}
	if _, p := f.counts(); p != puts+6 {
		t.Errorf("puts %d -> %d, want only the barrier's 6", puts, p)
	}
	if got := e.c.OutOfService()["n1"]; len(got) != 1 || got[0] != backendpool.TaintShutdown {
		t.Errorf("reasons = %v, want [shutdown]", got)
	}
}

func TestControllerCoalescesPendingNodes(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	// The initial list queued every node: one batch, one lock, GETs only.
	if n := e.c.queue.Len(); n != 3 {
		t.Fatalf("queue length after sync = %d, want 3", n)
	}
	if !e.c.processNextWorkItem(e.ctx) {
		t.Fatal("queue shut down")
	}
	if obs, _ := opMetric(t, e.mgr.source); obs != 1 || e.c.queue.Len() != 0 {
		t.Fatalf("initial batch: applies %d, queue %d; want 1 and 0", obs, e.c.queue.Len())
	}
	if g, p := f.counts(); g != 7 || p != 0 {
		t.Fatalf("initial batch: gets %d puts %d, want 7 and 0", g, p)
	}

	e.setTaints("n1", taintOOS)
	e.setTaints("n2", taintSpot)
	poll(t, waitFor, "both nodes queued", func() bool { return e.c.queue.Len() == 2 })
	if !e.c.processNextWorkItem(e.ctx) {
		t.Fatal("queue shut down")
	}
	for _, p := range allPools() {
		if n := f.putsOf(p.LoadBalancer, p.Pool); n != 1 {
			t.Errorf("%s: %d PUTs, want 1 for two nodes", p, n)
		}
	}
	if !n1Is(f, down) || f.state("lb-b", "kubernetes-IPv6", "fd00::2") != down {
		t.Error("not every node Down")
	}
	if obs, _ := opMetric(t, e.mgr.source); obs != 2 {
		t.Errorf("applies = %d, want 2 (one per batch)", obs)
	}
	if len(e.events.Find("n1", EventReasonAdminStateDown)) != 1 || len(e.events.Find("n2", EventReasonAdminStateDown)) != 1 {
		t.Error("missing Down events")
	}
}

func TestControllerBackoffOnFailure(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newFakeARM(t)
	clusterLayout(f)
	failing := true
	f.putErr = func(lb, pool string) error {
		if failing {
			return respErr(http.StatusTooManyRequests, "SubscriptionRequestsThrottled")
		}
		return nil
	}
	e := newCtrlEnv(t, f, clk, clusterNodes()...)
	e.c.processNextWorkItem(e.ctx) // initial verification
	e.setTaints("n1", taintOOS)
	poll(t, waitFor, "n1 queued", func() bool { return e.c.queue.Len() == 1 })
	// The queues' own tickers; a requeue adds one timer while it waits.
	idleWaiters := clk.Waiters()

	// Each failure records a Warning and requeues after 5ms, 10ms, 20ms.
	for i, delay := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		e.c.processNextWorkItem(e.ctx)
		if got := len(e.events.Find("n1", EventReasonAdminStateUpdateFailed)); got != i+1 {
			t.Fatalf("attempt %d: %d warning events", i, got)
		}
		if e.c.queue.Len() != 0 {
			t.Fatalf("attempt %d: requeued without delay", i)
		}
		poll(t, waitFor, "requeue timer", func() bool { return clk.Waiters() > idleWaiters })
		clk.Step(delay - time.Millisecond)
		if e.c.queue.Len() != 0 {
			t.Fatalf("attempt %d: requeued before %v", i, delay)
		}
		clk.Step(time.Millisecond)
		poll(t, waitFor, "requeue after backoff", func() bool { return e.c.queue.Len() == 1 })
	}
	msg := e.events.Find("n1", EventReasonAdminStateUpdateFailed)[0].Message
	if !strings.Contains(msg, "SubscriptionRequestsThrottled") || !strings.Contains(msg, "Down") {
		t.Errorf("warning message %q lacks the error", msg)
	}
	failing = false
	e.c.processNextWorkItem(e.ctx)
	if !n1Is(f, down) {
		t.Fatal("n1 not Down after recovery")
	}
	if e.c.queue.NumRequeues("n1") != 0 {
		t.Error("backoff not reset after success")
	}
	if len(e.events.Find("n1", EventReasonAdminStateDown)) != 1 {
		t.Error("no Down event after recovery")
	}
}

func TestControllerDeletedNodeMakesNoCall(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	e.setTaints("n1", taintOOS)
	poll(t, waitFor, "n1 Down", func() bool { return n1Is(f, down) })
	gets, puts := f.counts()
	e.deleteNode("n1")
	poll(t, waitFor, "n1 forgotten", func() bool { _, ok := e.c.OutOfService()["n1"]; return !ok })
	barrier(t, e, f)
	// The barrier (n3 Down) writes its 6 pools: those of lb-a and
	// lb-a-internal from the cache, the 2 of lb-b after reading them (n1's
	// concurrent write of lb-b's 3 pools left its etag unknown).
	if g, p := f.counts(); p != puts+6 || g != gets+2 {
		t.Errorf("deleting n1: gets %d->%d puts %d->%d; want only the barrier's 2 and 6", gets, g, puts, p)
	}
}

// TestControllerNodeDeletedDuringApply: a node deleted while its Down is
// being written leaves no out-of-service record behind (it would otherwise
// outlive the node and be reported for its replacement's name).
func TestControllerNodeDeletedDuringApply(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	f.onPut = func(string, string) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release // closed: no longer holds anything back
	}
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	e.setTaints("n1", taintOOS)
	<-entered // a PUT for n1 is in flight
	e.deleteNode("n1")
	poll(t, waitFor, "n1 forgotten", func() bool {
		e.c.mu.Lock()
		defer e.c.mu.Unlock()
		_, ok := e.c.uids["n1"]
		return !ok
	})
	close(release)
	barrier(t, e, f)
	if _, ok := e.c.OutOfService()["n1"]; ok {
		t.Error("deleted node n1 still reported out of service")
	}
	e.c.mu.Lock()
	_, kept := e.c.states["u1"]
	e.c.mu.Unlock()
	if kept {
		t.Error("deleted node's UID still recorded")
	}
	if n := len(e.events.Find("n1", EventReasonAdminStateDown)); n != 0 {
		t.Errorf("%d Down events for a node deleted during the apply, want 0", n)
	}
}

func TestControllerReplacementNodeDoesNotInheritDown(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	e.setTaints("n1", taintSpot)
	poll(t, waitFor, "n1 Down", func() bool { return n1Is(f, down) })

	// The VM is evicted and recreated under the same name and address; the
	// pools still hold the old entry (Down) until the Service reconcile.
	e.deleteNode("n1")
	e.createNode(node("n1", "u1-new", n1IPs))
	poll(t, waitFor, "replacement restored to None", func() bool { return n1Is(f, none) })
	if _, ok := e.c.OutOfService()["n1"]; ok {
		t.Error("replacement in the out-of-service set")
	}
	e.c.mu.Lock()
	_, oldKept := e.c.states["u1"]
	e.c.mu.Unlock()
	if oldKept {
		t.Error("old UID still recorded")
	}

	// Tainting the replacement works as for any node.
	e.setTaints("n1", taintOOS)
	poll(t, waitFor, "replacement Down", func() bool { return n1Is(f, down) })
}

func TestControllerRestartVerifiesWithoutWrites(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	for _, lb := range []string{"lb-a", "lb-b", "lb-a-internal"} {
		f.addPool(lb, "kubernetes", addr{"n1", "10.0.0.1", down}, addr{"n2", "10.0.0.2", ""})
		f.addPool(lb, "kubernetes-IPv6", addr{"n1", "fd00::1", down}, addr{"n2", "fd00::2", ""})
	}
	f.addPool("lb-b", "default-web", addr{"n1", "10.0.0.1", down})
	objs := clusterNodes()
	objs[0] = node("n1", "u1", n1IPs, taintSpot)
	e := newCtrlEnv(t, f, nil, objs...)
	e.run()
	poll(t, waitFor, "Down reported", func() bool { return len(e.events.Find("n1", EventReasonAdminStateDown)) == 1 })
	if _, puts := f.counts(); puts != 0 {
		t.Errorf("restart wrote %d pools, want 0", puts)
	}
	if got := e.c.OutOfService()["n1"]; len(got) != 1 || got[0] != backendpool.TaintDraining {
		t.Errorf("out-of-service set after restart: %v", e.c.OutOfService())
	}
}

func TestControllerRestartRestoresNoneForClearedNode(t *testing.T) {
	f := newFakeARM(t)
	// The taint was removed while no controller ran.
	f.addPool("lb-a", "kubernetes", addr{"n1", "10.0.0.1", down})
	e := newCtrlEnv(t, f, nil, node("n1", "u1", []string{"10.0.0.1"}))
	e.run()
	poll(t, waitFor, "n1 restored", func() bool { return f.state("lb-a", "kubernetes", "10.0.0.1") == none })
}

func TestControllerWarningThenRecovery(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	left := 2
	f.putErr = func(lb, pool string) error {
		if lb == "lb-b" && pool == "kubernetes" && left > 0 {
			left--
			return respErr(http.StatusInternalServerError, "InternalServerError")
		}
		return nil
	}
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	e.run()
	e.setTaints("n1", taintOOS)
	poll(t, waitFor, "n1 Down after retries", func() bool { return n1Is(f, down) && len(e.events.Find("n1", EventReasonAdminStateDown)) == 1 })
	warn := e.events.Find("n1", EventReasonAdminStateUpdateFailed)
	if len(warn) != 2 || !strings.Contains(warn[0].Message, "lb-b/kubernetes") {
		t.Fatalf("warnings = %+v, want 2 naming lb-b/kubernetes", warn)
	}
	if warn[0].Type != v1.EventTypeWarning {
		t.Errorf("event type %s", warn[0].Type)
	}
}

func TestControllerIgnoresIrrelevantUpdates(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, nil, clusterNodes()...)
	old := node("n1", "u1", n1IPs)
	for _, tc := range []struct {
		name    string
		mutate  func(*v1.Node)
		enqueue bool
	}{
		{"label", func(n *v1.Node) { n.Labels = map[string]string{"a": "b"} }, false},
		{"cordon", func(n *v1.Node) { n.Spec.Unschedulable = true; n.Spec.Taints = []v1.Taint{taintCordon} }, false},
		{"condition", func(n *v1.Node) { n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady}} }, false},
		{"other draining value", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{taintOther} }, false},
		{"out-of-service", func(n *v1.Node) { n.Spec.Taints = []v1.Taint{taintOOS} }, true},
		{"address", func(n *v1.Node) { n.Status.Addresses[0].Address = "10.0.0.9" }, true},
		{"uid", func(n *v1.Node) { n.UID = "u1-new" }, true},
	} {
		e.c.queue.ShutDown()
		e.c.queue = newTestQueue()
		n := old.DeepCopy()
		tc.mutate(n)
		e.c.onNodeUpdate(old, n)
		if got := e.c.queue.Len() == 1; got != tc.enqueue {
			t.Errorf("%s: enqueued %v, want %v", tc.name, got, tc.enqueue)
		}
	}
}

// A mass event: when many nodes became pending while a batch was applied,
// the next batch waits for the burst window (so a wave of taints costs about
// two PUTs per pool); a lone node never waits.
func TestControllerMassEventWaitsForTheBurstWindow(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f := newFakeARM(t)
	clusterLayout(f)
	e := newCtrlEnv(t, f, clk, clusterNodes()...)
	if !e.c.processNextWorkItem(e.ctx) { // the initial verification batch
		t.Fatal("queue shut down")
	}
	if d := e.c.burstDelay(); d != 0 {
		t.Fatalf("after a quiet batch the next waits %v, want 0", d)
	}

	// While n1's batch reads the pools, a wave of nodes becomes pending.
	var wave sync.Once
	f.getErr = func(string, string) error { // pool GETs run in parallel
		wave.Do(func() {
			for i := 0; i < burstThreshold; i++ {
				e.c.queue.Add(fmt.Sprintf("wave-%02d", i))
			}
		})
		return nil
	}
	e.setTaints("n1", taintOOS)
	poll(t, waitFor, "n1 queued", func() bool { return e.c.queue.Len() == 1 })
	if !e.c.processNextWorkItem(e.ctx) {
		t.Fatal("queue shut down")
	}
	if d := e.c.burstDelay(); d != burstWindow {
		t.Fatalf("after a batch during which %d nodes arrived the next waits %v, want %v", burstThreshold, d, burstWindow)
	}
	clk.Step(burstWindow / 4)
	if d := e.c.burstDelay(); d != 3*burstWindow/4 {
		t.Fatalf("a quarter window later the wait is %v, want %v", d, 3*burstWindow/4)
	}
	clk.Step(burstWindow)
	if d := e.c.burstDelay(); d != 0 {
		t.Fatalf("after the window the wait is %v, want 0", d)
	}
	f.getErr = nil
	// The wave (unknown nodes: no Azure calls) is taken as one batch, after
	// which nothing is pending and the burst is over.
	if !e.c.processNextWorkItem(e.ctx) {
		t.Fatal("queue shut down")
	}
	if e.c.queue.Len() != 0 || e.c.burstDelay() != 0 {
		t.Fatalf("queue %d, wait %v after the wave; want 0 and 0", e.c.queue.Len(), e.c.burstDelay())
	}
}

// loadBalancerAdminStateTaints replaces the default list: an operator's own
// taint takes the node Down, the autoscaler's no longer does (the built-in
// ones always do); a listed taint whose effect changes so that it no longer
// matches restores None.
func TestControllerConfiguredTaints(t *testing.T) {
	f := newFakeARM(t)
	clusterLayout(f)
	policy := testPolicy
	policy.Taints = []config.TaintSelector{{Key: "example.com/retire", Effect: "NoExecute"}}
	e := newPolicyCtrlEnv(t, f, nil, policy, clusterNodes()...)
	e.run()
	e.setTaints("n1", taintAutoscaler)
	barrier(t, e, f)
	if !n1Is(f, none) {
		t.Fatal("n1 Down for the autoscaler's taint, which the configuration left out")
	}
	e.setTaints("n1", taintAutoscaler, v1.Taint{Key: "example.com/retire", Value: "soon", Effect: v1.TaintEffectNoExecute})
	poll(t, waitFor, "n1 Down on every pool", func() bool { return n1Is(f, down) })
	poll(t, waitFor, "Down event", func() bool { return len(e.events.Find("n1", EventReasonAdminStateDown)) == 1 })
	if msg := e.events.Find("n1", EventReasonAdminStateDown)[0].Message; !strings.Contains(msg, "taints: example.com/retire)") {
		t.Errorf("Down event message %q", msg)
	}
	e.setTaints("n1", taintAutoscaler, v1.Taint{Key: "example.com/retire", Value: "soon", Effect: v1.TaintEffectNoSchedule})
	poll(t, waitFor, "n1 None on every pool", func() bool { return n1Is(f, none) })
}
