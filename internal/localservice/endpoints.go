package localservice

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
)

// EndpointNodes returns the names of the nodes that run ready endpoints of
// the Service, read from all its EndpointSlices (provider.LocalServices).
// It fails while the EndpointSlice informer has not synced, so that the
// provider never empties a pool from an incomplete view.
func (u *Updater) EndpointNodes(svc *v1.Service) (sets.Set[string], error) {
	if svc == nil {
		return nil, errors.New("localservice: EndpointNodes: nil Service")
	}
	if !u.slicesSynced() {
		return nil, fmt.Errorf("localservice: the endpoints of Service %s/%s are not known yet: the EndpointSlice informer has not synced", svc.Namespace, svc.Name)
	}
	return u.endpointNodes(svc.Namespace, svc.Name)
}

// endpointNodes reads every EndpointSlice labelled with the Service's name.
func (u *Updater) endpointNodes(namespace, name string) (sets.Set[string], error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	slices, err := u.slices.EndpointSlices(namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("localservice: list EndpointSlices of Service %s/%s: %w", namespace, name, err)
	}
	return ReadyEndpointNodes(slices), nil
}

// ReadyEndpointNodes returns the node names of the slices' ready endpoints.
// An endpoint whose ready condition is unset counts as ready (the
// EndpointSlice API's rule); endpoints without a node name are ignored. The
// returned set is never modified afterwards by the updater.
func ReadyEndpointNodes(slices []*discoveryv1.EndpointSlice) sets.Set[string] {
	out := sets.New[string]()
	for _, s := range slices {
		if s == nil {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			out.Insert(*ep.NodeName)
		}
	}
	return out
}

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
// EndpointSlices, for each of its registered pools. Services that are not
// registered (not Local, not placed yet, or single-SLB mode) are ignored:
// the provider fills their pools when it registers them.
func (u *Updater) enqueueService(key string) {
	if _, ok := u.registered(key); !ok {
		return
	}
	ns, name, _ := cutKey(key)
	nodes, err := u.endpointNodes(ns, name)
	if err != nil {
		return // a lister List does not fail; nothing to queue
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	reg, ok := u.registry[key]
	if !ok {
		return
	}
	for _, f := range reg.families {
		u.queue.upsert(&operation{service: key, lb: reg.lb, pool: poolNameOfKey(key, f), family: f, nodes: nodes})
	}
}
