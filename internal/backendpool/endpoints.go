package backendpool

import (
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// EndpointNodes returns the names of the nodes running ready endpoints of
// the Service namespace/name, from every EndpointSlice labelled with its
// name: the members of its dedicated ExternalTrafficPolicy=Local pool.
func EndpointNodes(slices discoverylisters.EndpointSliceLister, namespace, name string) (sets.Set[string], error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	list, err := slices.EndpointSlices(namespace).List(sel)
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices of Service %s/%s: %w", namespace, name, err)
	}
	return ReadyEndpointNodes(list), nil
}

// ReadyEndpointNodes returns the node names of the slices' ready endpoints.
// An endpoint whose ready condition is unset counts as ready (the
// EndpointSlice API's rule); endpoints without a node name are ignored.
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
