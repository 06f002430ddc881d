package servicegateway

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/client-go/util/workqueue"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
)

// Operations (metric label op).
const (
	opCreate = "create"
	opUpdate = "update"
	opDelete = "delete"
)

var (
	// errDraining: the deletion waits for the gateway to map no address to
	// the Service any more; the address updater queues it again then.
	errDraining = errors.New("waiting for the service gateway to drop the Service's addresses")
	// errSuperseded: what the attempt was for changed meanwhile (a delete
	// arrived during a create, a newer spec); start over at once.
	errSuperseded = errors.New("superseded by a newer request")
)

// storeCaller labels the engine's waits in the store's metric.
const storeCaller = "ServiceGateway"

func (e *Controller) processNextService(ctx context.Context) bool {
	return e.registrantWork(e.svcQueue, &e.svcBusy, func(uid string) {
		op, gen, deleting, err := e.syncService(ctx, uid)
		e.finish(ctx, uid, op, gen, deleting, err)
	})
}

// registrantWork takes one item of a queue whose work may hand
// registrations to the registrar (Services, egress identities) and runs
// work on it, counting as working and as busy (busy) meanwhile. Deferred
// calls run in reverse: the registrar is poked once this worker no longer
// counts as busy, and before the engine can look idle.
func (e *Controller) registrantWork(q workqueue.TypedRateLimitingInterface[string], busy *atomic.Int32, work func(key string)) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	e.working.Add(1)
	busy.Add(1)
	defer e.working.Add(-1)
	defer e.pokeRegistrar()
	defer busy.Add(-1)
	defer q.Done(key)
	done := e.health.Busy()
	defer done()
	work(key)
	return true
}

// syncService brings one Service's Azure resources to what it wants. A
// panic is recovered and reported as a failed attempt.
func (e *Controller) syncService(ctx context.Context, uid string) (op string, gen int64, deleting bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Service operation panicked", "uid", uid, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	e.mu.Lock()
	st := e.states[uid]
	if st == nil {
		e.mu.Unlock()
		return "", 0, false, nil
	}
	snap := *st
	if e.registrationWaitingLocked(uid) {
		// Its updateServices entry is queued or in flight; the registrar
		// queues it again with the answer.
		e.mu.Unlock()
		return "", snap.gen, snap.deleting, errQueued
	}
	op = opUpdate
	switch {
	case st.deleting:
		op = opDelete
	case st.applied == nil && !e.tracker.Ready(uid), st.op == opCreate && !st.started.IsZero():
		// A create goes on after its registration was sent (errQueued).
		op = opCreate
	}
	if st.started.IsZero() || st.op != op {
		st.started, st.op = e.clock.Now(), op
	}
	e.mu.Unlock()
	if snap.desired == nil && !snap.deleting {
		return "", snap.gen, false, nil // kept as it is (refused at start-up)
	}
	ctx, cancel := context.WithTimeout(ctx, e.opTimeout)
	defer cancel()
	log := klog.FromContext(ctx).WithValues("service", serviceKey(snap.ns, snap.name), "uid", uid, "operation", op)
	ctx = klog.NewContext(ctx, log)
	if snap.deleting {
		return op, snap.gen, true, e.teardown(ctx, &snap)
	}
	return op, snap.gen, false, e.provision(ctx, &snap)
}

// finish records an attempt's outcome and schedules what follows.
func (e *Controller) finish(ctx context.Context, uid, op string, gen int64, deleting bool, err error) {
	log := klog.FromContext(ctx).WithValues("uid", uid, "operation", op)
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[uid]
	if st == nil {
		e.svcQueue.Forget(uid) // deleted, or dropped as gone
		return
	}
	superseded := st.gen != gen || st.deleting != deleting
	switch {
	case errors.Is(err, errDraining):
		return // the address updater queues it when drained (teardown set draining)
	case errors.Is(err, errQueued):
		return // the registrar queues it with the answer
	case err == nil || errors.Is(err, errSuperseded):
		if err == nil && op != "" && !superseded {
			metrics.ObserveServiceGatewayOperation(op, e.clock.Since(st.started))
			st.started, st.op, st.parked = time.Time{}, "", ""
		}
		e.svcQueue.Forget(uid)
		if superseded || errors.Is(err, errSuperseded) {
			e.svcQueue.Add(uid)
		}
		return
	}
	terminal, code := classify(op, err)
	metrics.CountServiceGatewayOperationFailure(op, code)
	if superseded {
		// A newer request replaced what failed: dispatch it with a clean
		// budget.
		e.svcQueue.Forget(uid)
		e.svcQueue.Add(uid)
		return
	}
	ref := st.objectRef()
	switch {
	case terminal:
		st.parked, st.parkedGen = parkTerminal, gen
		e.svcQueue.Forget(uid)
		metrics.CountServiceGatewayParked(parkTerminal)
		log.Error(err, "Service operation refused; parked until the Service changes")
		if ref != nil {
			e.recorder.Eventf(ref, v1.EventTypeWarning, EventConfigurationRejected, "%s of the pod-based load balancer refused: %v", op, err)
		}
	case e.svcQueue.NumRequeues(uid)+1 >= MaxBurst:
		st.parked = parkCooldown
		e.svcQueue.Forget(uid)
		e.svcQueue.AddAfter(uid, Cooldown)
		metrics.CountServiceGatewayParked(parkCooldown)
		log.Error(err, "Service operation failed repeatedly; trying again later", "attempts", MaxBurst, "after", Cooldown)
		if ref != nil {
			e.recorder.Eventf(ref, v1.EventTypeWarning, EventOperationFailed, "%s of the pod-based load balancer failed %d times, trying again in %v: %v", op, MaxBurst, Cooldown, err)
		}
	default:
		metrics.CountServiceGatewayRetry(op)
		log.V(2).Info("Service operation failed; retrying", "err", err, "attempt", e.svcQueue.NumRequeues(uid)+1)
		e.svcQueue.AddRateLimited(uid)
	}
}

// objectRef is a reference for events (nil for an orphan).
func (st *svcState) objectRef() *v1.ObjectReference {
	if st.ns == "" {
		return nil
	}
	return &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: st.ns, Name: st.name, UID: uidOf(st.uid)}
}

// classify sorts a failed attempt: terminal (the Service's spec cannot be
// served: parked until it changes) or transient (retried), with the error
// code bucket of the metrics. Deletions are never terminal.
func classify(op string, err error) (terminal bool, code string) {
	var rej *rejection
	if errors.As(err, &rej) {
		return op != opDelete, "invalid"
	}
	var re *azcore.ResponseError
	hasRE := errors.As(err, &re) && re != nil
	if hasRE && strings.Contains(strings.ToLower(re.ErrorCode), "quota") || hasRE && strings.Contains(re.ErrorCode, "LimitReached") {
		return false, "quota_exceeded"
	}
	switch azure.Classify(err) {
	case azure.ClassCanceled:
		return false, "timeout"
	case azure.ClassThrottled:
		return false, "throttled"
	case azure.ClassConflict:
		return false, "conflict"
	case azure.ClassStale:
		return false, "not_found"
	case azure.ClassRetriedBySDK:
		return false, "internal_error"
	}
	if hasRE && (re.StatusCode == 400 || re.StatusCode == 422) {
		return op != opDelete, "invalid"
	}
	return false, "unknown"
}

// stillWanted checks, between steps, that the attempt is still what the
// Service wants.
func (e *Controller) stillWanted(uid string, gen int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[uid]
	if st == nil || st.deleting || st.gen != gen {
		return errSuperseded
	}
	return nil
}

// provision makes (or updates) a Service's public IP, load balancer and
// gateway registration, in that order, then writes its ingress IP. The
// finalizers are on the Service before the first write.
func (e *Controller) provision(ctx context.Context, snap *svcState) error {
	log := klog.FromContext(ctx)
	svc, err := e.freshService(ctx, snap.ns, snap.name, snap.uid)
	if err != nil {
		return err // a transient lookup failure creates nothing
	}
	if svc == nil {
		e.serviceGone(snap.uid)
		return nil
	}
	if svc.DeletionTimestamp != nil {
		return nil // EnsureLoadBalancerDeleted follows
	}
	if err := e.ensureFinalizers(ctx, svc); err != nil {
		return err
	}
	spec := snap.desired
	if snap.pip != present || snap.pipFamily != spec.family || snap.pipIP == "" {
		if snap.pip == present && snap.pipFamily != spec.family {
			return reject(ReasonUnsupportedDualStack, "the Service changed IP family from %s to %s; recreate it", snap.pipFamily, spec.family)
		}
		pip, err := e.pips.CreateOrUpdate(ctx, e.rg, names.ServicePublicIP(uidOf(snap.uid)), e.publicIP(svc, spec.family), "")
		if err != nil {
			return fmt.Errorf("public IP: %w", err)
		}
		if pip.ID == nil || pip.Properties == nil || pip.Properties.IPAddress == nil {
			return fmt.Errorf("public IP %s has no address yet", names.ServicePublicIP(uidOf(snap.uid)))
		}
		snap.pip, snap.pipID, snap.pipIP, snap.pipFamily = present, *pip.ID, *pip.Properties.IPAddress, spec.family
		e.update(snap.uid, func(st *svcState) {
			st.pip, st.pipID, st.pipIP, st.pipFamily = present, snap.pipID, snap.pipIP, spec.family
		})
		log.V(2).Info("Ensured public IP", "address", snap.pipIP)
		if err := e.stillWanted(snap.uid, snap.gen); err != nil {
			return err
		}
	}
	if !spec.equal(snap.applied) {
		if _, err := e.store.UpdateLB(ctx, storeCaller, snap.uid, lbstore.UpdateOptions{Create: true, AssumeAbsent: snap.lb == absent},
			e.lbMutation(snap.uid, spec, snap.pipID)); err != nil {
			return fmt.Errorf("load balancer: %w", err)
		}
		e.update(snap.uid, func(st *svcState) { st.lb, st.applied = present, spec })
		log.V(2).Info("Ensured load balancer", "rules", len(spec.rules))
		if err := e.stillWanted(snap.uid, snap.gen); err != nil {
			return err
		}
	}
	e.mu.Lock()
	pools, registered := e.tracker.Registered(snap.uid)
	e.mu.Unlock()
	if !registered || len(pools) != 1 || !strings.EqualFold(pools[0], e.poolID(snap.uid)) {
		// The registrar records a success in the tracker and queues the
		// Service again, which then finds it registered.
		err := e.updateService(snap.uid, regRegister)
		if errors.Is(err, errQueued) {
			return err
		}
		return fmt.Errorf("service gateway registration: %w", err)
	}
	e.locQueue.Add(locationsKey)
	if err := e.ensureIngress(ctx, svc, snap.pipIP, spec.family); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	return nil
}

// update changes a Service's state under the lock (if it still exists).
func (e *Controller) update(uid string, fn func(*svcState)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.states[uid]; st != nil {
		fn(st)
	}
}

// serviceGone handles a Service found deleted or replaced (another UID)
// before it was provisioned: with nothing in Azure its record is dropped,
// otherwise it is torn down.
func (e *Controller) serviceGone(uid string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[uid]
	if st == nil {
		return
	}
	_, registered := e.tracker.Registered(uid)
	if !registered && st.pip != present && st.lb != present {
		e.forgetLocked(uid)
		return
	}
	st.deleting, st.recreate = true, false
	e.updateReadyLocked(uid)
	e.svcQueue.Add(uid)
}

// forgetLocked drops a Service's record and what the tracker wants for it.
func (e *Controller) forgetLocked(uid string) {
	st := e.states[uid]
	if st == nil {
		return
	}
	delete(e.states, uid)
	key := serviceKey(st.ns, st.name)
	if e.byName[key] == uid {
		delete(e.byName, key)
	}
	e.tracker.SetReady(uid, false)
	e.tracker.SetDesired(uid, nil)
	delete(e.regFailures, uid)
}

// updateReadyLocked sets whether the Service's addresses may be sent:
// registered in the gateway, not being deleted and not withheld. It
// queues the address updater when that changes.
func (e *Controller) updateReadyLocked(uid string) {
	st := e.states[uid]
	_, registered := e.tracker.Registered(uid)
	if e.tracker.SetReady(uid, st != nil && !st.deleting && !st.withheld && registered) {
		e.locQueue.Add(locationsKey)
	}
}

// teardown removes a Service's addresses from the gateway first; when the
// gateway maps none to it any more: unlink its pool from its gateway
// service, delete the load balancer, unregister the service, delete the
// public IP, remove the finalizers. A missing resource counts as removed;
// any other failure fails the attempt (it is retried from the first step
// not done).
func (e *Controller) teardown(ctx context.Context, snap *svcState) error {
	log := klog.FromContext(ctx)
	uid := snap.uid
	e.mu.Lock()
	e.updateReadyLocked(uid)
	mapped := e.tracker.Mapped(uid)
	pools, registered := e.tracker.Registered(uid)
	if st := e.states[uid]; st != nil && mapped {
		// Set before the address updater can run, so that it finds the
		// Service waiting when it has drained it.
		st.draining = true
	}
	e.mu.Unlock()
	if mapped {
		e.locQueue.Add(locationsKey)
		return errDraining
	}
	if registered && len(pools) > 0 {
		// A success leaves it registered without pool in the tracker.
		if err := e.updateService(uid, regUnlink); errors.Is(err, errQueued) {
			return err
		} else if err != nil && azure.Classify(err) != azure.ClassStale {
			metrics.CountServiceGatewayDeleteStepFailure("unlink")
			return fmt.Errorf("unlink the pool from the service gateway: %w", err)
		}
	}
	if snap.lb != absent {
		_, err := e.store.UpdateLB(ctx, storeCaller, uid, lbstore.UpdateOptions{}, dropFrontends)
		if err != nil {
			metrics.CountServiceGatewayDeleteStepFailure("load_balancer")
			return fmt.Errorf("delete load balancer: %w", err)
		}
		e.update(uid, func(st *svcState) { st.lb, st.applied = absent, nil })
		log.V(2).Info("Deleted load balancer")
	}
	if registered {
		// A success removes it from the tracker: the next attempt finds
		// this step done.
		err := e.updateService(uid, regUnregister)
		switch {
		case errors.Is(err, errQueued):
			return err
		case isOverlayMappings(err):
			// NRP still maps addresses to it: the mirror was wrong. Read the
			// address locations again and drain before the next attempt.
			e.mu.Lock()
			e.refreshNRP = true
			if st := e.states[uid]; st != nil {
				st.draining = true // the address updater queues it again once drained
			}
			e.mu.Unlock()
			e.locQueue.Add(locationsKey)
			metrics.CountServiceGatewayDeleteStepFailure("unregister")
			return fmt.Errorf("unregister from the service gateway: %w", err)
		case err != nil && azure.Classify(err) != azure.ClassStale:
			metrics.CountServiceGatewayDeleteStepFailure("unregister")
			return fmt.Errorf("unregister from the service gateway: %w", err)
		}
		e.mu.Lock()
		e.tracker.SetRegistered(uid, nil)
		e.mu.Unlock()
		log.V(2).Info("Unregistered from the service gateway")
	}
	if snap.pip != absent {
		if err := e.pips.Delete(ctx, e.rg, names.ServicePublicIP(uidOf(uid))); err != nil && azure.Classify(err) != azure.ClassStale {
			metrics.CountServiceGatewayDeleteStepFailure("public_ip")
			return fmt.Errorf("delete public IP: %w", err)
		}
		e.update(uid, func(st *svcState) { st.pip, st.pipID, st.pipIP = absent, "", "" })
	}
	if snap.ns != "" {
		if err := e.removeFinalizers(ctx, snap.ns, snap.name, uid); err != nil {
			metrics.CountServiceGatewayDeleteStepFailure("finalizer")
			return fmt.Errorf("remove finalizers: %w", err)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[uid]
	if st == nil {
		return nil
	}
	if st.recreate {
		// LoadBalancer -> ClusterIP -> LoadBalancer during the deletion:
		// start again as a new Service, with a clean retry budget.
		st.deleting, st.recreate, st.applied, st.parked = false, false, nil, ""
		st.gen++
		metrics.ObserveServiceGatewayOperation(opDelete, e.clock.Since(st.started))
		st.started = time.Time{}
		e.svcQueue.Forget(uid)
		e.svcQueue.Add(uid)
		log.Info("Deleted the pod-based load balancer; creating it again")
		return nil
	}
	metrics.ObserveServiceGatewayOperation(opDelete, e.clock.Since(st.started))
	if st.ns == "" {
		metrics.CountServiceGatewayOrphanCleaned()
	}
	e.forgetLocked(uid)
	log.Info("Deleted the pod-based load balancer")
	return nil
}

func isOverlayMappings(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re != nil && strings.EqualFold(re.ErrorCode, "ServiceWithOverlayMappingsCannotBeDeleted")
}

// dropFrontends removes every frontend: the store deletes a load balancer
// left without one.
func dropFrontends(lb *armnetwork.LoadBalancer) (bool, error) {
	if lb.Properties == nil {
		lb.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	lb.Properties.FrontendIPConfigurations = nil
	return true, nil
}
