package servicegateway

import (
	"net/netip"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// This file is what the pod readiness gate (internal/readinessgate) needs
// of the engine, behind interfaces each side defines: neither package
// imports the other; cmd/azlb-controller-manager wires them.

// GatedPods tells the engine which endpoints are held back only by azlb's
// pod readiness gate.
type GatedPods interface {
	// HeldByGate reports whether the pod namespace/name is not ready only
	// because azlb's readiness gate on it is not True yet (its containers
	// are ready, it is not terminating).
	HeldByGate(namespace, name string) bool
}

// UseGatedPods makes the engine register the addresses of endpoints that
// are not ready only because of azlb's readiness gate, as if they were
// ready: the gate turns True once the gateway holds the address, and the
// pod is not Ready (so its endpoint not ready) before that, so without
// this neither would ever happen. Call it before Run.
func (e *Controller) UseGatedPods(g GatedPods) {
	if g != nil {
		e.bySvc = gatedSlices{inner: e.bySvc, gated: g}
	}
}

// HoldsPodAddress reports whether the gateway holds (its address locations
// map) one of the pod addresses ips for the Service with this UID, as far
// as the engine's mirror of the gateway knows. managed is false when the
// engine has no record of the Service (not pod-based, not azlb's, or not
// admitted yet), and when the Service is withheld (a source restriction
// azlb cannot enforce: its pods are kept out of the gateway until the
// Service changes, so a gate waiting for them would only hold the rollout
// until its timeout).
func (e *Controller) HoldsPodAddress(svc types.UID, ips ...netip.Addr) (held, managed bool) {
	uid := uidKey(svc)
	e.mu.Lock()
	defer e.mu.Unlock()
	if st, ok := e.states[uid]; !ok || st.withheld {
		return false, false
	}
	for k := range e.tracker.nrpBy[uid] {
		for _, ip := range ips {
			if k.addr == ip.Unmap() {
				return true, true
			}
		}
	}
	return false, true
}

// RecheckEndpoints reads the Service's endpoints again: a pod's gate state
// changed, which changes no EndpointSlice.
func (e *Controller) RecheckEndpoints(namespace, service string) {
	e.epQueue.Add(serviceKey(namespace, service))
}

// gatedSlices lists a Service's slices with every endpoint held back only
// by azlb's readiness gate shown as ready (on a copy: the informer's objects
// are never changed).
type gatedSlices struct {
	inner sliceSource
	gated GatedPods
}

func (g gatedSlices) List(ns, service string) ([]*discoveryv1.EndpointSlice, error) {
	list, err := g.inner.List(ns, service)
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, len(list))
	for i, s := range list {
		out[i] = s
		var cp *discoveryv1.EndpointSlice
		for j, ep := range s.Endpoints {
			if !g.heldByGate(s.Namespace, ep) {
				continue
			}
			if cp == nil {
				cp = s.DeepCopy()
				out[i] = cp
			}
			cp.Endpoints[j].Conditions.Ready = ptr.To(true)
		}
	}
	return out, nil
}

// heldByGate: a pod's endpoint that is neither ready nor terminating, whose
// pod the gate holds back.
func (g gatedSlices) heldByGate(ns string, ep discoveryv1.Endpoint) bool {
	c := ep.Conditions
	if c.Ready == nil || *c.Ready || (c.Terminating != nil && *c.Terminating) {
		return false
	}
	ref := ep.TargetRef
	if ref == nil || ref.Kind != "Pod" || ref.Name == "" {
		return false
	}
	if ref.Namespace != "" {
		ns = ref.Namespace
	}
	return g.gated.HeldByGate(ns, ref.Name)
}
