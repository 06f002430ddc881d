package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nicpool"
)

// reconcileNICPools makes the cluster pools (one per family) of a load
// balancer NIC-based and their members the nodes' VMs:
//
//  1. a pool still holding IP-based entries (a switch from nodeIP) loses
//     them and its virtual network in one pool write;
//  2. the nodes' ip configurations join through their scale set models and
//     VMs or NICs (nicpool.Writer.EnsureMembers); stopped VMs and bad input
//     are left out;
//  3. members whose node is excluded from load balancers are taken out,
//     unless that would empty the pool;
//  4. each member's entry gets the admin state the node's taints call for,
//     in one pool write that changes nothing else (a node that joins while
//     tainted goes Down right after).
//
// With nothing to change it costs no ARM call beyond the Inventory's
// periodic listings.
func (p *Provider) reconcileNICPools(ctx context.Context, caller, lbName string, nodes []*v1.Node, families []v1.IPFamily) error {
	if p.nicPools == nil || p.inventory == nil {
		return fmt.Errorf("load balancer %s: NIC-based (nodeIPConfiguration) pools need the VM inventory", lbName)
	}
	nodes = p.freshNodes(nodes)
	ref := p.lbRef(lbName)
	var errs []error
	for _, fam := range families {
		poolName := names.ClusterPool(p.clusterName(), fam)
		pref := lbstore.PoolRef{LoadBalancer: lbName, Pool: poolName}
		if r := p.store.UpdatePools(ctx, caller, []lbstore.PoolEdit{{Ref: pref, Edit: func(pool *armnetwork.BackendAddressPool) (bool, error) {
			return backendpool.DropIPEntries(pool), nil
		}}}, lbstore.PoolOptions{TrustCache: true})[0]; r.Err != nil {
			errs = append(errs, r.Err)
			continue
		} else if r.Missing {
			continue // the load balancer reconcile creates pools
		}
		var members []*v1.Node
		for _, n := range nodes {
			if p.policy.Eligible(n) && (fam != v1.IPv6Protocol || backendpool.NodeInternalIP(n, fam) != "") {
				members = append(members, n)
			}
		}
		pool := nicpool.Pool{ID: ref.Child("backendAddressPools", poolName), Family: fam}
		res, err := p.nicPools.EnsureMembers(ctx, pool, members)
		if res.Writes > 0 {
			p.store.ExternalChange(lbName)
			logger(ctx).Info("Nodes joined NIC-based backend pool", "loadBalancer", lbName, "pool", poolName,
				"members", len(res.Members), "writes", res.Writes, "skipped", len(res.Skipped))
		}
		if err != nil {
			errs = append(errs, err)
		}
		if err := p.removeExcludedMembers(ctx, lbName, pool.ID, poolName); err != nil {
			errs = append(errs, err)
		}
		if err := p.syncNICStates(ctx, caller, pref, nodes); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeExcludedMembers takes out of the pool the members whose node is
// excluded from load balancers (label, control plane, being deleted),
// unless none would be left, and the members of standalone network
// interfaces no VM holds any more (a deleted VM's NIC that Azure kept, its
// delete option being Detach), whatever is left.
func (p *Provider) removeExcludedMembers(ctx context.Context, lbName, poolID, poolName string) error {
	if p.nodes == nil {
		return nil
	}
	all, err := p.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	excluded, known := map[string]bool{}, map[string]bool{}
	for _, n := range all {
		keys, err := p.inventory.MemberKeys(ctx, n)
		if err != nil {
			return err
		}
		for _, k := range keys {
			known[k] = true
			if !p.policy.Eligible(n) {
				excluded[k] = true
			}
		}
	}
	if err := p.removeDetachedMembers(ctx, lbName, poolID, poolName, known); err != nil {
		return err
	}
	if len(excluded) == 0 {
		return nil
	}
	members, err := p.nicMembers(ctx, lbName, poolName)
	if err != nil {
		return err
	}
	var stale []string
	for _, id := range members {
		if excluded[names.IPConfigOwner(id)] {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	if len(stale) == len(members) {
		logger(ctx).Info("Keeping excluded nodes in the NIC-based pool: removing them would leave it empty",
			"loadBalancer", lbName, "pool", poolName, "members", len(stale))
		return nil
	}
	_, err = p.removeNICMembers(ctx, lbName, poolID, poolName, stale, "excluded nodes")
	return err
}

// nicMembers are the ids of the ip configurations in a NIC-based pool, as
// the store holds it.
func (p *Provider) nicMembers(ctx context.Context, lbName, poolName string) ([]string, error) {
	lb, err := p.store.Get(ctx, lbName)
	if err != nil {
		return nil, err
	}
	pool := findPool(lb, poolName)
	if pool == nil || pool.Properties == nil {
		return nil, nil
	}
	var out []string
	for _, c := range pool.Properties.BackendIPConfigurations {
		if id := ptr.Deref(c.ID, ""); id != "" {
			out = append(out, id)
		}
	}
	return out, nil
}

// removeNICMembers takes ip configurations out of a NIC-based pool (whose
// members are written on their VMs and NICs, so the store reads it afresh
// next time); what names them in the log.
func (p *Provider) removeNICMembers(ctx context.Context, lbName, poolID, poolName string, stale []string, what string) (int, error) {
	n, err := p.nicPools.RemoveMembers(ctx, []string{poolID}, stale)
	if n > 0 {
		p.store.ExternalChange(lbName)
		logger(ctx).Info("Removed "+what+" from NIC-based backend pool", "loadBalancer", lbName, "pool", poolName, "members", stale, "writes", n)
	}
	return n, err
}

// removeDetachedMembers takes out of the pool the ip configurations of
// standalone network interfaces that belong to no node and are attached to
// no VM (read to be sure: a VM whose node has not registered yet keeps its
// member). Scale set members are left to their scale set's model.
func (p *Provider) removeDetachedMembers(ctx context.Context, lbName, poolID, poolName string, known map[string]bool) error {
	members, err := p.nicMembers(ctx, lbName, poolName)
	if err != nil {
		return err
	}
	var stale []string
	for _, id := range members {
		owner := names.IPConfigOwner(id)
		if owner == "" || known[owner] || strings.Contains(owner, "/virtualmachinescalesets/") {
			continue
		}
		rg, nicName, err := names.ParseID(owner)
		if err != nil {
			continue
		}
		nic, err := p.clients.Interface.Get(ctx, rg, nicName)
		if azure.Classify(err) == azure.ClassStale {
			continue // the NIC is gone, and its ip configuration with it
		}
		if err != nil {
			return fmt.Errorf("read network interface %s: %w", owner, err)
		}
		if nic.Properties != nil && nic.Properties.VirtualMachine == nil {
			stale = append(stale, id)
		}
	}
	if len(stale) == 0 {
		return nil
	}
	n, err := p.removeNICMembers(ctx, lbName, poolID, poolName, stale, "the network interfaces of deleted VMs")
	if n > 0 {
		noteRepair(ctx, RepairBackendPool, "backend pool %s/%s (network interfaces of deleted VMs)", lbName, poolName)
	}
	return err
}

// syncNICStates gives each node's NIC-derived entries the admin state its
// taints call for, and the pool its drain period; other entries are echoed
// unchanged.
func (p *Provider) syncNICStates(ctx context.Context, caller string, ref lbstore.PoolRef, nodes []*v1.Node) error {
	states := map[string]armnetwork.LoadBalancerBackendAddressAdminState{}
	for _, n := range nodes {
		keys, err := p.inventory.MemberKeys(ctx, n)
		if err != nil {
			return err
		}
		for _, k := range keys {
			states[k] = p.policy.State(n)
		}
	}
	r := p.store.UpdatePools(ctx, caller, []lbstore.PoolEdit{{Ref: ref, Edit: func(pool *armnetwork.BackendAddressPool) (bool, error) {
		changed := len(backendpool.SetNICStates(pool, states)) > 0
		return p.policy.SetDrainPeriod(pool) || changed, nil // the pool's drain period too
	}}}, lbstore.PoolOptions{TrustCache: true})[0]
	return r.Err
}

// leaveNICPools, in IP-based mode, takes a cluster pool's NIC-based
// members out (a switch from nodeIPConfiguration): scale set models, VMs and
// NICs stop listing it before IP entries are written (ARM does not mix the
// two kinds in one pool).
func (p *Provider) leaveNICPools(ctx context.Context, lbName string, families []v1.IPFamily) error {
	if p.nicPools == nil {
		return nil
	}
	lb, err := p.store.Get(ctx, lbName)
	if err != nil || lb == nil {
		return err
	}
	var pools []*armnetwork.BackendAddressPool
	for _, fam := range families {
		if pool := findPool(lb, names.ClusterPool(p.clusterName(), fam)); pool != nil && hasNICMembers(pool) {
			pools = append(pools, pool)
		}
	}
	if len(pools) == 0 {
		return nil
	}
	n, err := p.nicPools.DecouplePools(ctx, pools, "")
	if n > 0 {
		p.store.ExternalChange(lbName)
		logger(ctx).Info("Took NIC-based members out of the cluster pools (IP-based pools now)", "loadBalancer", lbName, "writes", n)
	}
	return err
}

func hasNICMembers(pool *armnetwork.BackendAddressPool) bool {
	if pool.Properties == nil {
		return false
	}
	if len(pool.Properties.BackendIPConfigurations) > 0 {
		return true
	}
	for _, a := range pool.Properties.LoadBalancerBackendAddresses {
		if backendpool.IsNICEntry(a) {
			return true
		}
	}
	return false
}

// eventSink forwards events to the Provider's recorder as it is when they
// happen (the recorder is set when the cloud is initialized).
type eventSink struct{ p *Provider }

var _ record.EventRecorder = eventSink{}

func (s eventSink) Event(obj runtime.Object, typ, reason, msg string) {
	s.p.recorder.Event(obj, typ, reason, msg)
}
func (s eventSink) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	s.p.recorder.Eventf(obj, typ, reason, format, args...)
}
func (s eventSink) AnnotatedEventf(obj runtime.Object, ann map[string]string, typ, reason, format string, args ...any) {
	s.p.recorder.AnnotatedEventf(obj, ann, typ, reason, format, args...)
}
