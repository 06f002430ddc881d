package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/placement"
)

// eligibleNodes drops nodes that must never be in a backend pool (see
// backendpool.Eligible); control-plane nodes are dropped while
// excludeMasterFromStandardLB is on (the default).
func (p *Provider) eligibleNodes(nodes []*v1.Node) []*v1.Node {
	excludeCP := p.cfg.ExcludeMasterFromStandardLB == nil || *p.cfg.ExcludeMasterFromStandardLB
	out := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if backendpool.Eligible(n, excludeCP) {
			out = append(out, n)
		}
	}
	return out
}

// nodesForLB returns the nodes whose cluster pool is on the load balancer:
// every eligible node in single mode; in multiple-SLB mode, the nodes placed
// on the load balancer's configuration (placing new nodes, forgetting nodes
// that are gone).
func (p *Provider) nodesForLB(lbName string, nodes []*v1.Node) []*v1.Node {
	nodes = p.eligibleNodes(nodes)
	if p.placer == nil {
		return nodes
	}
	cfgName, _, ok := p.configOf(lbName)
	if !ok {
		return nil
	}
	p.nodeMu.Lock()
	defer p.nodeMu.Unlock()
	present := make(map[string]bool, len(nodes))
	var out []*v1.Node
	for _, n := range nodes {
		present[n.Name] = true
		placed, err := p.placeNode(n)
		if err != nil {
			p.recorder.Eventf(n, v1.EventTypeWarning, EventReasonNodePlacementFailed, "%v", err)
			continue
		}
		if strings.EqualFold(placed, cfgName) {
			out = append(out, n)
		}
	}
	for _, c := range p.configNames() {
		for _, name := range p.state.Nodes(c) {
			if !present[name] {
				p.state.RemoveNode(name)
			}
		}
	}
	return out
}

// placeNode returns the node's configuration, placing it when it has none
// or its current one no longer fits. Caller holds nodeMu.
func (p *Provider) placeNode(n *v1.Node) (string, error) {
	current, _ := p.state.NodeConfig(n.Name)
	info := placement.NodeInfo{
		Name:    n.Name,
		Labels:  n.Labels,
		VMSet:   vmSetOf(n),
		Current: current,
	}
	cfgName, err := p.placer.PlaceNode(info, p.state.NodeCounts())
	if err != nil {
		return "", err
	}
	if !strings.EqualFold(cfgName, current) {
		p.state.MoveNode(n.Name, cfgName)
	}
	return cfgName, nil
}

func vmSetOf(n *v1.Node) string {
	if s := placement.VMSetOfNode(n.Labels); s != "" {
		return s
	}
	return placement.VMSetFromProviderID(n.Spec.ProviderID)
}

// reconcilePools makes the cluster pools (one per family) of the load
// balancer hold exactly its nodes' InternalIPs, each with the admin state
// the node's taints call for. The check runs against the cached load
// balancer first, so an unchanged node set costs no lock and no write; a
// change is applied under the service-reconcile lock with a fresh GET of the
// pool and one PUT with its etag.
func (p *Provider) reconcilePools(ctx context.Context, caller, lbName string, nodes []*v1.Node, families []v1.IPFamily) error {
	if p.cfg.VnetName == "" {
		return fmt.Errorf("load balancer %s: vnetName must be set in azure.json for IP-based (nodeIP) backend pools", lbName)
	}
	return p.syncPools(ctx, caller, lbName, p.nodesForLB(lbName, nodes), families, func(f v1.IPFamily) string {
		return clusterPoolName(p.clusterName(), f)
	})
}

// syncPools makes the pools (one per family, named by poolName) hold exactly
// the members' InternalIPs; see reconcilePools.
func (p *Provider) syncPools(ctx context.Context, caller, lbName string, members []*v1.Node, families []v1.IPFamily, poolName func(v1.IPFamily) string) error {
	for _, fam := range families {
		poolName := poolName(fam)
		want := backendpool.Members(members, fam, p.adminState())
		lb, err := p.getLB(ctx, lbName)
		if err != nil {
			return err
		}
		if cached := findPool(lb, poolName); cached != nil {
			probe := copyPool(cached)
			if !backendpool.Sync(probe, want, p.vnetID()).Changed {
				continue
			}
		}
		if err := p.writePool(ctx, caller, lbName, poolName, func(pool *armnetwork.BackendAddressPool) bool {
			// Under the lock, admin state comes from the nodes as the
			// informer sees them now: the list the service controller
			// passed may predate a taint the admin-state controller has
			// already acted on, and must not put None back over its Down.
			return backendpool.Sync(pool, backendpool.Members(p.freshNodes(members), fam, p.adminState()), p.vnetID()).Changed
		}); err != nil {
			return err
		}
	}
	return nil
}

// adminState is the admin state rule of every pool entry azlb writes: the
// node's taints while enableLoadBalancerAdminState is on, else None.
func (p *Provider) adminState() backendpool.StateFunc {
	if p.cfg.AdminStateEnabled() {
		return adminstate.DesiredState
	}
	return nil
}

// freshNodes replaces each node by the node lister's copy when there is one.
func (p *Provider) freshNodes(nodes []*v1.Node) []*v1.Node {
	if p.nodes == nil {
		return nodes
	}
	out := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if cur, err := p.nodes.Get(n.Name); err == nil && cur.UID == n.UID {
			out = append(out, cur)
		} else {
			out = append(out, n)
		}
	}
	return out
}

// writePool applies edit to a fresh copy of the pool under the
// service-reconcile lock and PUTs it with its etag when edit reports a
// change. A 412 or 409 is retried with a fresh GET. A pool that does not
// exist is left alone (the load balancer reconcile creates pools).
func (p *Provider) writePool(ctx context.Context, caller, lbName, poolName string, edit func(*armnetwork.BackendAddressPool) bool) error {
	rg := p.lbResourceGroup()
	p.lock.Lock(caller)
	defer p.lock.Unlock()
	var err error
	for attempt := 0; attempt <= maxConflictRetries; attempt++ {
		var pool *armnetwork.BackendAddressPool
		pool, err = p.pools.Get(ctx, rg, lbName, poolName)
		if err != nil {
			if azure.Classify(err) == azure.ClassStale {
				return nil
			}
			return fmt.Errorf("get backend pool %s/%s/%s: %w", rg, lbName, poolName, err)
		}
		if !edit(pool) {
			return nil
		}
		etag := deref(pool.Etag)
		p.cache.invalidate(rg, lbName)
		_, err = p.pools.CreateOrUpdate(ctx, rg, lbName, poolName, *pool, etag)
		if err == nil {
			logger(ctx).V(2).Info("Updated backend pool", "loadBalancer", lbName, "pool", poolName, "addresses", len(pool.Properties.LoadBalancerBackendAddresses))
			return nil
		}
		if azure.Classify(err) != azure.ClassConflict {
			break
		}
	}
	return fmt.Errorf("write backend pool %s/%s/%s: %w", rg, lbName, poolName, err)
}

func copyPool(pool *armnetwork.BackendAddressPool) *armnetwork.BackendAddressPool {
	out := *pool
	if pool.Properties != nil {
		props := *pool.Properties
		props.LoadBalancerBackendAddresses = append([]*armnetwork.LoadBalancerBackendAddress(nil), pool.Properties.LoadBalancerBackendAddresses...)
		out.Properties = &props
	}
	return &out
}

// ensureRebuilt rebuilds, once, which Services and nodes are on which load
// balancer from Azure's state, so that a restarted controller places
// everything where it already is (multiple-SLB mode only). A failure is
// returned and retried on the next call.
func (p *Provider) ensureRebuilt(ctx context.Context) error {
	if p.placer == nil {
		return nil
	}
	p.rebuildMu.Lock()
	defer p.rebuildMu.Unlock()
	if p.rebuilt {
		return nil
	}
	services := map[string][]string{}
	nodes := map[string][]string{}
	for _, cfgName := range p.configNames() {
		for _, lbName := range []string{cfgName, internalLBName(cfgName)} {
			lb, err := p.getLB(ctx, lbName)
			if err != nil {
				return fmt.Errorf("rebuild placement from Azure: %w", err)
			}
			if lb == nil || lb.Properties == nil {
				continue
			}
			for _, fe := range lb.Properties.FrontendIPConfigurations {
				services[cfgName] = append(services[cfgName], serviceBaseOfFrontend(deref(fe.Name)))
			}
			for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				pool := findPool(lb, clusterPoolName(p.clusterName(), fam))
				if pool == nil || pool.Properties == nil {
					continue
				}
				for _, a := range pool.Properties.LoadBalancerBackendAddresses {
					if n := deref(a.Name); n != "" {
						nodes[cfgName] = append(nodes[cfgName], n)
					}
				}
			}
		}
	}
	for k := range services {
		services[k] = dedupeSorted(services[k])
	}
	for k := range nodes {
		nodes[k] = dedupeSorted(nodes[k])
	}
	for _, c := range p.state.Rebuild(services, nodes) {
		logger(ctx).Info("Object found on more than one load balancer; keeping the first", "conflict", c)
	}
	p.rebuilt = true
	return nil
}

// serviceBaseOfFrontend strips the family suffix from a frontend name.
func serviceBaseOfFrontend(name string) string {
	if strings.HasSuffix(name, IPv6Suffix) {
		return name[:len(name)-len(IPv6Suffix)]
	}
	return name
}

func dedupeSorted(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}
