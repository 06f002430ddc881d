package provider

import (
	"context"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
)

// PoolsWithAddresses returns every backend pool, on every managed load
// balancer (public and internal, every IP family, cluster and
// local-service pools), that holds at least one of the IP addresses. It
// reads load balancers through the cache (a miss costs one GET per load
// balancer), so callers that must see the latest pools call
// InvalidateCache first. The result is sorted.
func (p *Provider) PoolsWithAddresses(ctx context.Context, ips []string) ([]adminstate.PoolRef, error) {
	want := make(map[string]bool, len(ips))
	for _, ip := range ips {
		want[backendpool.CanonicalIP(ip)] = true
	}
	var out []adminstate.PoolRef
	for _, name := range p.managedLBNames() {
		lb, err := p.getLB(ctx, name)
		if err != nil {
			return nil, err
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		for _, pool := range lb.Properties.BackendAddressPools {
			if poolHasAny(pool, want) {
				out = append(out, adminstate.PoolRef{LoadBalancer: name, Pool: deref(pool.Name)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !strings.EqualFold(out[i].LoadBalancer, out[j].LoadBalancer) {
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
func (p *Provider) BackendPools() azure.BackendPoolClient { return p.clients.BackendPool }
