package servicegateway

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// Event reasons besides the admission reasons (spec.go).
const (
	// EventConfigurationRejected: Azure refused what the Service asks for;
	// nothing is retried until the Service changes.
	EventConfigurationRejected = "ServiceGatewayConfigurationRejected"
	// EventOperationFailed: an operation failed MaxBurst times in a row; it
	// is tried again after Cooldown.
	EventOperationFailed = "ServiceGatewayOperationFailed"
)

// ErrNotInitialized is returned by the LoadBalancer methods before the
// engine runs on this replica (it runs on the elected leader).
var ErrNotInitialized = errors.New("ServiceGateway LoadBalancer is not initialized")

// Balancer is the cloudprovider.LoadBalancer of pod-based load balancing:
// the service controller's calls, handed to the Controller once one is
// attached (the engine starts with the controllers, after the cloud is
// built). Until then, and until the engine has read Azure's state, the
// calls wait (bounded by their context) or fail with ErrNotInitialized.
type Balancer struct {
	engine atomic.Pointer[Controller]
}

var _ cloudprovider.LoadBalancer = (*Balancer)(nil)

// NewBalancer returns a Balancer without an engine.
func NewBalancer() *Balancer { return &Balancer{} }

// Attach hands the calls to e.
func (b *Balancer) Attach(e *Controller) { b.engine.Store(e) }

// ready returns the engine once it has initialized (waiting for that, as
// long as ctx allows).
func (b *Balancer) ready(ctx context.Context) (*Controller, error) {
	e := b.engine.Load()
	if e == nil {
		return nil, ErrNotInitialized
	}
	select {
	case <-e.initialized:
		return e, nil
	case <-ctx.Done():
		return nil, errors.Join(ErrNotInitialized, ctx.Err())
	}
}

// GetLoadBalancerName is the Kubernetes default name.
func (b *Balancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// GetLoadBalancer reports a load balancer for every Service the engine
// tracks (or the gateway holds), with the Service's current status.
func (b *Balancer) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	e, err := b.ready(ctx)
	if err != nil {
		return nil, false, err
	}
	if svc == nil || svc.UID == "" {
		return nil, false, nil
	}
	uid := uidKey(svc.UID)
	e.mu.Lock()
	_, tracked := e.states[uid]
	_, registered := e.tracker.Registered(uid)
	e.mu.Unlock()
	return svc.Status.LoadBalancer.DeepCopy(), tracked || registered, nil
}

// EnsureLoadBalancer admits the Service (a refusal is a Warning event and
// an error, and creates nothing), hands its load balancer to the engine and
// returns the Service's status unchanged: the engine writes the ingress IP
// itself once the Service is registered.
func (b *Balancer) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	if svc == nil || svc.UID == "" {
		return nil, errors.New("servicegateway: a Service with a UID is required")
	}
	e, err := b.ready(ctx)
	if err != nil {
		return nil, err
	}
	status := svc.Status.LoadBalancer.DeepCopy()
	if svc.DeletionTimestamp != nil {
		return status, nil
	}
	spec, rej := admit(svc)
	if rej != nil {
		msg := rej.message
		if rej.reason == ReasonUnsupportedAccessControl && e.withhold(svc) {
			msg += "; its pods are withdrawn from the load balancer until then"
		}
		e.recorder.Eventf(svc, v1.EventTypeWarning, rej.reason, "%s", msg)
		return nil, rej
	}
	if keys := unsupportedAnnotations(svc); e.told.ShouldReport(svc, keys) {
		e.recorder.Eventf(svc, v1.EventTypeWarning, ReasonUnsupportedAnnotation,
			"Annotations pod-based load balancing does not implement are ignored: %s (see docs/container-load-balancer.md)", strings.Join(keys, ", "))
	}
	e.want(ctx, svc, spec)
	return status, nil
}

// withhold stops sending a provisioned Service's addresses to the gateway
// (the gateway then drops them): a source restriction azlb cannot enforce
// must not leave the Service open to every source. Its load balancer,
// public IP and registration stay, so removing the restriction brings the
// pods back with the same IP. It reports whether azlb tracks the Service.
func (e *Controller) withhold(svc *v1.Service) bool {
	uid := uidKey(svc.UID)
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.states[uid]
	if st == nil || st.deleting {
		return false
	}
	st.withheld = true
	e.updateReadyLocked(uid)
	return true
}

// want records what a Service wants and schedules the work.
func (e *Controller) want(ctx context.Context, svc *v1.Service, spec *lbSpec) {
	uid := uidKey(svc.UID)
	key := serviceKey(svc.Namespace, svc.Name)
	e.mu.Lock()
	st := e.states[uid]
	if st != nil && st.withheld {
		st.withheld = false // admitted again: its addresses may be sent
		e.updateReadyLocked(uid)
	}
	switch {
	case st == nil:
		st = &svcState{uid: uid, ns: svc.Namespace, name: svc.Name, desired: spec, gen: 1}
		e.states[uid] = st
		if prev := e.byName[key]; prev != "" && prev != uid {
			e.tracker.SetDesired(prev, nil) // the replaced Service's endpoints are not ours
		}
		e.byName[key] = uid
		klog.FromContext(ctx).V(2).Info("New pod-based load balancer", "service", key, "uid", uid)
	case st.deleting:
		st.recreate = true
		if !spec.equal(st.desired) {
			st.desired = spec
			st.gen++
		}
	case !spec.equal(st.desired):
		st.desired = spec
		st.gen++
		st.parked = ""
	case st.parked == parkTerminal:
		e.mu.Unlock()
		return // unchanged: stays parked until the Service changes
	default:
		e.mu.Unlock()
		return
	}
	e.mu.Unlock()
	e.svcQueue.Add(uid)
	e.epQueue.Add(key)
}

// UpdateLoadBalancer does nothing: pods are reached directly, so node
// changes do not concern the load balancer.
func (b *Balancer) UpdateLoadBalancer(ctx context.Context, _ string, _ *v1.Service, _ []*v1.Node) error {
	_, err := b.ready(ctx)
	return err
}

// EnsureLoadBalancerDeleted schedules the teardown and returns: azlb's
// finalizer keeps the Service until it is done. It clears a recreation
// queued by an earlier EnsureLoadBalancer.
func (b *Balancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	e, err := b.ready(ctx)
	if err != nil {
		return err
	}
	if svc == nil || svc.UID == "" {
		return nil
	}
	e.told.Forget(svc.UID)
	e.unwant(svc)
	return nil
}

// unwant marks a Service for deletion.
func (e *Controller) unwant(svc *v1.Service) {
	uid := uidKey(svc.UID)
	e.mu.Lock()
	st := e.states[uid]
	_, registered := e.tracker.Registered(uid)
	switch {
	case st == nil && !registered && !slices.Contains(svc.Finalizers, Finalizer):
		e.mu.Unlock()
		return // nothing of it anywhere
	case st == nil:
		st = &svcState{uid: uid, ns: svc.Namespace, name: svc.Name, gen: 1}
		e.states[uid] = st
		if e.byName[serviceKey(svc.Namespace, svc.Name)] == "" {
			e.byName[serviceKey(svc.Namespace, svc.Name)] = uid
		}
	case st.deleting:
		st.recreate = false // a repeated delete clears a queued recreation
		e.mu.Unlock()
		e.svcQueue.Add(uid) // and re-arms a parked deletion
		return
	}
	st.deleting, st.recreate, st.parked = true, false, ""
	e.updateReadyLocked(uid)
	e.mu.Unlock()
	// A deletion starts with a clean retry budget.
	e.svcQueue.Forget(uid)
	e.svcQueue.Add(uid)
}
