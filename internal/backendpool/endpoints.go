package backendpool

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/azlb/azlb/internal/names"
)

// LocalEndpoints is what an ExternalTrafficPolicy=Local Service's
// EndpointSlices ask of its dedicated pools: the one rule every writer of
// those pools (the Service reconcile and the drift pass, the local service
// updater, the admin-state controller) follows, so none undoes another.
type LocalEndpoints struct {
	// Members are the nodes that run a ready endpoint of the Service, or
	// only endpoints that are terminating but still serving (KEP-1672).
	Members sets.Set[string]
	// Draining are the members whose endpoints are all terminating but
	// serving while the Service has a ready endpoint somewhere: their
	// entries are Down (established flows go on, new ones go to the ready
	// nodes) until the endpoints are gone or stop serving. When the Service
	// has no ready endpoint at all, no member is draining: the
	// serving-terminating endpoints still take traffic.
	Draining sets.Set[string]
}

// endpointState classifies one endpoint by its conditions:
//
//   - ready: not terminating, and ready true or unset (the API's "nil means
//     ready"); a terminating endpoint is never ready, whatever its ready
//     condition says;
//   - serving-terminating: terminating, and serving explicitly true. An
//     unset serving on a terminating endpoint is read as not serving (the
//     KEP defers it to ready, which is false while terminating): the
//     stricter reading, so azlb never keeps sending traffic to an endpoint
//     that did not say it serves.
func endpointState(c discoveryv1.EndpointConditions) (ready, servingTerminating bool) {
	terminating := c.Terminating != nil && *c.Terminating
	if !terminating {
		return c.Ready == nil || *c.Ready, false
	}
	return false, c.Serving != nil && *c.Serving
}

// LocalEndpointsOf computes LocalEndpoints from the Service's slices.
// Endpoints without a node name are ignored.
func LocalEndpointsOf(slices []*discoveryv1.EndpointSlice) LocalEndpoints {
	ready, serving := sets.New[string](), sets.New[string]()
	for _, s := range slices {
		if s == nil {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			switch r, st := endpointState(ep.Conditions); {
			case r:
				ready.Insert(*ep.NodeName)
			case st:
				serving.Insert(*ep.NodeName)
			}
		}
	}
	out := LocalEndpoints{Members: ready.Union(serving), Draining: sets.New[string]()}
	if ready.Len() > 0 {
		out.Draining = serving.Difference(ready)
	}
	return out
}

// ServiceEndpoints lists every EndpointSlice labelled with the Service
// namespace/name and computes its LocalEndpoints.
func ServiceEndpoints(slices discoverylisters.EndpointSliceLister, namespace, name string) (LocalEndpoints, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	list, err := slices.EndpointSlices(namespace).List(sel)
	if err != nil {
		return LocalEndpoints{}, fmt.Errorf("list EndpointSlices of Service %s/%s: %w", namespace, name, err)
	}
	return LocalEndpointsOf(list), nil
}

// EndpointNodes returns the members of the Service's dedicated pools
// (ServiceEndpoints(...).Members).
func EndpointNodes(slices discoverylisters.EndpointSliceLister, namespace, name string) (sets.Set[string], error) {
	ep, err := ServiceEndpoints(slices, namespace, name)
	return ep.Members, err
}

// LocalState is the admin state the node's entry in a Local Service's
// dedicated pool must have: Down while the node drains for the Service
// (LocalEndpoints.Draining) or its taints call for it (State); None
// otherwise, and always None with AdminState off.
func (p Policy) LocalState(n *v1.Node, ep LocalEndpoints) armnetwork.LoadBalancerBackendAddressAdminState {
	if !p.AdminState {
		return armnetwork.LoadBalancerBackendAddressAdminStateNone
	}
	if n != nil && ep.Draining.Has(n.Name) {
		return armnetwork.LoadBalancerBackendAddressAdminStateDown
	}
	return p.State(n)
}

// LocalMembers lists, sorted by name, the entries a Local Service's
// dedicated pool of the family holds: those of the nodes (in any order;
// only those in ep.Members count) that are eligible and have an InternalIP
// of the family, each with LocalState. With AdminState off no Down is
// written, so a draining node is left out instead (the pool's drain period
// keeps its established flows).
func (p Policy) LocalMembers(nodes []*v1.Node, family v1.IPFamily, ep LocalEndpoints) []Member {
	keep := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if n == nil || !ep.Members.Has(n.Name) || !p.Eligible(n) {
			continue
		}
		if !p.AdminState && ep.Draining.Has(n.Name) {
			continue
		}
		keep = append(keep, n)
	}
	return members(keep, family, func(n *v1.Node) armnetwork.LoadBalancerBackendAddressAdminState { return p.LocalState(n, ep) })
}

// LocalPools answers, for a writer that meets pools by name (the
// admin-state controller), which of them are Local Services' dedicated
// pools and which of their entries the Services' endpoints keep Down.
type LocalPools struct {
	Services corelisters.ServiceLister
	Slices   discoverylisters.EndpointSliceLister
}

// Draining returns, for each of the named pools that is the dedicated pool
// (names.LocalServicePool, either family) of an ExternalTrafficPolicy=Local
// LoadBalancer Service with a draining node, the names of those nodes,
// keyed by the lower-cased pool name. Entries of such pools are named after
// their node. Pools of no Local Service are absent.
func (l LocalPools) Draining(pools []string) (map[string]sets.Set[string], error) {
	out := map[string]sets.Set[string]{}
	if l.Services == nil || l.Slices == nil || len(pools) == 0 {
		return out, nil
	}
	asked := sets.New[string]()
	for _, p := range pools {
		asked.Insert(strings.ToLower(p))
	}
	svcs, err := l.Services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	for _, svc := range svcs {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
			continue
		}
		var mine []string
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			if n := strings.ToLower(names.LocalServicePool(svc.Namespace, svc.Name, fam)); asked.Has(n) {
				mine = append(mine, n)
			}
		}
		if len(mine) == 0 {
			continue
		}
		ep, err := ServiceEndpoints(l.Slices, svc.Namespace, svc.Name)
		if err != nil {
			return nil, err
		}
		if ep.Draining.Len() == 0 {
			continue
		}
		for _, n := range mine {
			out[n] = ep.Draining
		}
	}
	return out, nil
}
