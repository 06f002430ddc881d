package provider

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
)

// PoolsWithAddresses returns every backend pool, on every managed load
// balancer (public and internal, every IP family, cluster and
// local-service pools), that holds at least one of the IP addresses. It
// answers from the membership index (see membership) when it is fresh and
// reads the load balancer otherwise; load balancers are looked at in
// parallel. The result is sorted.
func (p *Provider) PoolsWithAddresses(ctx context.Context, ips []string) ([]adminstate.PoolRef, error) {
	want := make(map[string]bool, len(ips))
	for _, ip := range ips {
		want[backendpool.CanonicalIP(ip)] = true
	}
	names := p.managedLBNames()
	found := make([][]string, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			if pools, ok := p.members.poolsWith(name, want); ok {
				found[i] = pools
				return
			}
			lb, err := p.getLB(ctx, name)
			if err != nil {
				errs[i] = err
				return
			}
			if lb == nil || lb.Properties == nil {
				return
			}
			for _, pool := range lb.Properties.BackendAddressPools {
				if poolHasAny(pool, want) {
					found[i] = append(found[i], deref(pool.Name))
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []adminstate.PoolRef
	for i, name := range names {
		for _, pool := range found[i] {
			out = append(out, adminstate.PoolRef{LoadBalancer: name, Pool: pool})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LoadBalancer != out[j].LoadBalancer {
			return out[i].LoadBalancer < out[j].LoadBalancer
		}
		return out[i].Pool < out[j].Pool
	})
	return out, nil
}

func poolHasAny(pool *armnetwork.BackendAddressPool, ips map[string]bool) bool {
	if pool == nil || pool.Properties == nil {
		return false
	}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if a != nil && a.Properties != nil && ips[backendpool.CanonicalIP(deref(a.Properties.IPAddress))] {
			return true
		}
	}
	return false
}

// ResourceGroup is the load balancers' resource group.
func (p *Provider) ResourceGroup() string { return p.lbResourceGroup() }

// BackendPools is the ARM backend pool client, for controllers that write
// pools under Lock().
func (p *Provider) BackendPools() azure.BackendPoolClient { return p.pools }
