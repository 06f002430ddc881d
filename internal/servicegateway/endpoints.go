package servicegateway

import (
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// endpointSet is what a Service's EndpointSlices want in the gateway.
type endpointSet struct {
	addrs map[addrKey]struct{}
	// nodes are the node names the registered endpoints run on, found or not
	// (a node added later must bring its pods in).
	nodes map[string]struct{}
	// unplaced counts registered endpoint addresses with no location: unknown
	// node, no InternalIP of the pod's family, or an address that is not
	// an IP.
	unplaced int
}

// serviceEndpoints reads the endpoints of the Service ns/name with UID uid
// that belong in the gateway from the listers. An endpoint counts when it
// is registered (see registered) and names its node; each of its addresses
// is filed under
// the node's InternalIP of the same family (the family of the address, not
// the slice's AddressType; FQDN slices are skipped). Slices owned by
// another Service object of the same name are ignored.
func serviceEndpoints(ns, name string, uid types.UID, slices sliceSource, nodes corelisters.NodeLister) (endpointSet, error) {
	out := endpointSet{addrs: map[addrKey]struct{}{}, nodes: map[string]struct{}{}}
	list, err := slices.List(ns, name)
	if err != nil {
		return out, err
	}
	locs := map[string][2]netip.Addr{} // node -> IPv4, IPv6 location
	for _, s := range list {
		if s.AddressType == discoveryv1.AddressTypeFQDN || s.DeletionTimestamp != nil || !ownedBy(s, uid) {
			continue
		}
		for _, ep := range s.Endpoints {
			if !registered(ep.Conditions) {
				continue
			}
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			node := *ep.NodeName
			out.nodes[node] = struct{}{}
			loc, ok := locs[node]
			if !ok {
				loc, err = nodeLocations(nodes, node)
				if err != nil {
					return out, err
				}
				locs[node] = loc
			}
			for _, a := range ep.Addresses {
				ip, ok := canonicalIP(a)
				fam := 0
				if ip.Is6() {
					fam = 1
				}
				if !ok || !loc[fam].IsValid() {
					out.unplaced++
					continue
				}
				out.addrs[addrKey{loc: loc[fam], addr: ip}] = struct{}{}
			}
		}
	}
	return out, nil
}

// registered reports whether an endpoint's addresses belong in the gateway
// (KEP-1672 conditions; docs/admin-state.md, "Rolling updates"):
//
//   - a ready endpoint: not terminating, ready true or unset (the API's
//     "nil means ready");
//   - a terminating endpoint that still serves (serving explicitly true),
//     whether or not the Service has ready endpoints elsewhere. The gateway
//     has no admin state: an address is either registered, taking new flows
//     and keeping its established ones, or removed, which ends its flows.
//     So the address of a pod in its graceful shutdown stays until the pod
//     stops serving or leaves the slice, and its established connections
//     are not cut when termination starts; the price is that it keeps its
//     share of new connections, which it answers while it serves. When no
//     endpoint is ready, the serving-terminating ones are the Service's
//     only backends, as kube-proxy would use them.
//
// A terminating endpoint with serving unset, or false, is removed (the
// stricter reading: it never said it serves).
func registered(c discoveryv1.EndpointConditions) bool {
	if c.Terminating != nil && *c.Terminating {
		return c.Serving != nil && *c.Serving
	}
	return c.Ready == nil || *c.Ready
}

// ownedBy reports whether a slice belongs to the Service with this UID: it
// names no Service owner, or that owner is this UID.
func ownedBy(s *discoveryv1.EndpointSlice, uid types.UID) bool {
	for _, o := range s.OwnerReferences {
		if o.Kind == "Service" && o.APIVersion == "v1" {
			return o.UID == uid
		}
	}
	return true
}

// nodeLocations returns a node's location per family: its smallest
// InternalIP of that family (the same choice on every run, so a node with
// several addresses never flaps). A node that does not exist has none.
func nodeLocations(nodes corelisters.NodeLister, name string) ([2]netip.Addr, error) {
	var out [2]netip.Addr
	n, err := nodes.Get(name)
	if apierrors.IsNotFound(err) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	return locationsOf(n), nil
}

func locationsOf(n *v1.Node) [2]netip.Addr {
	var out [2]netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip, ok := canonicalIP(a.Address)
		if !ok {
			continue
		}
		fam := 0
		if ip.Is6() {
			fam = 1
		}
		if !out[fam].IsValid() || ip.Less(out[fam]) {
			out[fam] = ip
		}
	}
	return out
}

// sliceSource lists the EndpointSlices of a Service.
type sliceSource interface {
	List(ns, service string) ([]*discoveryv1.EndpointSlice, error)
}

// byServiceIndex indexes EndpointSlices by "namespace/service name", so a
// Service's slices are found without scanning its namespace.
const byServiceIndex = "servicegateway.azure.com/service"

func sliceServiceKey(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		return []string{serviceKey(s.Namespace, name)}, nil
	}
	return nil, nil
}

// indexedSlices lists a Service's slices through byServiceIndex.
type indexedSlices struct{ indexer cache.Indexer }

func (x indexedSlices) List(ns, service string) ([]*discoveryv1.EndpointSlice, error) {
	objs, err := x.indexer.ByIndex(byServiceIndex, serviceKey(ns, service))
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// listerSlices lists a Service's slices with a label selector (when the
// index cannot be added: the informer has started).
type listerSlices struct {
	lister discoverylisters.EndpointSliceLister
}

func (x listerSlices) List(ns, service string) ([]*discoveryv1.EndpointSlice, error) {
	return x.lister.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: service}))
}

// serviceKey is "namespace/name".
func serviceKey(ns, name string) string { return ns + "/" + name }

func splitKey(key string) (ns, name string) {
	ns, name, _ = strings.Cut(key, "/")
	return ns, name
}
