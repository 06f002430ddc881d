package adminstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	nodehelpers "k8s.io/cloud-provider/node/helpers"
	cmhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/health"
)

// PreemptEventMaxAge is how old a PreemptScheduled occurrence may be and
// still taint its node. A Spot eviction follows its notice within about 30
// seconds, so an older notice is about a VM that is gone or going.
const PreemptEventMaxAge = 2 * time.Minute

// TaintEffectSpotEviction is the effect of the spot-eviction taint the
// controller adds. NoSchedule keeps new pods off the node without evicting
// running ones.
const TaintEffectSpotEviction = v1.TaintEffectNoSchedule

// SpotController adds the spot-eviction taint to a node on the first fresh
// PreemptScheduled event about it, so that the admin-state controller takes
// the node out of rotation before the VM is evicted. It has its own queue
// (keyed by node name, the workqueue's default controller rate limiter) and
// its own state; it writes the taint with a patch.
type SpotController struct {
	kube     kubernetes.Interface
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	recorder record.EventRecorder
	clock    clock.WithTicker
	queue    workqueue.TypedRateLimitingInterface[string]
	health   *health.Worker

	mu sync.Mutex
	// preempt holds, per node name, the newest PreemptScheduled occurrence
	// not yet handled.
	preempt map[string]preemptSignal
	// handled is, per node UID, the newest PreemptScheduled occurrence acted
	// on (taint added, or found present).
	handled map[types.UID]preemptSignal
}

// NewSpotController builds the controller and registers its informer
// handlers. events should list only PreemptScheduled events about nodes
// (PreemptEventListOptions). recorder records node events (nil drops them);
// clk drives the queue and event ages (nil: the real clock). Call Run.
func NewSpotController(kube kubernetes.Interface, nodes coreinformers.NodeInformer, events coreinformers.EventInformer,
	recorder record.EventRecorder, clk clock.WithTicker) (*SpotController, error) {
	if kube == nil || nodes == nil || events == nil {
		return nil, errors.New("adminstate: NewSpotController: kube, nodes and events are required")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if recorder == nil {
		recorder = &record.FakeRecorder{} // nil channel: events dropped
	}
	c := &SpotController{
		kube:     kube,
		nodes:    nodes.Lister(),
		recorder: recorder,
		clock:    clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueSpotEviction, Clock: clk}),
		health:  &health.Worker{Clock: clk},
		preempt: map[string]preemptSignal{},
		handled: map[types.UID]preemptSignal{},
	}
	nreg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: c.onNodeDelete})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("adminstate: register node handler: %w", err)
	}
	ereg, err := events.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.onEventAdd,
		UpdateFunc: c.onEventUpdate,
	})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("adminstate: register event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{nreg.HasSynced, ereg.HasSynced}
	return c, nil
}

// Run waits for the informers to sync, then runs workers (at least one)
// until ctx ends; it shuts the queue down and waits for the workers.
func (c *SpotController) Run(ctx context.Context, workers int) error {
	log := klog.FromContext(ctx).WithName("spot-eviction")
	ctx = klog.NewContext(ctx, log)
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return errors.New("adminstate: spot-eviction informers did not sync")
	}
	workers = max(workers, 1)
	log.Info("Starting spot-eviction controller", "workers", workers)
	c.health.Start()
	defer c.health.Stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	log.Info("Stopped spot-eviction controller")
	return nil
}

// HealthChecker reports the controller unhealthy when it is not running or
// a taint has been in progress for longer than health.StuckAfter.
func (c *SpotController) HealthChecker() cmhealthz.UnnamedHealthChecker { return c.health }

// Name is the controller's name.
func (c *SpotController) Name() string { return ControllerSpotEviction }

// onNodeDelete forgets what was acted on for the node.
func (c *SpotController) onNodeDelete(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			n, _ = tomb.Obj.(*v1.Node)
		}
	}
	if n == nil {
		return
	}
	c.mu.Lock()
	delete(c.handled, n.UID)
	c.mu.Unlock()
}

// PreemptEventListOptions restricts an event informer to PreemptScheduled
// events about nodes, e.g.
// informers.WithTweakListOptions(adminstate.PreemptEventListOptions).
func PreemptEventListOptions(o *metav1.ListOptions) {
	o.FieldSelector = fields.AndSelectors(
		fields.OneTermEqualSelector("reason", ReasonPreemptScheduled),
		fields.OneTermEqualSelector("involvedObject.kind", "Node"),
	).String()
}

// preemptSignal is one PreemptScheduled occurrence for a node.
type preemptSignal struct {
	uid types.UID // involvedObject.uid; may be empty
	at  time.Time // when it last occurred
}

// occurrence is when the event last occurred: the newest of its series,
// last, first and event times (and, failing those, its creation).
func occurrence(ev *v1.Event) time.Time {
	var t time.Time
	later := func(c time.Time) {
		if c.After(t) {
			t = c
		}
	}
	if ev.Series != nil {
		later(ev.Series.LastObservedTime.Time)
	}
	later(ev.LastTimestamp.Time)
	later(ev.EventTime.Time)
	later(ev.FirstTimestamp.Time)
	if t.IsZero() {
		t = ev.CreationTimestamp.Time
	}
	return t
}

// onEventAdd ignores the events of the informer's initial list: they
// happened before this controller was watching, and acting on them after a
// restart could re-taint a node an operator has cleared since. The price: a
// notice that arrives while no controller runs is missed (the node then
// relies on the shutdown taint and on health probes).
func (c *SpotController) onEventAdd(obj any, isInInitialList bool) {
	if isInInitialList {
		return
	}
	c.onEvent(obj)
}

// onEventUpdate handles a changed event (a repeat bumps its count and last
// timestamp); resyncs are ignored.
func (c *SpotController) onEventUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Event)
	n, ok2 := newObj.(*v1.Event)
	if ok1 && ok2 && o.ResourceVersion != "" && o.ResourceVersion == n.ResourceVersion {
		return
	}
	c.onEvent(newObj)
}

// onEvent records a fresh PreemptScheduled occurrence about a node and
// enqueues the node for the spot-eviction taint.
func (c *SpotController) onEvent(obj any) {
	ev, ok := obj.(*v1.Event)
	if !ok || ev.Reason != ReasonPreemptScheduled || ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name == "" {
		return
	}
	sig := preemptSignal{uid: ev.InvolvedObject.UID, at: occurrence(ev)}
	if c.clock.Since(sig.at) > PreemptEventMaxAge {
		return
	}
	name := ev.InvolvedObject.Name
	c.mu.Lock()
	if cur, ok := c.preempt[name]; !ok || sig.at.After(cur.at) {
		c.preempt[name] = sig
	}
	c.mu.Unlock()
	c.queue.Add(name)
}

// processNextWorkItem handles one node from the queue and requeues it with
// backoff when the taint could not be added. It returns false once the queue
// is shut down.
func (c *SpotController) processNextWorkItem(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	done := c.health.Busy()
	defer done()
	if err := c.sync(ctx, name); err != nil {
		if ctx.Err() != nil {
			return true
		}
		klog.FromContext(ctx).Error(err, "Adding the spot-eviction taint failed; retrying with backoff", "node", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// sync adds the spot-eviction taint for the pending PreemptScheduled
// occurrence of the node, once. It does nothing when the occurrence is about
// another incarnation of the node (UID, or earlier than its creation), is
// too old, is not newer than one already acted on for this node, or when the
// taint is already there.
func (c *SpotController) sync(ctx context.Context, name string) error {
	c.mu.Lock()
	sig, ok := c.preempt[name]
	c.mu.Unlock()
	if !ok {
		return nil
	}
	done := func() {
		c.mu.Lock()
		if cur, ok := c.preempt[name]; ok && !cur.at.After(sig.at) {
			delete(c.preempt, name)
		}
		c.mu.Unlock()
	}
	if c.clock.Since(sig.at) > PreemptEventMaxAge {
		done()
		return nil
	}
	var tainted *v1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tainted = nil
		node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sig.uid != "" && sig.uid != node.UID {
			return nil // about a previous incarnation
		}
		if sig.at.Before(node.CreationTimestamp.Time) {
			return nil // happened before this node existed
		}
		c.mu.Lock()
		h, seen := c.handled[node.UID]
		c.mu.Unlock()
		if seen && !sig.at.After(h.at) {
			return nil // duplicate of one already acted on
		}
		if hasSpotEvictionTaint(node) {
			c.markHandled(node.UID, sig)
			return nil // duplicate: taint already there
		}
		// A patch, with the node's resourceVersion as precondition: a node
		// replaced or changed since the GET is a conflict, retried afresh.
		n := node.DeepCopy()
		n.Spec.Taints = withSpotEvictionTaint(n.Spec.Taints)
		if err := nodehelpers.PatchNodeTaints(c.kube, name, node, n); err != nil {
			return err
		}
		c.markHandled(node.UID, sig)
		tainted = n
		return nil
	})
	if err != nil {
		if apierrors.IsNotFound(err) {
			done()
			return nil
		}
		if node, gerr := c.nodes.Get(name); gerr == nil {
			c.recorder.Event(node, v1.EventTypeWarning, EventReasonSpotEvictionTaintFailed,
				truncate(fmt.Sprintf("Adding taint %s=%s:%s failed: %v", backendpool.TaintDraining, backendpool.TaintDrainingSpotEviction, TaintEffectSpotEviction, err)))
		}
		return fmt.Errorf("adminstate: taint node %s for spot eviction: %w", name, err)
	}
	done()
	if tainted != nil {
		klog.FromContext(ctx).Info("Added the spot-eviction taint after a PreemptScheduled event", "node", name, "eventTime", sig.at)
		c.recorder.Eventf(tainted, v1.EventTypeNormal, EventReasonSpotEvictionTainted,
			"Added taint %s=%s:%s after a %s event", backendpool.TaintDraining, backendpool.TaintDrainingSpotEviction, TaintEffectSpotEviction, ReasonPreemptScheduled)
	}
	return nil
}

func (c *SpotController) markHandled(uid types.UID, sig preemptSignal) {
	c.mu.Lock()
	if h, ok := c.handled[uid]; !ok || sig.at.After(h.at) {
		c.handled[uid] = sig
	}
	c.mu.Unlock()
}

func hasSpotEvictionTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == backendpool.TaintDraining && t.Value == backendpool.TaintDrainingSpotEviction {
			return true
		}
	}
	return false
}

// withSpotEvictionTaint adds draining=spot-eviction:NoSchedule. A draining
// taint with the same effect and another value is given the spot-eviction
// value (a node carries at most one taint per key and effect).
func withSpotEvictionTaint(taints []v1.Taint) []v1.Taint {
	for i, t := range taints {
		if t.Key == backendpool.TaintDraining && t.Effect == TaintEffectSpotEviction {
			taints[i].Value = backendpool.TaintDrainingSpotEviction
			return taints
		}
	}
	return append(taints, v1.Taint{Key: backendpool.TaintDraining, Value: backendpool.TaintDrainingSpotEviction, Effect: TaintEffectSpotEviction})
}
