package localservice

import (
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/names"
)

func (u *Updater) onSliceAdd(obj any) { u.enqueueSlice(sliceOf(obj)) }

func (u *Updater) onSliceUpdate(oldObj, newObj any) {
	o, n := sliceOf(oldObj), sliceOf(newObj)
	if o != nil && n != nil && o.ResourceVersion != "" && o.ResourceVersion == n.ResourceVersion {
		return // a resync: nothing changed
	}
	if o != nil && (n == nil || serviceKeyOf(o) != serviceKeyOf(n)) {
		u.enqueueSlice(o) // relabelled: its old Service lost these endpoints
	}
	u.enqueueSlice(n)
}

func (u *Updater) onSliceDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	u.enqueueSlice(sliceOf(obj))
}

func sliceOf(obj any) *discoveryv1.EndpointSlice {
	s, _ := obj.(*discoveryv1.EndpointSlice)
	return s
}

// serviceKeyOf is the namespace/name of the slice's Service, "" if none.
func serviceKeyOf(s *discoveryv1.EndpointSlice) string {
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return ""
	}
	return s.Namespace + "/" + name
}

func (u *Updater) enqueueSlice(s *discoveryv1.EndpointSlice) {
	if s == nil {
		return
	}
	if key := serviceKeyOf(s); key != "" {
		u.enqueueService(key)
	}
}

// enqueueService queues the Service's desired state, computed from all its
// EndpointSlices, for the pool of each of its IP families. Services that are
// not ExternalTrafficPolicy=Local LoadBalancer Services are ignored; whether
// the pool exists (the Service is placed) is decided when the queue is
// applied.
func (u *Updater) enqueueService(key string) {
	ns, name, _ := cutKey(key)
	svc, err := u.services.Services(ns).Get(name)
	if err != nil || !isLocal(svc) {
		return
	}
	nodes, err := backendpool.EndpointNodes(u.slices, ns, name)
	if err != nil {
		return // a lister List does not fail; nothing to queue
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, f := range serviceFamilies(svc) {
		u.queue.upsert(&operation{service: key, pool: names.LocalServicePool(ns, name, f), family: f, nodes: nodes})
	}
}

// isLocal: an ExternalTrafficPolicy=Local LoadBalancer Service, the kind
// that owns dedicated pools.
func isLocal(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

func serviceFamilies(svc *v1.Service) []v1.IPFamily {
	if len(svc.Spec.IPFamilies) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return svc.Spec.IPFamilies
}
