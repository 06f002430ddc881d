package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/placement"
)

// eligibleNodes drops nodes that must never be in a backend pool (see
// backendpool.Policy.Eligible).
func (p *Provider) eligibleNodes(nodes []*v1.Node) []*v1.Node {
	out := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if p.policy.Eligible(n) {
			out = append(out, n)
		}
	}
	return out
}

// nodesForLB returns the nodes whose cluster pool is on the load balancer:
// every eligible node in single mode; in multiple-SLB mode, the nodes placed
// on the load balancer's configuration (placing new nodes, forgetting nodes
// that are gone). Placement and eligibility read each node's labels as the
// node lister holds them now: a node sync that listed the nodes before a
// relabel must not move the node back.
func (p *Provider) nodesForLB(lbName string, nodes []*v1.Node) []*v1.Node {
	nodes = p.eligibleNodes(p.freshNodes(nodes))
	if p.placer == nil {
		return nodes
	}
	cfgName, ok := p.configOf(lbName)
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

// SyncClusterPools brings the cluster pools of every configured load
// balancer (and its internal twin) that exists in line with the cluster's
// nodes as the node lister holds them: a node whose labels now place it on
// another load balancer moves, one whose labels now make it ineligible
// (control-plane, exclusion) leaves. The service controller's node sync acts
// only when the set of nodes changes, not on other label changes; the
// node-label controller (internal/nodelabels) calls this instead. Pools that
// are already right cost no ARM call.
func (p *Provider) SyncClusterPools(ctx context.Context) error {
	if err := p.ensureStarted(ctx); err != nil {
		return err
	}
	return p.syncClusterPools(ctx, callerLabels)
}

// syncClusterPools is SyncClusterPools for a started provider; caller
// labels its writes.
func (p *Provider) syncClusterPools(ctx context.Context, caller string) error {
	if p.nodes == nil {
		return errors.New("sync cluster pools: no node lister")
	}
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("sync cluster pools: list nodes: %w", err)
	}
	var errs []error
	for _, cfgName := range p.configNames() {
		for _, lbName := range []string{cfgName, names.InternalLB(cfgName)} {
			lb, err := p.store.Get(ctx, lbName)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			var families []v1.IPFamily
			for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				if findPool(lb, names.ClusterPool(p.clusterName(), fam)) != nil {
					families = append(families, fam)
				}
			}
			if len(families) == 0 {
				continue // no such load balancer, or no cluster pool yet: its Services' reconcile fills it
			}
			if err := p.reconcilePools(ctx, caller, lbName, nodes, families); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
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
// balancer hold exactly its nodes: their InternalIPs (IP-based pools, after
// any NIC-based members left), or their VMs' ip configurations (NIC-based
// pools, reconcileNICPools), each with the admin state the node's taints
// call for.
func (p *Provider) reconcilePools(ctx context.Context, caller, lbName string, nodes []*v1.Node, families []v1.IPFamily) error {
	if p.policy.NICBased {
		return p.reconcileNICPools(ctx, caller, lbName, p.nodesForLB(lbName, nodes), families)
	}
	if p.policy.VNetID == "" {
		return fmt.Errorf("load balancer %s: vnetName must be set in azure.json for IP-based (nodeIP) backend pools", lbName)
	}
	if err := p.leaveNICPools(ctx, lbName, families); err != nil {
		return err
	}
	return p.syncPools(ctx, caller, lbName, p.nodesForLB(lbName, nodes), families, func(f v1.IPFamily) string {
		return names.ClusterPool(p.clusterName(), f)
	})
}

// syncPools makes the pools (one per family, named by poolName) hold exactly
// the members' InternalIPs. A pool whose cached copy is already right costs
// nothing; otherwise the store reads it afresh and writes it once. Admin
// state comes from the nodes as the informer sees them when the pool is
// written: the list the service controller passed may predate a taint the
// admin-state controller has already acted on, and must not put None back
// over its Down. A pool that does not exist is left alone (the load
// balancer reconcile creates pools).
func (p *Provider) syncPools(ctx context.Context, caller, lbName string, members []*v1.Node, families []v1.IPFamily, poolName func(v1.IPFamily) string) error {
	pools := make([]string, len(families))
	for i, fam := range families {
		pools[i] = poolName(fam)
	}
	return p.updatePools(ctx, caller, lbName, pools, func(i int, pool *armnetwork.BackendAddressPool) bool {
		return p.policy.Sync(pool, p.policy.Members(p.freshNodes(members), families[i])).Changed
	})
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
		for _, lbName := range []string{cfgName, names.InternalLB(cfgName)} {
			lb, err := p.store.Get(ctx, lbName)
			if err != nil {
				return fmt.Errorf("rebuild placement from Azure: %w", err)
			}
			if lb == nil || lb.Properties == nil {
				continue
			}
			for _, fe := range lb.Properties.FrontendIPConfigurations {
				services[cfgName] = append(services[cfgName], names.ServiceBaseOfFrontend(ptr.Deref(fe.Name, "")))
			}
			// Services on a shared frontend have rules only.
			for _, r := range lb.Properties.LoadBalancingRules {
				services[cfgName] = append(services[cfgName], names.ServiceBaseOf(ruleNameOf(r)))
			}
			for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
				pool := findPool(lb, names.ClusterPool(p.clusterName(), fam))
				if pool == nil || pool.Properties == nil {
					continue
				}
				for _, a := range pool.Properties.LoadBalancerBackendAddresses {
					if n := ptr.Deref(a.Name, ""); n != "" {
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
