package adminstate

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// eventLog keeps every event the controller records (nodes are not
// namespaced, so an event's Object is the node name).
type eventLog = testutil.EventLog

// ctrlEnv is a controller over a fake clientset and shared informers.
type ctrlEnv struct {
	t       testing.TB
	kube    *fake.Clientset
	factory informers.SharedInformerFactory
	mgr     *Manager
	events  *eventLog
	c       *Controller
	spot    *SpotController
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

// newCtrlEnv builds the controller over the objects and starts the
// informers (not the workers). clk nil: the real clock.
func newCtrlEnv(t testing.TB, f *fakeARM, clk clock.WithTicker, objs ...runtime.Object) *ctrlEnv {
	t.Helper()
	return newPolicyCtrlEnv(t, f, clk, testPolicy, objs...)
}

// newPolicyCtrlEnv is newCtrlEnv with the Manager's pool-entry policy.
func newPolicyCtrlEnv(t testing.TB, f *fakeARM, clk clock.WithTicker, policy backendpool.Policy, objs ...runtime.Object) *ctrlEnv {
	t.Helper()
	return newOptsCtrlEnv(t, f, clk, policy, false, objs...)
}

// newOptsCtrlEnv is newPolicyCtrlEnv; drained: the controller writes the
// LoadBalancerDrained condition through the fake clientset.
func newOptsCtrlEnv(t testing.TB, f *fakeARM, clk clock.WithTicker, policy backendpool.Policy, drained bool, objs ...runtime.Object) *ctrlEnv {
	t.Helper()
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	mgr := newPolicyManager(t, f, policy)
	ev := &eventLog{}
	var opts []Option
	if drained {
		opts = append(opts, WithDrainedCondition(kube))
	}
	c, err := NewController(factory.Core().V1().Nodes(), mgr, ev, clk, opts...)
	if err != nil {
		t.Fatal(err)
	}
	spot, err := NewSpotController(kube, factory.Core().V1().Nodes(), factory.Core().V1().Events(), ev, clk)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	env := &ctrlEnv{t: t, kube: kube, factory: factory, mgr: mgr, events: ev, c: c, spot: spot, ctx: ctx, cancel: cancel}
	factory.Start(ctx.Done())
	t.Cleanup(env.stop)
	if !cache.WaitForCacheSync(ctx.Done(), append(c.synced, spot.synced...)...) {
		t.Fatal("caches did not sync")
	}
	return env
}

// run starts the workers of both controllers (one spot worker, so its
// queue is FIFO).
func (e *ctrlEnv) run() {
	e.done = make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.c.Run(e.ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
	wg.Go(func() {
		if err := e.spot.Run(e.ctx, 1); err != nil {
			e.t.Errorf("spot Run: %v", err)
		}
	})
	go func() {
		wg.Wait()
		close(e.done)
	}()
}

func (e *ctrlEnv) stop() {
	e.cancel()
	if e.done != nil {
		<-e.done
	}
	e.c.shutdown()
	e.spot.queue.ShutDown()
	e.factory.Shutdown()
}

func (e *ctrlEnv) getNode(name string) *v1.Node {
	e.t.Helper()
	n, err := e.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// setTaints replaces a node's taints through the API.
func (e *ctrlEnv) setTaints(name string, taints ...v1.Taint) {
	e.t.Helper()
	n := e.getNode(name)
	n.Spec.Taints = taints
	if _, err := e.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ctrlEnv) createNode(n *v1.Node) {
	e.t.Helper()
	if _, err := e.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ctrlEnv) deleteNode(name string) {
	e.t.Helper()
	if err := e.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// nodeUpdates counts update calls on nodes made through the clientset.
// nodeWrites counts the controllers' writes of nodes (patches; the tests
// themselves update nodes).
func (e *ctrlEnv) nodeWrites() int {
	n := 0
	for _, a := range e.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

func (e *ctrlEnv) hasSpotTaint(name string) bool { return hasSpotEvictionTaint(e.getNode(name)) }

// preemptEvent is a PreemptScheduled event about a node at time at.
func preemptEvent(name, node string, uid string, at time.Time) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "default"},
		InvolvedObject: v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(uid)},
		Reason:         ReasonPreemptScheduled,
		Type:           v1.EventTypeWarning,
		Message:        "Preempt scheduled",
		FirstTimestamp: metav1.NewTime(at),
		LastTimestamp:  metav1.NewTime(at),
		Count:          1,
	}
}

func (e *ctrlEnv) createEvent(ev *v1.Event) {
	e.t.Helper()
	if _, err := e.kube.CoreV1().Events(ev.Namespace).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ctrlEnv) updateEvent(ev *v1.Event) {
	e.t.Helper()
	if _, err := e.kube.CoreV1().Events(ev.Namespace).Update(context.Background(), ev, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func newTestQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
}
