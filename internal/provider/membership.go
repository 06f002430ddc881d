package provider

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
)

// membership remembers which IP addresses each backend pool of each load
// balancer holds. It answers "which pools hold this node" without a GET,
// which is what makes an admin-state cutover one GET and one PUT per pool.
//
// Unlike the load balancer cache, it is not dropped when a pool's etag
// changes: an admin-state write changes etags but never membership. It is
// refreshed by every load balancer read, every load balancer write, and every
// pool write made through Provider.BackendPools (the Service reconcile, the
// local service updater and the admin-state controller all write that way),
// and an entry older than the cache TTL is not used.
type membership struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu  sync.Mutex
	lbs map[string]lbMembers
}

type lbMembers struct {
	pools   map[string]map[string]bool // pool name -> canonical IPs
	fetched time.Time
}

func newMembership(clk clock.PassiveClock, ttl time.Duration) *membership {
	return &membership{clock: clk, ttl: ttl, lbs: map[string]lbMembers{}}
}

// setLB records every pool of a load balancer read or written whole; nil
// records that it does not exist.
func (m *membership) setLB(name string, lb *armnetwork.LoadBalancer) {
	e := lbMembers{pools: map[string]map[string]bool{}, fetched: m.clock.Now()}
	if lb != nil && lb.Properties != nil {
		for _, p := range lb.Properties.BackendAddressPools {
			e.pools[deref(p.Name)] = poolIPs(p)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lbs[strings.ToLower(name)] = e
}

// setPool records one pool as written; without a fresh entry for its load
// balancer, the load balancer is left to be read again.
func (m *membership) setPool(lbName string, pool *armnetwork.BackendAddressPool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.lbs[strings.ToLower(lbName)]
	if !ok || !m.fresh(e) {
		return
	}
	e.pools[deref(pool.Name)] = poolIPs(pool)
}

// deletePool forgets a deleted pool.
func (m *membership) deletePool(lbName, pool string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.lbs[strings.ToLower(lbName)]; ok {
		delete(e.pools, pool)
	}
}

// poolsWith returns the pools of the load balancer holding any of the IPs,
// and whether the answer is known (a fresh entry exists).
func (m *membership) poolsWith(lbName string, ips map[string]bool) ([]string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.lbs[strings.ToLower(lbName)]
	if !ok || !m.fresh(e) {
		return nil, false
	}
	var out []string
	for pool, members := range e.pools {
		for ip := range ips {
			if members[ip] {
				out = append(out, pool)
				break
			}
		}
	}
	return out, true
}

func (m *membership) fresh(e lbMembers) bool {
	return m.ttl > 0 && m.clock.Since(e.fetched) < m.ttl
}

func poolIPs(p *armnetwork.BackendAddressPool) map[string]bool {
	out := map[string]bool{}
	if p != nil && p.Properties != nil {
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			if a != nil && a.Properties != nil {
				out[backendpool.CanonicalIP(deref(a.Properties.IPAddress))] = true
			}
		}
	}
	return out
}

// trackingPools is the backend pool client every pool writer uses: it keeps
// membership current with what was written.
type trackingPools struct {
	azure.BackendPoolClient
	m *membership
}

func (t trackingPools) CreateOrUpdate(ctx context.Context, rg, lb, pool string, p armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, error) {
	out, err := t.BackendPoolClient.CreateOrUpdate(ctx, rg, lb, pool, p, etag)
	if err == nil && out != nil {
		t.m.setPool(lb, out)
	}
	return out, err
}

func (t trackingPools) Delete(ctx context.Context, rg, lb, pool string) error {
	err := t.BackendPoolClient.Delete(ctx, rg, lb, pool)
	if err == nil {
		t.m.deletePool(lb, pool)
	}
	return err
}
