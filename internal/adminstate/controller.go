package adminstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cmhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/health"
	"github.com/azlb/azlb/internal/lbstore"
)

// Queue names (workqueue metrics).
const (
	QueueAdminState   = "adminstate"
	QueueSpotEviction = "adminstate_spot_eviction"
)

// Controller names, as --controllers and /healthz know them.
const (
	ControllerAdminState   = "node-admin-state"
	ControllerSpotEviction = "spot-eviction"
)

// maxEventMessage bounds the message of a Warning event (the error of
// several pools can be long).
const maxEventMessage = 1000

// Controller drives backend AdminState from node taints.
//
// The admin-state queue is keyed by node name and uses the workqueue's
// default controller rate limiter (per node: exponential backoff from 5 ms,
// doubling up to 1000 s; overall: 10 retries per second, burst 100); a node
// whose apply was throttled by Azure is not retried before the Retry-After
// the throttle reported. It has
// one worker, which takes every node pending at that moment and applies them
// together (one GET and at most one PUT per backend pool for the whole
// batch): every apply holds the service-reconcile lock, so more workers
// would only split batches.
type Controller struct {
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	mgr      *Manager
	recorder record.EventRecorder
	clock    clock.WithTicker
	health   *health.Worker
	// kube writes the LoadBalancerDrained node condition; nil: none is
	// written (WithDrainedCondition).
	kube kubernetes.Interface

	queue   workqueue.TypedRateLimitingInterface[string]
	limiter workqueue.TypedRateLimiter[string] // the queue's

	// lastBatchStart and burst belong to the one admin-state worker.
	lastBatchStart time.Time
	burst          bool

	mu sync.Mutex
	// states is the out-of-service set, keyed by node UID: the state last
	// reported for the node and the taints that caused it. A node in service
	// has no entry.
	states map[types.UID]nodeRecord
	// uids maps a node name to the UID last synced under it.
	uids map[string]types.UID
	// drained is the LoadBalancerDrained status the controller last wrote
	// for a node UID: it wins over the informer's copy, which may not show
	// the write yet.
	drained map[types.UID]v1.ConditionStatus
}

type nodeRecord struct {
	name    string
	state   State
	reasons []string
	// since is when the controller first applied the state successfully
	// for this node UID (for Down: when Down took effect, or, after a
	// restart, was verified).
	since time.Time
	// pools last held the node (an apply that made ARM calls).
	pools []lbstore.PoolRef
}

// NewController builds the controller and registers its node handler.
// nodes must come from a started (or soon started) informer. recorder
// records the node events (nil drops them); clk drives the workqueue (nil:
// the real clock). Call Run.
func NewController(nodes coreinformers.NodeInformer, mgr *Manager, recorder record.EventRecorder, clk clock.WithTicker, opts ...Option) (*Controller, error) {
	if nodes == nil || mgr == nil {
		return nil, errors.New("adminstate: NewController: nodes and mgr are required")
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	if recorder == nil {
		recorder = &record.FakeRecorder{} // nil channel: events dropped
	}
	limiter := workqueue.DefaultTypedControllerRateLimiter[string]()
	c := &Controller{
		nodes:    nodes.Lister(),
		mgr:      mgr,
		recorder: recorder,
		clock:    clk,
		health:   &health.Worker{Clock: clk},
		limiter:  limiter,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueAdminState, Clock: clk}),
		states:  map[types.UID]nodeRecord{},
		uids:    map[string]types.UID{},
		drained: map[types.UID]v1.ConditionStatus{},
	}
	for _, o := range opts {
		o(c)
	}
	reg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, _ bool) { c.onNodeAdd(obj) },
		UpdateFunc: c.onNodeUpdate,
		DeleteFunc: c.onNodeDelete,
	})
	if err != nil {
		c.shutdown()
		return nil, fmt.Errorf("adminstate: register node handler: %w", err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced}
	if mgr.synced != nil {
		c.synced = append(c.synced, mgr.synced)
	}
	return c, nil
}

// Run waits for the informer to sync, then runs the one admin-state worker
// until ctx ends. It shuts the queue down and waits for the worker before
// returning.
func (c *Controller) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("adminstate")
	ctx = klog.NewContext(ctx, log)
	defer c.shutdown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return errors.New("adminstate: informers did not sync")
	}
	log.Info("Starting admin-state controller")
	c.health.Start()
	defer c.health.Stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		for c.processNextWorkItem(ctx) {
		}
	})
	<-ctx.Done()
	c.shutdown()
	wg.Wait()
	log.Info("Stopped admin-state controller")
	return nil
}

// HealthChecker reports the controller unhealthy when it is not running or
// one batch has been applied for longer than health.StuckAfter.
func (c *Controller) HealthChecker() cmhealthz.UnnamedHealthChecker { return c.health }

// Name is the controller's name.
func (c *Controller) Name() string { return ControllerAdminState }

func (c *Controller) shutdown() { c.queue.ShutDown() }

// onNodeAdd enqueues every node it sees: a tainted one must go Down, and an
// untainted one may hold an address whose entry is still Down (a restart
// after the taint was removed, or a replacement node reusing the address).
// Verifying costs GETs only, and a batch covers all pending nodes.
func (c *Controller) onNodeAdd(obj any) {
	if n, ok := obj.(*v1.Node); ok {
		c.queue.Add(n.Name)
	}
}

// onNodeUpdate enqueues a node when its supported taints, its addresses,
// its providerID (its NIC-based members) or its UID changed. Cordoning, other taints, labels and status heartbeats do
// not enqueue.
func (c *Controller) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 || o.ResourceVersion != "" && o.ResourceVersion == n.ResourceVersion {
		return // a resync: nothing changed
	}
	if o.UID != n.UID || !slices.Equal(c.mgr.OutOfServiceReasons(o), c.mgr.OutOfServiceReasons(n)) ||
		ipsKey(nodeIPs(o)) != ipsKey(nodeIPs(n)) || o.Spec.ProviderID != n.Spec.ProviderID {
		c.queue.Add(n.Name)
	}
}

// onNodeDelete forgets the node: its backend entries disappear with the
// normal reconcile, so no Azure call is made.
func (c *Controller) onNodeDelete(obj any) {
	n, ok := obj.(*v1.Node)
	if !ok {
		tomb, ok := obj.(cache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if n, ok = tomb.Obj.(*v1.Node); !ok {
			return
		}
	}
	c.forget(n.Name, n.UID)
}

func (c *Controller) forget(name string, uid types.UID) {
	c.mu.Lock()
	delete(c.states, uid)
	delete(c.drained, uid)
	if c.uids[name] == uid {
		delete(c.uids, name)
	}
	c.mu.Unlock()
	c.mgr.Forget(uid)
}

// nodeIPs returns the node's InternalIP addresses.
func nodeIPs(n *v1.Node) []string {
	var out []string
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && a.Address != "" {
			out = append(out, backendpool.CanonicalIP(a.Address))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Mass events (a zone or a whole Spot pool leaving at once): when at least
// burstThreshold nodes became pending while the previous batch was being
// applied, the next batch starts no sooner than burstWindow after the
// previous one did, and takes every node pending by then. Taints set within
// one second of the first then cost two PUTs per pool (the first node's
// batch, which never waits, and one for the rest) instead of one per batch.
// The window is that second plus burstGrace, for the informer to deliver
// the last taints of the wave.
const (
	burstThreshold = 10
	burstGrace     = 100 * time.Millisecond
	burstWindow    = time.Second + burstGrace
)

// burstDelay is how long the next batch waits: zero outside a mass event.
func (c *Controller) burstDelay() time.Duration {
	if !c.burst {
		return 0
	}
	return max(0, burstWindow-c.clock.Since(c.lastBatchStart))
}

// processNextWorkItem takes every pending node (blocking for the first),
// applies them in one batch and requeues failures with backoff. It returns
// false once the queue is shut down.
func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	done := c.health.Busy()
	defer done()
	if wait := c.burstDelay(); wait > 0 {
		select {
		case <-c.clock.After(wait):
		case <-ctx.Done():
		}
	}
	keys := []string{key}
	// Only this worker calls Get, so a positive Len means Get returns at once.
	for c.queue.Len() > 0 {
		k, quit := c.queue.Get()
		if quit {
			break
		}
		keys = append(keys, k)
	}
	defer func() {
		for _, k := range keys {
			c.queue.Done(k)
		}
	}()
	start := c.clock.Now()
	c.syncNodes(ctx, keys)
	c.lastBatchStart = start
	c.burst = c.queue.Len() >= burstThreshold
	return true
}

// syncNodes computes the desired state of each node from the informer cache
// and applies all of them with one Manager call.
func (c *Controller) syncNodes(ctx context.Context, keys []string) {
	log := klog.FromContext(ctx)
	var (
		targets []Target
		nodes   []*v1.Node
	)
	for _, key := range keys {
		node, err := c.nodes.Get(key)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				log.Error(err, "Reading node from the informer cache", "node", key)
				c.queue.AddRateLimited(key)
				continue
			}
			// Deleted: nothing to call (the entries go with the node).
			c.forgetName(key)
			c.queue.Forget(key)
			continue
		}
		members, err := c.mgr.MemberKeys(ctx, node)
		if err != nil {
			log.Error(err, "Resolving the node's NIC-based pool members; retrying with backoff", "node", key)
			c.requeue(key, err)
			continue
		}
		c.adopt(node)
		targets = append(targets, Target{Node: node.Name, UID: node.UID, IPs: nodeIPs(node), Members: members,
			State: c.mgr.DesiredState(node), Pooled: c.mgr.Pooled(node)})
		nodes = append(nodes, node)
	}
	if len(targets) == 0 {
		return
	}
	results := c.mgr.ApplyNodes(ctx, targets)
	for i, r := range results {
		node, t := nodes[i], targets[i]
		if r.Err != nil {
			if ctx.Err() != nil {
				return // shutting down
			}
			log.Error(r.Err, "Setting backend admin state failed; retrying with backoff", "node", node.Name, "state", t.State,
				"retries", c.queue.NumRequeues(node.Name))
			c.recorder.Event(node, v1.EventTypeWarning, EventReasonAdminStateUpdateFailed,
				truncate(fmt.Sprintf("Setting load balancer AdminState %s failed: %v", t.State, r.Err)))
			c.requeue(node.Name, r.Err)
			continue
		}
		c.queue.Forget(node.Name)
		reasons := c.mgr.OutOfServiceReasons(node)
		changed := c.record(node, t.State, reasons, r)
		c.syncDrained(ctx, node, t.State)
		if !changed {
			continue
		}
		log.Info("Backend admin state applied", "node", node.Name, "state", t.State, "reasons", reasons,
			"pools", len(r.Pools), "changedEntries", r.Changed)
		switch {
		case t.State == StateDown && len(r.Pools) == 0:
			// Nothing was written: say so rather than "Down on 0 pools".
			c.recorder.Eventf(node, v1.EventTypeNormal, EventReasonAdminStateDown,
				"No backend pool holds the node (taints: %s): it takes no load-balanced traffic, and a pool that takes it in gets it with AdminState Down", strings.Join(reasons, ", "))
		case t.State == StateDown:
			c.recorder.Eventf(node, v1.EventTypeNormal, EventReasonAdminStateDown,
				"Load balancer AdminState Down on %d backend pool(s) (taints: %s)", len(r.Pools), strings.Join(reasons, ", "))
		case len(r.Pools) == 0:
			c.recorder.Eventf(node, v1.EventTypeNormal, EventReasonAdminStateNone,
				"No backend pool holds the node: nothing to restore; a pool that takes it in gets it with AdminState None")
		default:
			c.recorder.Eventf(node, v1.EventTypeNormal, EventReasonAdminStateNone,
				"Load balancer AdminState None restored on %d backend pool(s)", len(r.Pools))
		}
	}
}

// requeue retries a failed node with the queue's exponential backoff, or,
// when Azure throttled the call and said until when, not before then.
func (c *Controller) requeue(key string, err error) {
	delay := c.limiter.When(key)
	if azure.Classify(err) == azure.ClassThrottled {
		if until, ok := azure.ThrottleRetryAfter(err); ok {
			delay = max(delay, until.Sub(c.clock.Now()))
		}
	}
	c.queue.AddAfter(key, delay)
}

// Admin states the controller sets.
const (
	StateDown State = "Down"
	StateNone State = "None"
)

// adopt makes node.UID the node's current incarnation, forgetting a
// previous one with the same name (a replacement never inherits its state).
func (c *Controller) adopt(node *v1.Node) {
	c.mu.Lock()
	old, ok := c.uids[node.Name]
	c.uids[node.Name] = node.UID
	c.mu.Unlock()
	if ok && old != node.UID {
		c.mu.Lock()
		delete(c.states, old)
		delete(c.drained, old)
		c.mu.Unlock()
		c.mgr.Forget(old)
	}
}

func (c *Controller) forgetName(name string) {
	c.mu.Lock()
	uid, ok := c.uids[name]
	c.mu.Unlock()
	if ok {
		c.forget(name, uid)
	}
}

// record stores the state reported for the node and says whether it
// differs from the previous one (a node not in the out-of-service set is
// None). A node deleted or replaced while its state was being applied is
// not recorded (and gets no event): its record would outlive it.
//
// The record keeps when the state was first applied and, from applies that
// made ARM calls (not Skipped), the pools that hold the node.
func (c *Controller) record(node *v1.Node, s State, reasons []string, r Result) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uids[node.Name] != node.UID {
		return false
	}
	prev, ok := c.states[node.UID]
	if !ok {
		prev = nodeRecord{state: StateNone}
	}
	if sameState(s, StateNone) {
		delete(c.states, node.UID)
		return !sameState(prev.state, s)
	}
	rec := nodeRecord{name: node.Name, state: s, reasons: reasons, since: c.clock.Now(), pools: poolRefs(r)}
	if sameState(prev.state, s) {
		rec.since = prev.since
		if r.Skipped {
			rec.pools = prev.pools
		}
	}
	c.states[node.UID] = rec
	return !sameState(prev.state, s)
}

// OutOfService returns the names of the nodes the controller has taken out
// of rotation, with the taints that caused it.
func (c *Controller) OutOfService() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]string, len(c.states))
	for _, r := range c.states {
		out[r.name] = slices.Clone(r.reasons)
	}
	return out
}

func truncate(s string) string {
	if len(s) <= maxEventMessage {
		return s
	}
	return s[:maxEventMessage-3] + "..."
}
