package readinessgate

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	metricstestutil "k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeGateway holds the addresses the test says it holds.
type fakeGateway struct {
	mu       sync.Mutex
	held     map[types.UID]map[netip.Addr]bool
	rechecks map[string]int
}

func (g *fakeGateway) HoldsPodAddress(svc types.UID, ips ...netip.Addr) (bool, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, ip := range ips {
		if g.held[svc][ip] {
			return true, true
		}
	}
	return false, true
}

func (g *fakeGateway) RecheckEndpoints(ns, svc string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rechecks[ns+"/"+svc]++
}

func (g *fakeGateway) hold(svc types.UID, ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[svc] == nil {
		g.held[svc] = map[netip.Addr]bool{}
	}
	g.held[svc][netip.MustParseAddr(ip)] = true
}

func (g *fakeGateway) rechecked(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rechecks[key]
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	cs    *fake.Clientset
	clock *clocktesting.FakeClock
	gw    *fakeGateway
	rec   *record.FakeRecorder
	c     *Controller
}

func newHarness(t *testing.T, optIn bool) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}
	if optIn {
		ns.Labels = map[string]string{LabelOptIn: LabelOptInValue}
	}
	cs := fake.NewClientset(ns,
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web", UID: "uid-web"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"}}},
		&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "internal", UID: "uid-internal"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Selector: map[string]string{"app": "web"}}})
	f := informers.NewSharedInformerFactory(cs, 0)
	h := &harness{t: t, ctx: ctx, cs: cs, clock: clocktesting.NewFakeClock(time.Now().Truncate(time.Second)),
		gw: &fakeGateway{held: map[types.UID]map[netip.Addr]bool{}, rechecks: map[string]int{}}, rec: record.NewFakeRecorder(100)}
	c, err := New(Options{Client: cs, Pods: f.Core().V1().Pods(), Namespaces: f.Core().V1().Namespaces(), Services: f.Core().V1().Services(),
		Gateway: h.gw, Recorder: h.rec, Clock: h.clock, Timeout: time.Minute, Poll: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		f.Shutdown()
	})
	return h
}

// createPod creates a pod of the web Service with the gate declared (or
// not) and its containers ready (or not).
func (h *harness) createPod(name string, gate, containersReady bool) *v1.Pod {
	h.t.Helper()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Status: v1.PodStatus{PodIP: "10.244.0.7", PodIPs: []v1.PodIP{{IP: "10.244.0.7"}}}}
	if gate {
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: ConditionType}}
	}
	if containersReady {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(h.clock.Now())}}
	}
	p, err := h.cs.CoreV1().Pods("app").Create(h.ctx, p, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) gate(name string) *v1.PodCondition {
	p, err := h.cs.CoreV1().Pods("app").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return condition(p, ConditionType)
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		h.t.Fatalf("timed out waiting for %s", what)
	}
}

// A gated pod waits for the gateway, which is asked to read the Service's
// endpoints again; once it holds the address the gate turns True.
func TestGateTurnsTrueWhenTheGatewayHoldsTheAddress(t *testing.T) {
	h := newHarness(t, true)
	before := observed(t, "ready")
	h.createPod("web-1", true, true)
	h.eventually("the gateway asked to recheck", func() bool { return h.gw.rechecked("app/web") > 0 })
	if h.c.HeldByGate("app", "web-1") != true {
		t.Error("HeldByGate false for a gated pod with ready containers")
	}
	if c := h.gate("web-1"); c != nil {
		t.Fatalf("gate written before the gateway held the address: %+v", c)
	}
	if h.gw.rechecked("app/internal") != 0 {
		t.Error("a ClusterIP Service was waited for")
	}
	h.gw.hold("uid-web", "10.244.0.7")
	h.clock.Step(time.Second) // the next check
	h.eventually("the gate True", func() bool { c := h.gate("web-1"); return c != nil && c.Status == v1.ConditionTrue })
	if c := h.gate("web-1"); c.Reason != ReasonReady {
		t.Errorf("reason %q, want %q", c.Reason, ReasonReady)
	}
	// The latency is observed once the patch returns, which may be after
	// the gate shows: wait for it.
	h.eventually("the latency observed once", func() bool { return observed(t, "ready") == before+1 })
	if n := observed(t, "ready"); n != before+1 {
		t.Errorf("histogram observations %d, want %d", n, before+1)
	}
	if !h.c.HeldByGate("app", "web-1") {
		t.Error("HeldByGate turned false once the gate was True: the address would leave the gateway before the endpoint is ready")
	}
}

// A stuck gateway does not block the rollout: the gate opens at the
// timeout, with a Warning event.
func TestGateFailsOpenAtTheTimeout(t *testing.T) {
	h := newHarness(t, true)
	h.createPod("web-1", true, true)
	h.eventually("the gateway asked to recheck", func() bool { return h.gw.rechecked("app/web") > 0 })
	for range 59 {
		h.clock.Step(time.Second)
	}
	if c := h.gate("web-1"); c != nil {
		t.Fatalf("gate written before the timeout: %+v", c)
	}
	h.clock.Step(time.Second)
	h.eventually("the gate True", func() bool { c := h.gate("web-1"); return c != nil && c.Status == v1.ConditionTrue })
	if c := h.gate("web-1"); c.Reason != ReasonTimeout {
		t.Errorf("reason %q, want %q", c.Reason, ReasonTimeout)
	}
	select {
	case e := <-h.rec.Events:
		if e != "Warning "+EventReasonTimeout+" The service gateway did not hold the pod's address for web within 1m0s; opened anyway (fail-open)." {
			t.Errorf("event %q", e)
		}
	case <-time.After(5 * time.Second):
		t.Error("no timeout event")
	}
}

// Pods without the gate, outside an opted-in namespace or whose
// containers are not ready are left alone.
func TestGateLeavesOtherPodsAlone(t *testing.T) {
	h := newHarness(t, false)
	h.createPod("not-opted-in", true, true)
	h2 := newHarness(t, true)
	h2.createPod("no-gate", false, true)
	h2.createPod("starting", true, false)
	h.clock.Step(2 * time.Minute)
	h2.clock.Step(2 * time.Minute)
	if h.c.HeldByGate("app", "not-opted-in") || h2.c.HeldByGate("app", "no-gate") || h2.c.HeldByGate("app", "starting") {
		t.Error("HeldByGate true for a pod the gate does not hold")
	}
	// Give the workers a moment to (wrongly) act: poll for a write that must not come.
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 300*time.Millisecond, true, func(context.Context) (bool, error) {
		return h.gate("not-opted-in") != nil || h2.gate("no-gate") != nil || h2.gate("starting") != nil, nil
	})
	if err == nil {
		t.Fatal("a gate condition was written for a pod the gate does not hold")
	}
}

// A gated pod that no azlb LoadBalancer Service selects opens at once.
func TestGateOpensWhenNoLoadBalancerSelectsThePod(t *testing.T) {
	h := newHarness(t, true)
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "batch", UID: "uid-batch", Labels: map[string]string{"app": "batch"}},
		Spec:   v1.PodSpec{ReadinessGates: []v1.PodReadinessGate{{ConditionType: ConditionType}}},
		Status: v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(h.clock.Now())}}}}
	if _, err := h.cs.CoreV1().Pods("app").Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the gate True", func() bool { c := h.gate("batch"); return c != nil && c.Reason == ReasonNotLoadBalanced })
}

// observed is the histogram's observation count for the result.
func observed(t *testing.T, result string) uint64 {
	t.Helper()
	registerOnce.Do(func() { legacyregistry.MustRegister(duration) })
	n, err := metricstestutil.GetHistogramMetricCount(duration.WithLabelValues(result))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNewValidates(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Fatal("New with no options succeeded")
	}
}
