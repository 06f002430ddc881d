package provider

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/names"
)

// usesLocalPool: in multiple-SLB mode, an ExternalTrafficPolicy=Local
// Service owns dedicated pools (the local service updater keeps them in
// step with its endpoints afterwards).
func (p *Provider) usesLocalPool(svc *v1.Service) bool {
	return p.placer != nil && p.slices != nil && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// localPoolNames are every dedicated pool name the Service may have, legacy
// names included; a Service that does not (or no longer) use them gets them
// dropped.
func localPoolNames(svc *v1.Service) []string {
	var out []string
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		out = append(out, names.LocalServicePool(svc.Namespace, svc.Name, fam), names.LegacyLocalServicePool(svc.Namespace, svc.Name, fam))
	}
	return out
}

// legacyLocalPools maps each of the Service's dedicated pool names to the
// name earlier releases used, for adoption (see applyService).
func legacyLocalPools(svc *v1.Service, families []v1.IPFamily) map[string]string {
	out := map[string]string{}
	for _, fam := range families {
		out[names.LocalServicePool(svc.Namespace, svc.Name, fam)] = names.LegacyLocalServicePool(svc.Namespace, svc.Name, fam)
	}
	return out
}

// reconcileLocalPools fills the Service's dedicated pools with the nodes
// that run its ready endpoints.
func (p *Provider) reconcileLocalPools(ctx context.Context, caller, lbName string, svc *v1.Service, nodes []*v1.Node, families []v1.IPFamily) error {
	if p.slicesSynced != nil && !p.slicesSynced() {
		return fmt.Errorf("service %s: its endpoints are not known yet (the EndpointSlice informer has not synced)", names.ServiceKey(svc))
	}
	onNodes, err := backendpool.EndpointNodes(p.slices, svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	var members []*v1.Node
	for _, n := range nodes {
		if n != nil && onNodes.Has(n.Name) {
			members = append(members, n)
		}
	}
	return p.syncPools(ctx, caller, lbName, members, families, func(f v1.IPFamily) string {
		return names.LocalServicePool(svc.Namespace, svc.Name, f)
	})
}
