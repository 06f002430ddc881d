package localservice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cmhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/health"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/lbstore"
)

// Updater keeps the dedicated backend pools of ExternalTrafficPolicy=Local
// Services current with the nodes that run their endpoints. See the package
// documentation and docs/multiple-load-balancers.md.
type Updater struct {
	clock      clock.WithTicker
	recorder   record.EventRecorder
	store      *lbstore.Store
	policy     backendpool.Policy
	nodes      corelisters.NodeLister
	services   corelisters.ServiceLister
	slices     discoverylisters.EndpointSliceLister
	class      lbclass.Class
	interval   time.Duration
	maxRetries int
	sub        string
	source     string
	health     *health.Worker

	synced []cache.InformerSynced
	// queue holds the keys (lower-cased pool names) of pools due for an
	// attempt; its rate limiter is the pools' own timing (see poolTiming).
	queue workqueue.TypedRateLimitingInterface[string]

	// mu guards pools and windows.
	mu    sync.Mutex
	pools map[string]*poolState
	// windows remembers when each recently attempted pool's batching window
	// started, also after its work is done: a change within the window
	// waits for its end. Entries older than the interval are pruned.
	windows map[string]time.Time
}

// NewUpdater builds the updater and registers its EndpointSlice handler.
// Call Run.
func NewUpdater(opts Options) (*Updater, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	rec := opts.Recorder
	if rec == nil {
		rec = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	interval := opts.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	src := opts.Source
	if src == "" {
		src = azure.DefaultSource
	}
	u := &Updater{
		clock:      clk,
		recorder:   rec,
		store:      opts.Store,
		policy:     opts.Policy,
		nodes:      opts.Nodes.Lister(),
		services:   opts.Services.Lister(),
		slices:     opts.EndpointSlices.Lister(),
		class:      opts.Class,
		interval:   interval,
		maxRetries: EffectiveMaxRetries(opts.MaxRetries),
		sub:        opts.SubscriptionID,
		source:     src,
		health:     &health.Worker{Clock: clk},
		pools:      map[string]*poolState{},
		windows:    map[string]time.Time{},
	}
	u.queue = workqueue.NewTypedRateLimitingQueueWithConfig[string](poolTiming{u},
		workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueName, Clock: clk})
	reg, err := opts.EndpointSlices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    u.onSliceAdd,
		UpdateFunc: u.onSliceUpdate,
		DeleteFunc: u.onSliceDelete,
	})
	if err != nil {
		u.queue.ShutDown()
		return nil, fmt.Errorf("localservice: register EndpointSlice handler: %w", err)
	}
	u.synced = []cache.InformerSynced{reg.HasSynced, opts.Nodes.Informer().HasSynced, opts.Services.Informer().HasSynced}
	return u, nil
}

// Interval is the batching window of a pool
// (loadBalancerBackendPoolUpdateIntervalInSeconds).
func (u *Updater) Interval() time.Duration { return u.interval }

// MaxRetries is the effective retry budget.
func (u *Updater) MaxRetries() int { return u.maxRetries }

// QueueLen is the number of pools with work to do (waiting for their
// window, parked, retrying, or due).
func (u *Updater) QueueLen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.pools)
}

// Name is the controller's name.
func (u *Updater) Name() string { return ControllerName }

// HealthChecker reports the updater unhealthy when it is not running or one
// batch has been applied for longer than health.StuckAfter.
func (u *Updater) HealthChecker() cmhealthz.UnnamedHealthChecker { return u.health }

// Run waits for the informers to sync, then applies due pools with one
// worker until ctx ends. Pools still waiting when it returns are dropped
// without events: a new leader's Service reconcile fills every pool from
// the current endpoints.
func (u *Updater) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("localservice")
	ctx = klog.NewContext(ctx, log)
	defer u.discard(ctx)
	defer u.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, u.synced...) {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return errors.New("localservice: informers did not sync")
	}
	log.Info("Starting local service backend pool updater", "interval", u.interval, "maxRetries", u.maxRetries)
	u.health.Start()
	defer u.health.Stop()
	var wg sync.WaitGroup
	wg.Go(func() {
		for u.processNextWorkItem(ctx) {
		}
	})
	<-ctx.Done()
	u.queue.ShutDown()
	wg.Wait()
	log.Info("Stopped local service backend pool updater")
	return nil
}

// discard drops the pools' work on shutdown, quietly.
func (u *Updater) discard(ctx context.Context) {
	u.mu.Lock()
	n := len(u.pools)
	u.pools, u.windows = map[string]*poolState{}, map[string]time.Time{}
	u.mu.Unlock()
	if n > 0 {
		klog.FromContext(ctx).V(2).Info("Dropped pending local service pool updates on shutdown", "pools", n)
	}
}

// processNextWorkItem takes every due pool (blocking for the first) and
// applies them in one batch: one store round, so any number of pools cost one
// GET and at most one PUT each. It returns false once the queue is shut
// down. Only this worker calls Get, so a positive Len means Get returns at
// once.
func (u *Updater) processNextWorkItem(ctx context.Context) bool {
	k, quit := u.queue.Get()
	if quit {
		return false
	}
	keys := []string{k}
	for u.queue.Len() > 0 {
		k, quit := u.queue.Get()
		if quit {
			break
		}
		keys = append(keys, k)
	}
	done := u.health.Busy()
	defer done()
	defer func() {
		for _, k := range keys {
			u.queue.Done(k)
		}
	}()
	u.sync(ctx, keys)
	return true
}

// schedule puts a pool on the queue for when it is ready: at once when its
// window is over and it is not parked (the leading edge of a burst),
// otherwise when that time comes. The caller holds mu.
func (u *Updater) schedule(k string, st *poolState) {
	if d := st.readyAt(u.interval).Sub(u.clock.Now()); d > 0 {
		u.queue.AddAfter(k, d)
		return
	}
	u.queue.Add(k)
}

// poolTiming is the queue's rate limiter: a pool put back with
// AddRateLimited waits for its own readiness (batching window, Retry-After);
// its retry budget is kept in its poolState.
type poolTiming struct{ u *Updater }

func (t poolTiming) When(k string) time.Duration {
	t.u.mu.Lock()
	defer t.u.mu.Unlock()
	st, ok := t.u.pools[k]
	if !ok {
		return 0
	}
	return max(0, st.readyAt(t.u.interval).Sub(t.u.clock.Now()))
}

func (t poolTiming) Forget(string) {}

func (t poolTiming) NumRequeues(k string) int {
	t.u.mu.Lock()
	defer t.u.mu.Unlock()
	if st, ok := t.u.pools[k]; ok {
		return st.retries
	}
	return 0
}
