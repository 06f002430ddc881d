package servicegateway

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
)

// processNextEndpoints recomputes what one Service's endpoints want.
func (e *Controller) processNextEndpoints(ctx context.Context) bool {
	key, quit := e.epQueue.Get()
	if quit {
		return false
	}
	defer e.epQueue.Done(key)
	e.working.Add(1)
	defer e.working.Add(-1)
	if err := e.syncEndpoints(key); err != nil {
		klog.FromContext(ctx).V(2).Info("Reading endpoints failed; retrying", "service", key, "err", err)
		e.epQueue.AddRateLimited(key)
		return true
	}
	e.epQueue.Forget(key)
	return true
}

// syncEndpoints reads a Service's ready endpoints from the informers and
// hands them to the tracker. Only a Service the engine has a record of is
// followed; its record is created by EnsureLoadBalancer (or at start-up),
// which queues this too.
func (e *Controller) syncEndpoints(key string) error {
	e.mu.Lock()
	uid := e.byName[key]
	e.mu.Unlock()
	if uid == "" {
		e.mu.Lock()
		e.indexNodesLocked(key, nil)
		e.mu.Unlock()
		return nil
	}
	ns, name := splitKey(key)
	set, err := serviceEndpoints(ns, name, uidOf(uid), e.bySvc, e.nodes)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byName[key] != uid {
		return nil // replaced meanwhile; the new one is queued
	}
	e.indexNodesLocked(key, set.nodes)
	if e.tracker.SetDesired(uid, set.addrs) && e.tracker.Ready(uid) {
		e.locQueue.Add(locationsKey)
	}
	return nil
}

// indexNodesLocked records which nodes a Service has endpoints on (for node
// events).
func (e *Controller) indexNodesLocked(key string, nodes map[string]struct{}) {
	for n := range e.svcNodes[key] {
		if _, still := nodes[n]; !still {
			delete(e.nodeSvcs[n], key)
			if len(e.nodeSvcs[n]) == 0 {
				delete(e.nodeSvcs, n)
			}
		}
	}
	if len(nodes) == 0 {
		delete(e.svcNodes, key)
		return
	}
	for n := range nodes {
		if e.nodeSvcs[n] == nil {
			e.nodeSvcs[n] = map[string]struct{}{}
		}
		e.nodeSvcs[n][key] = struct{}{}
	}
	e.svcNodes[key] = nodes
}

// processNextLocations sends one updateAddressLocations with everything
// that changed. The queue has one key, so only one is in flight; what
// arrives meanwhile re-queues the key and goes in the next one.
func (e *Controller) processNextLocations(ctx context.Context) bool {
	key, quit := e.locQueue.Get()
	if quit {
		return false
	}
	defer e.locQueue.Done(key)
	e.working.Add(1)
	defer e.working.Add(-1)
	done := e.health.Busy()
	defer done()
	retry, err := e.syncLocations(ctx)
	switch {
	case err != nil && retry:
		klog.FromContext(ctx).V(2).Info("Address update failed; retrying", "err", err, "attempt", e.locQueue.NumRequeues(key)+1)
		e.locQueue.AddRateLimited(key)
	case err != nil:
		klog.FromContext(ctx).Error(err, "Service gateway refused an address update; given up until those addresses change")
		e.locQueue.Forget(key)
	default:
		e.locQueue.Forget(key)
	}
	return true
}

// syncLocations brings the gateway's address locations to what the ready
// Services want. It reports whether a failure is to be retried.
func (e *Controller) syncLocations(ctx context.Context) (retry bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Address update panicked", "panic", r, "stack", string(debug.Stack()))
			retry, err = true, fmt.Errorf("panic: %v", r)
		}
	}()
	if err := e.refreshIfNeeded(ctx); err != nil {
		return true, err
	}
	e.mu.Lock()
	b := e.tracker.Diff()
	e.mu.Unlock()
	if b == nil {
		e.queueDrained()
		return false, nil
	}
	retry, err = e.send(ctx, b)
	e.queueDrained()
	if err == nil {
		return false, nil
	}
	return retry || e.deletionWaits(), err
}

// send posts a batch and folds the outcome into the tracker. A batch the
// gateway refuses (400/422) is split in halves to find and give up only
// the locations it refuses; transient failures return every key for the
// next attempt.
func (e *Controller) send(ctx context.Context, b *batch) (retry bool, err error) {
	log := klog.FromContext(ctx)
	start := e.clock.Now()
	callCtx, cancel := context.WithTimeout(ctx, e.opTimeout)
	err = e.gw.UpdateAddressLocations(callCtx, e.rg, names.ServiceGateway, b.Request)
	cancel()
	d := e.clock.Since(start)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err == nil:
		e.tracker.Applied(b)
		metrics.ObserveServiceGatewayLocationSync("success", d, b.Addresses)
		log.V(4).Info("Updated address locations", "locations", b.Locations, "addresses", b.Addresses, "took", d)
		return false, nil
	case retryable(err):
		e.tracker.Failed(b)
		metrics.ObserveServiceGatewayLocationSync("retry", d, b.Addresses)
		return true, err
	}
	metrics.ObserveServiceGatewayLocationSync("terminal", d, b.Addresses)
	if first, second, ok := e.tracker.Split(b); ok {
		e.mu.Unlock()
		retry1, err1 := e.send(ctx, first)
		retry2, err2 := e.send(ctx, second)
		e.mu.Lock()
		return retry1 || retry2, errors.Join(err1, err2)
	}
	if e.deletionWaitsLocked() {
		e.tracker.Failed(b)
		return true, err
	}
	e.tracker.Abandon(b)
	metrics.CountServiceGatewayLocationAbandoned(errorCode(err))
	return false, err
}

// retryable: everything but the gateway refusing the request (400, 422).
func retryable(err error) bool {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re != nil && (re.StatusCode == 400 || re.StatusCode == 422) && azure.Classify(err) == azure.ClassOther {
		return false
	}
	return true
}

func errorCode(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re != nil && re.ErrorCode != "" {
		return re.ErrorCode
	}
	return "unknown"
}

// deletionWaits reports whether a Service deletion waits for the gateway to
// drop its addresses (then refused updates are retried, not given up).
func (e *Controller) deletionWaits() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deletionWaitsLocked()
}

func (e *Controller) deletionWaitsLocked() bool {
	for uid, st := range e.states {
		if st.deleting && e.tracker.Mapped(uid) {
			return true
		}
	}
	return e.egressDeletionWaitsLocked()
}

// queueDrained queues the deletions whose addresses the gateway no longer
// maps.
func (e *Controller) queueDrained() {
	e.mu.Lock()
	var ready []string
	for uid, st := range e.states {
		if st.deleting && st.draining && !e.tracker.Mapped(uid) {
			st.draining = false
			ready = append(ready, uid)
		}
	}
	egress := e.drainedEgressLocked()
	e.mu.Unlock()
	for _, uid := range ready {
		e.svcQueue.Add(uid)
	}
	for _, id := range egress {
		e.egQueue.Add(id)
	}
}

// refreshIfNeeded reads the address locations again when the mirror was
// found wrong.
func (e *Controller) refreshIfNeeded(ctx context.Context) error {
	e.mu.Lock()
	need := e.refreshNRP
	e.mu.Unlock()
	if !need {
		return nil
	}
	locs, err := e.gw.GetAddressLocations(ctx, e.rg, names.ServiceGateway)
	if err != nil {
		return fmt.Errorf("read address locations: %w", err)
	}
	e.mu.Lock()
	e.tracker.LoadNRP(locs)
	e.refreshNRP = false
	e.mu.Unlock()
	return nil
}
