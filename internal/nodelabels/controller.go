package nodelabels

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Name names the controller in logs; QueueName its workqueue (metrics).
const (
	Name      = "node-labels"
	QueueName = "azlb_node_labels"
	// SyncKey is the one work item: every sync covers all nodes.
	SyncKey = "cluster-pools"
)

// Syncer brings the cluster pools in line with the nodes' labels (the
// provider).
type Syncer interface {
	SyncClusterPools(ctx context.Context) error
}

// Controller enqueues a cluster pool sync when a node's labels change.
type Controller struct {
	syncer Syncer
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// NewController registers the node handler. limiter nil: client-go's
// default controller rate limiter.
func NewController(nodes coreinformers.NodeInformer, syncer Syncer, limiter workqueue.TypedRateLimiter[string]) (*Controller, error) {
	if nodes == nil || syncer == nil {
		return nil, errors.New("nodelabels: NewController: nodes and syncer are required")
	}
	if limiter == nil {
		limiter = workqueue.DefaultTypedControllerRateLimiter[string]()
	}
	c := &Controller{
		syncer: syncer,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[string]{Name: QueueName}),
	}
	reg, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: c.onNodeUpdate})
	if err != nil {
		c.queue.ShutDown()
		return nil, fmt.Errorf("nodelabels: register node handler: %w", err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced}
	return c, nil
}

// Name is the controller's name.
func (c *Controller) Name() string { return Name }

// onNodeUpdate enqueues the sync when the node's labels changed or the node
// was replaced under the same name.
func (c *Controller) onNodeUpdate(oldObj, newObj any) {
	o, ok1 := oldObj.(*v1.Node)
	n, ok2 := newObj.(*v1.Node)
	if !ok1 || !ok2 {
		return
	}
	if o.UID != n.UID || !maps.Equal(o.Labels, n.Labels) {
		c.queue.Add(SyncKey)
	}
}

// Run waits for the informer to sync, then runs workers until ctx ends; it
// shuts the queue down and waits for the workers before returning.
func (c *Controller) Run(ctx context.Context, workers int) error {
	log := klog.FromContext(ctx).WithName(Name)
	ctx = klog.NewContext(ctx, log)
	defer c.queue.ShutDown()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return errors.New("nodelabels: informers did not sync")
	}
	log.Info("Starting node-label controller")
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Go(func() {
			for c.processNextWorkItem(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	log.Info("Stopped node-label controller")
	return nil
}

func (c *Controller) processNextWorkItem(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Syncing cluster pools after a node label change; will retry", "key", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

func (c *Controller) sync(ctx context.Context, key string) error {
	klog.FromContext(ctx).V(2).Info("Node labels changed: syncing cluster pools", "key", key)
	return c.syncer.SyncClusterPools(ctx)
}
