package localservice

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/cache"

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

// enqueueService records a change of the Service's endpoints for the pool
// of each of its IP families and schedules the pool: at once when it is idle
// (the leading edge), otherwise at the end of its batching window, so later
// changes within loadBalancerBackendPoolUpdateIntervalInSeconds share one
// write. It reads only the Service from its lister; the endpoints are read
// when the pool is applied. A Service that is not (or no longer) a Local
// LoadBalancer Service has its pools' work dropped.
func (u *Updater) enqueueService(svcKey string) {
	ns, name, _ := strings.Cut(svcKey, "/")
	svc, err := u.services.Services(ns).Get(name)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err != nil || !u.isLocal(svc) {
		for k, st := range u.pools {
			if st.service == svcKey {
				delete(u.pools, k)
			}
		}
		return
	}
	for _, f := range serviceFamilies(svc) {
		pool := names.LocalServicePool(ns, name, f)
		k := key(pool)
		st, ok := u.pools[k]
		if !ok {
			st = &poolState{service: svcKey, pool: pool, family: f, lastAttempt: u.windows[k]}
			u.pools[k] = st
		}
		// The newest change has a budget of its own (see poolState).
		st.fresh, st.pending = 0, true
		u.schedule(k, st)
	}
}

// isLocal: an ExternalTrafficPolicy=Local LoadBalancer Service of the
// class azlb serves, the kind that owns dedicated pools. The pools of any
// other Service are not azlb's.
func (u *Updater) isLocal(svc *v1.Service) bool {
	return u.class.Owns(svc) && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

func serviceFamilies(svc *v1.Service) []v1.IPFamily {
	if len(svc.Spec.IPFamilies) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return svc.Spec.IPFamilies
}
