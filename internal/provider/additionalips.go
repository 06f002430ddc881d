package provider

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/securitygroup"
)

// Additional public IPs (azure-additional-public-ips): addresses that are
// no frontend of azlb's (a cross-region load balancer's frontend in front
// of the Service) but extra destinations of the Service's security rules,
// of their family, next to its frontend addresses (docs/security-groups.md,
// Destinations). The rules are shared by destinations, so a Service's
// edit releases the extra addresses it has or had from every rule and
// grants them again to every other Service that lists them; the addresses
// a Service had are remembered from its last write (heldExtras), and the
// collection keeps every address a Service lists (a restarted controller
// remembers nothing: an address no Service lists any more goes with the
// collection, one another Service lists with that Service's next write).

// heldExtras remembers, per Service key, the extra addresses its last
// written security change held (or may hold: a change queued but not yet
// confirmed adds to them). Safe for concurrent use.
type heldExtras struct {
	mu sync.Mutex
	m  map[string][]string
}

// get is what the Service may hold.
func (h *heldExtras) get(key string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.m[key]...)
}

// add records addresses the Service may hold from now on.
func (h *heldExtras) add(key string, addrs []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range addrs {
		if !slices.Contains(h.m[key], a) {
			if h.m == nil {
				h.m = map[string][]string{}
			}
			h.m[key] = append(h.m[key], a)
		}
	}
}

// set records what the Service holds after a confirmed write (none: it is
// forgotten).
func (h *heldExtras) set(key string, addrs []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(addrs) == 0 {
		delete(h.m, key)
		return
	}
	if h.m == nil {
		h.m = map[string][]string{}
	}
	h.m[key] = append([]string(nil), addrs...)
}

// extraAddresses are the Service's azure-additional-public-ips (spec nil:
// none).
func extraAddresses(spec *annotations.ServiceSpec) []string {
	if spec == nil {
		return nil
	}
	out := make([]string, 0, len(spec.AdditionalPublicIPs))
	for _, a := range spec.AdditionalPublicIPs {
		out = append(out, a.String())
	}
	return out
}

// extrasToRelease are the extra addresses the Service's edit releases: those
// it may hold (remembered) and those it lists now (spec nil: as its
// annotations say, if valid), but no node's address (a node's address
// leaves the rules only with its node ports).
func (p *Provider) extrasToRelease(svc *v1.Service, spec *annotations.ServiceSpec, nodeIPs map[v1.IPFamily][]string) []string {
	if spec == nil {
		spec, _ = annotations.Parse(svc)
	}
	var out []string
	for _, a := range append(p.extras.get(names.ServiceKey(svc)), extraAddresses(spec)...) {
		if slices.Contains(out, a) || slices.Contains(nodeIPs[familyOfAddress(a)], a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

func familyOfAddress(a string) v1.IPFamily {
	if securitygroup.FamilyOf(a) == securitygroup.IPv6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// addExtraCoTenantGrants gives back, in the edit, the grants of every other
// Service of azlb's that lists one of the released extra addresses: the
// release takes the address out of every rule, theirs included.
func (p *Provider) addExtraCoTenantGrants(svc *v1.Service, edit *securitygroup.Edit, released []string) {
	if len(released) == 0 || p.services == nil {
		return
	}
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, other := range svcs {
		// Not the Service itself, nor one being deleted (its delete takes
		// its grants away, and must not get them back from another's
		// write).
		if other.Namespace == svc.Namespace && other.Name == svc.Name || other.DeletionTimestamp != nil || !p.class.Owns(other) {
			continue
		}
		dsts := map[v1.IPFamily][]string{}
		spec, err := annotations.Parse(other)
		if err != nil {
			continue
		}
		for _, a := range extraAddresses(spec) {
			if slices.Contains(released, a) {
				dsts[familyOfAddress(a)] = append(dsts[familyOfAddress(a)], a)
			}
		}
		if len(dsts) == 0 {
			continue
		}
		acc, err := accesscontrol.Parse(other, spec.Internal, spec.EnableFloatingIP)
		if err != nil {
			continue
		}
		allow, deny := acc.Grants(securityPorts(other, spec), dsts)
		edit.Allow = append(edit.Allow, allow...)
		edit.Deny = append(edit.Deny, deny...)
	}
}

// listedExtras are the extra addresses the Services of azlb's list, even
// in an annotation that is invalid otherwise (a refused Service keeps
// what it still lists): the collection keeps them.
func (p *Provider) listedExtras() (map[string]bool, error) {
	out := map[string]bool{}
	if p.services == nil {
		return out, nil
	}
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, s := range svcs {
		if !p.class.Owns(s) {
			continue
		}
		for _, a := range annotations.ListedAdditionalIPs(s) {
			out[a.String()] = true
		}
	}
	return out, nil
}

// refusedExtras split the extra addresses a refused Service may hold
// (remembered) into those its annotation still lists validly (narrowed
// like its frontend addresses) and those it no longer lists (dropped: a
// refused change never keeps more destinations than the spec names).
func (p *Provider) refusedExtras(svc *v1.Service, nodeIPs map[v1.IPFamily][]string) (keep, drop []string) {
	listed := map[string]bool{}
	for _, a := range annotations.ListedAdditionalIPs(svc) {
		listed[a.String()] = true
	}
	for _, a := range p.extrasToRelease(svc, &annotations.ServiceSpec{}, nodeIPs) {
		if listed[a] {
			keep = append(keep, a)
		} else {
			drop = append(drop, a)
		}
	}
	return keep, drop
}
