package provider

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/lbstore"
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

// reconcileLocalPools fills the Service's dedicated pools by the one rule
// for Local Services' pools (backendpool.Policy.LocalMembers): the nodes
// running its ready endpoints, and those whose endpoints are all
// terminating but still serving, Down while the Service has a ready
// endpoint elsewhere; so neither this reconcile nor the drift pass drops a
// draining node early or puts None back over the updater's Down. A pool
// whose cached copy is already right costs nothing; otherwise the store
// reads it afresh and writes it once. Taints come from the node lister at
// write time (freshNodes), as for the cluster pools. A pool that does not
// exist is left alone (the load balancer reconcile creates pools).
func (p *Provider) reconcileLocalPools(ctx context.Context, caller, lbName string, svc *v1.Service, nodes []*v1.Node, families []v1.IPFamily) error {
	if p.slicesSynced != nil && !p.slicesSynced() {
		return fmt.Errorf("service %s: its endpoints are not known yet (the EndpointSlice informer has not synced)", names.ServiceKey(svc))
	}
	ep, err := backendpool.ServiceEndpoints(p.slices, svc.Namespace, svc.Name)
	if err != nil {
		return err
	}
	var members []*v1.Node
	for _, n := range nodes {
		if n != nil && ep.Members.Has(n.Name) {
			members = append(members, n)
		}
	}
	pools := make([]string, len(families))
	for i, fam := range families {
		pools[i] = names.LocalServicePool(svc.Namespace, svc.Name, fam)
	}
	return p.updatePools(ctx, caller, lbName, pools, func(i int, bp *armnetwork.BackendAddressPool) bool {
		return p.policy.Sync(bp, p.policy.LocalMembers(p.freshNodes(members), families[i], ep)).Changed
	})
}

// updatePools edits the pools of a load balancer (sync changes pool i and
// reports whether it did) through the store, trusting its cached copies:
// a pool whose cached copy is already right costs nothing. A pool written
// is a drift repair (noted only once Azure accepted the write); one that
// does not exist is left alone.
func (p *Provider) updatePools(ctx context.Context, caller, lbName string, pools []string, sync func(i int, bp *armnetwork.BackendAddressPool) bool) error {
	changed := make([]atomic.Bool, len(pools))
	edits := make([]lbstore.PoolEdit, len(pools))
	for i, pool := range pools {
		edits[i] = lbstore.PoolEdit{
			Ref: lbstore.PoolRef{LoadBalancer: lbName, Pool: pool},
			Edit: func(bp *armnetwork.BackendAddressPool) (bool, error) {
				c := sync(i, bp)
				changed[i].Store(c)
				return c, nil
			},
		}
	}
	var errs []error
	for i, r := range p.store.UpdatePools(ctx, caller, edits, lbstore.PoolOptions{TrustCache: true}) {
		if r.Err != nil {
			errs = append(errs, r.Err)
			continue
		}
		if r.Written && changed[i].Load() {
			noteRepair(ctx, RepairBackendPool, "backend pool %s/%s (members or admin state)", lbName, pools[i])
		}
	}
	return errors.Join(errs...)
}
