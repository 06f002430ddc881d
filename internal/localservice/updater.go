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
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
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
	interval   time.Duration
	maxRetries int
	sub        string
	source     string

	synced []cache.InformerSynced

	// mu guards the queue.
	mu    sync.Mutex
	queue *queue
}

// NewUpdater builds the updater and registers its EndpointSlice handler.
// Call Run to start the tick loop.
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
		interval:   interval,
		maxRetries: EffectiveMaxRetries(opts.MaxRetries),
		sub:        opts.SubscriptionID,
		source:     src,
		queue:      newQueue(),
	}
	reg, err := opts.EndpointSlices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    u.onSliceAdd,
		UpdateFunc: u.onSliceUpdate,
		DeleteFunc: u.onSliceDelete,
	})
	if err != nil {
		return nil, fmt.Errorf("localservice: register EndpointSlice handler: %w", err)
	}
	u.synced = []cache.InformerSynced{reg.HasSynced, opts.Nodes.Informer().HasSynced, opts.Services.Informer().HasSynced}
	return u, nil
}

// Interval is the effective tick.
func (u *Updater) Interval() time.Duration { return u.interval }

// MaxRetries is the effective retry budget.
func (u *Updater) MaxRetries() int { return u.maxRetries }

// QueueLen is the number of queued desired states (at most one per
// Service pool).
func (u *Updater) QueueLen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.queue.len()
}

// Run waits for the informers to sync, then applies the queue every
// Interval until ctx ends. Entries still queued when it returns (parked
// ones included) are dropped without events: a new leader rebuilds the
// pools from the Service reconcile.
func (u *Updater) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("localservice")
	ctx = klog.NewContext(ctx, log)
	defer u.discard(ctx)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, u.synced...) {
		return errors.New("localservice: informers did not sync")
	}
	log.Info("Starting local service backend pool updater", "interval", u.interval, "maxRetries", u.maxRetries)
	ticker := u.clock.NewTicker(u.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("Stopped local service backend pool updater")
			return nil
		case <-ticker.C():
			u.process(ctx)
		}
	}
}

// discard drops the queue on shutdown, quietly.
func (u *Updater) discard(ctx context.Context) {
	u.mu.Lock()
	n := len(u.queue.drain())
	u.mu.Unlock()
	if n > 0 {
		klog.FromContext(ctx).V(2).Info("Dropped queued local service pool updates on shutdown", "count", n)
	}
}
