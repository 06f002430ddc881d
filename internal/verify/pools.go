package verify

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
)

// checkLeftovers: a managed load balancer without frontends should have
// been deleted; every frontend, rule and probe belongs to a Service that
// wants a load balancer; every pool is a cluster pool or the dedicated pool
// of a Local Service on this load balancer (load-balancers.md,
// EnsureLoadBalancerDeleted; multiple-load-balancers.md, Local Services).
func (m *nodeMode) checkLeftovers(lb *armnetwork.LoadBalancer) {
	name := ptr.Deref(lb.Name, "")
	obj := lbObject(name)
	doc := "load-balancers.md#how-a-reconcile-works"
	if len(frontendsOf(lb)) == 0 {
		m.r.add(obj, doc, "has no frontends: it should have been deleted")
	}
	owner := func(child string) bool {
		for base := range m.bases {
			if names.Owns(base, child) {
				return true
			}
		}
		return false
	}
	for _, fe := range frontendsOf(lb) {
		// A shared frontend stays, under its first Service's name, while
		// another Service's rules use it (load-balancers.md, Sharing an IP).
		if n := ptr.Deref(fe.Name, ""); !owner(n) && !usedByRules(lb, fe, owner) {
			m.r.add(obj, doc, "frontend %s belongs to no LoadBalancer Service (a deleted Service's?): it should have been removed", n)
		}
	}
	referencedProbes := map[string]bool{}
	for _, r := range rulesOf(lb) {
		if n := ptr.Deref(r.Name, ""); !owner(n) {
			m.r.add(obj, doc, "rule %s belongs to no LoadBalancer Service: it should have been removed", n)
		}
		if r.Properties != nil {
			referencedProbes[childName(r.Properties.Probe)] = true
		}
	}
	for _, p := range probesOf(lb) {
		n := ptr.Deref(p.Name, "")
		switch {
		case strings.EqualFold(n, names.SharedProbe):
			if !referencedProbes[lower(n)] {
				m.r.add(obj, "load-balancers.md#azurejson-settings", "shared probe %s is used by no rule: it should have been removed", n)
			}
		case !owner(n):
			m.r.add(obj, doc, "probe %s belongs to no LoadBalancer Service: it should have been removed", n)
		}
	}
	local := m.localPools[lower(name)]
	for _, p := range poolsOf(lb) {
		n := ptr.Deref(p.Name, "")
		if m.isClusterPool(n) {
			continue
		}
		if _, ok := local[lower(n)]; ok || m.claimed[lower(name)][lower(n)] {
			continue
		}
		m.r.add(obj, "multiple-load-balancers.md#externaltrafficpolicylocal-services",
			"pool %s is neither a cluster pool nor the dedicated pool of a Local Service on this load balancer: it should have been removed", n)
	}
}

func (m *nodeMode) isClusterPool(n string) bool {
	return strings.EqualFold(n, names.ClusterPool(m.cluster, v1.IPv4Protocol)) || strings.EqualFold(n, names.ClusterPool(m.cluster, v1.IPv6Protocol))
}

func clusterPoolFamily(cluster, pool string) v1.IPFamily {
	if strings.EqualFold(pool, names.ClusterPool(cluster, v1.IPv6Protocol)) {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// checkPools checks the members of the pools rules use: cluster pools
// (every eligible node, or in multiple-SLB mode the nodes placed on this
// configuration: checkNodePlacement) and Local Services' pools (the nodes
// of their ready endpoints, and their draining nodes Down:
// localPoolNodes). A cluster pool no rule uses carries no traffic: only
// its entries' admin state is judged (admin-state.md: every entry of the
// node, on every load balancer).
func (m *nodeMode) checkPools(lb *armnetwork.LoadBalancer) {
	name := ptr.Deref(lb.Name, "")
	used := rulePools(lb)
	local := m.localPools[lower(name)]
	for _, p := range poolsOf(lb) {
		pn := ptr.Deref(p.Name, "")
		switch {
		case m.isClusterPool(pn) && used[lower(pn)]:
			m.checkDrainPeriod(name, p)
			fam := clusterPoolFamily(m.cluster, pn)
			if m.nic {
				m.checkNICPool(name, p, fam)
				continue
			}
			if m.multi {
				// Membership is judged per node (checkNodePlacement); the
				// entries' content here.
				m.checkEntries(name, p, fam, m.eligibleWithIP(fam, nil), false, nil)
				continue
			}
			m.checkEntries(name, p, fam, m.eligibleWithIP(fam, nil), true, nil)
		case m.isClusterPool(pn):
			m.checkIdleAdminState(name, p)
		case local[lower(pn)].svc != nil:
			m.checkDrainPeriod(name, p)
			lp := local[lower(pn)]
			members, draining := localPoolNodes(m.cfg, lp.svc, m.s.Slices)
			m.checkEntries(name, p, lp.fam, m.eligibleWithIP(lp.fam, members), true, draining)
		}
	}
	for pn, lp := range local {
		if !slices.ContainsFunc(poolsOf(lb), func(p *armnetwork.BackendAddressPool) bool { return strings.EqualFold(ptr.Deref(p.Name, ""), pn) }) {
			m.r.add(serviceObject(lp.svc), "multiple-load-balancers.md#externaltrafficpolicylocal-services",
				"load balancer %s has no dedicated pool %s", name, names.LocalServicePool(lp.svc.Namespace, lp.svc.Name, lp.fam))
		}
	}
}

// checkIdleAdminState checks the admin state of the entries of a cluster
// pool no rule uses: those of known nodes follow their taints like any
// other entry.
func (m *nodeMode) checkIdleAdminState(lbName string, p *armnetwork.BackendAddressPool) {
	obj := fmt.Sprintf("pool %s/%s", lbName, ptr.Deref(p.Name, ""))
	owners := map[string]string{} // lower-cased ip configuration owner -> node
	if m.nic {
		for name, vm := range m.s.VMs {
			for _, o := range vm.Owners {
				owners[o] = name
			}
		}
	}
	for _, e := range entriesOf(p) {
		ep := e.Properties
		if ep == nil {
			continue
		}
		node, entry := ptr.Deref(e.Name, ""), ptr.Deref(e.Name, "")
		if ep.NetworkInterfaceIPConfiguration != nil {
			id := ptr.Deref(ep.NetworkInterfaceIPConfiguration.ID, "")
			node, entry = owners[names.IPConfigOwner(id)], cmp.Or(entry, id)
		}
		if n := m.nodes[node]; n != nil {
			m.checkAdminState(obj, entry, ep.AdminState, n)
		}
	}
}

// eligibleWithIP: the eligible nodes with an InternalIP of the family,
// limited to only when only is not nil.
func (m *nodeMode) eligibleWithIP(fam v1.IPFamily, only map[string]bool) map[string]bool {
	out := map[string]bool{}
	for _, n := range m.s.Nodes {
		if only != nil && !only[n.Name] {
			continue
		}
		if ok, _ := poolEligible(m.cfg, n); ok && internalIP(n, fam) != "" {
			out[n.Name] = true
		}
	}
	return out
}

// checkEntries checks an IP-based pool: each entry is named after a node
// and holds its InternalIP of the family, the cluster's virtual network and
// the admin state its taints call for (load-balancers.md, Backend pools;
// admin-state.md). Only nodes in want may be there; with exact, all of
// them must be. The entries of the nodes in draining (a Local Service's
// nodes whose endpoints all terminate: localPoolNodes) must be Down.
func (m *nodeMode) checkEntries(lbName string, p *armnetwork.BackendAddressPool, fam v1.IPFamily, want map[string]bool, exact bool, draining map[string]bool) {
	pn := ptr.Deref(p.Name, "")
	obj := fmt.Sprintf("pool %s/%s", lbName, pn)
	doc := "load-balancers.md#backend-pools"
	got := map[string]bool{}
	for _, e := range entriesOf(p) {
		ename := ptr.Deref(e.Name, "")
		ep := e.Properties
		if ep != nil && ep.NetworkInterfaceIPConfiguration != nil {
			m.r.add(obj, "nic-pools.md#switching-between-the-two-kinds", "has NIC-based member %s in an IP-based (nodeIP) pool", ptr.Deref(ep.NetworkInterfaceIPConfiguration.ID, ""))
			continue
		}
		got[ename] = true
		n := m.nodes[ename]
		if n == nil {
			m.r.add(obj, doc, "entry %s names no node (a deleted node's?): it should have left the pool", ename)
			continue
		}
		if !want[ename] && !mayLinger(m.cfg, n) {
			_, why := poolEligible(m.cfg, n)
			if why == "" {
				why = "not one of the nodes this pool holds"
				if internalIP(n, fam) == "" {
					why = "no InternalIP of family " + string(fam)
				}
			}
			m.r.add(obj, doc, "holds node %s, which does not belong: %s", ename, why)
			continue
		}
		if ep == nil {
			m.r.add(obj, doc, "entry %s has no properties", ename)
			continue
		}
		if ip := canonical(ptr.Deref(ep.IPAddress, "")); ip != internalIP(n, fam) {
			m.r.add(obj, doc, "entry %s has address %s, want the node's InternalIP %s", ename, ip, internalIP(n, fam))
		}
		if m.vnetID != "" {
			vnet := ""
			if ep.VirtualNetwork != nil {
				vnet = ptr.Deref(ep.VirtualNetwork.ID, "")
			}
			if vnet != "" && !strings.EqualFold(vnet, m.vnetID) {
				m.r.add(obj, doc, "entry %s references virtual network %s, want %s", ename, vnet, m.vnetID)
			}
		}
		if draining[ename] {
			m.checkDrainingState(obj, ename, ep.AdminState)
		} else {
			m.checkAdminState(obj, ename, ep.AdminState, n)
		}
	}
	if !exact {
		return
	}
	for _, n := range sortedKeys(want) {
		if !got[n] {
			m.r.add(obj, doc, "lacks node %s", n)
		}
	}
}

func (m *nodeMode) checkAdminState(obj, entry string, got *armnetwork.LoadBalancerBackendAddressAdminState, n *v1.Node) {
	g := string(ptr.Deref(got, armnetwork.LoadBalancerBackendAddressAdminStateNone))
	if g == "" {
		g = "None"
	}
	want := wantAdminState(m.cfg, n)
	if !strings.EqualFold(g, want) {
		why := "no out-of-service taint"
		if taints := outOfService(m.cfg, n); len(taints) > 0 {
			why = "taints " + strings.Join(taints, ", ")
		}
		m.r.add(obj, "admin-state.md#what-takes-a-node-out-of-rotation", "entry %s (node %s) has adminState %s, want %s (%s)", entry, n.Name, g, want, why)
	}
}

// checkNICPool checks a NIC-based pool (nic-pools.md): the ip
// configurations of eligible nodes whose VM runs are members; a node whose
// VM is not running may stay; an excluded node's member leaves unless that
// would empty the pool; no member belongs to something that is not a node;
// IP entries do not mix in; every member's admin state follows its node.
func (m *nodeMode) checkNICPool(lbName string, p *armnetwork.BackendAddressPool, fam v1.IPFamily) {
	pn := ptr.Deref(p.Name, "")
	obj := fmt.Sprintf("pool %s/%s", lbName, pn)
	doc := "nic-pools.md#how-a-node-joins"
	owners := map[string]string{} // lower-cased owner id -> node
	for name, vm := range m.s.VMs {
		for _, o := range vm.Owners {
			owners[o] = name
		}
	}
	members := map[string]bool{}
	var excludedMembers []string
	total := 0
	for _, e := range entriesOf(p) {
		ep := e.Properties
		if ep == nil || ep.NetworkInterfaceIPConfiguration == nil {
			m.r.add(obj, "nic-pools.md#switching-between-the-two-kinds", "has IP entry %s in a NIC-based pool", ptr.Deref(e.Name, ""))
			continue
		}
		total++
		id := ptr.Deref(ep.NetworkInterfaceIPConfiguration.ID, "")
		node := owners[names.IPConfigOwner(id)]
		if node == "" {
			m.r.add(obj, "nic-pools.md#who-is-left-out", "member %s belongs to no node's VM", id)
			continue
		}
		members[node] = true
		n := m.nodes[node]
		if ok, _ := poolEligible(m.cfg, n); !ok && !mayLinger(m.cfg, n) {
			excludedMembers = append(excludedMembers, node)
		}
		m.checkAdminState(obj, ptr.Deref(e.Name, id), ep.AdminState, n)
	}
	if len(excludedMembers) > 0 && len(excludedMembers) < total {
		sort.Strings(excludedMembers)
		for _, n := range excludedMembers {
			_, why := poolEligible(m.cfg, m.nodes[n])
			m.r.add(obj, "nic-pools.md#who-is-left-out", "holds node %s, which does not belong (%s) and whose removal would not empty the pool", n, why)
		}
	}
	for _, n := range m.s.Nodes {
		if ok, _ := poolEligible(m.cfg, n); !ok || members[n.Name] {
			continue
		}
		if fam == v1.IPv6Protocol && internalIP(n, fam) == "" {
			continue
		}
		vm, ok := m.s.VMs[n.Name]
		if !ok || !vm.Exists || !vm.Running {
			continue // not an Azure VM azlb can use, gone, or not running: left out (nic-pools.md)
		}
		if hasTaint(n, "node.cloudprovider.kubernetes.io/uninitialized") {
			continue
		}
		m.r.add(obj, doc, "lacks node %s (its VM runs)", n.Name)
	}
}

func hasTaint(n *v1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t v1.Taint) bool { return t.Key == key })
}

// checkNodePlacement (multiple-load-balancers.md, Node placement): a node
// is in the cluster pools of one configuration only, and that one is a
// valid target for it (its VM set's primary configuration; else those whose
// nodeSelector matches; else those without one). Its public and internal
// load balancers both hold it where their cluster pool is used. A node in
// no used cluster pool is a finding only when every target's cluster pool
// is used.
func (m *nodeMode) checkNodePlacement() {
	confs := m.cfg.MultipleStandardLoadBalancerConfigurations
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		pool := lower(names.ClusterPool(m.cluster, fam))
		// where[config][lb] = members of that load balancer's used pool
		used := map[string]map[string]map[string]bool{}
		for lbKey, lb := range m.managed {
			if !rulePools(lb)[pool] {
				continue
			}
			cfgKey := lower(names.PublicLB(lbKey))
			for _, p := range poolsOf(lb) {
				if lower(ptr.Deref(p.Name, "")) != pool {
					continue
				}
				if used[cfgKey] == nil {
					used[cfgKey] = map[string]map[string]bool{}
				}
				set := map[string]bool{}
				for _, e := range entriesOf(p) {
					set[ptr.Deref(e.Name, "")] = true
				}
				used[cfgKey][lbKey] = set
			}
		}
		for _, n := range m.s.Nodes {
			if ok, _ := poolEligible(m.cfg, n); !ok || internalIP(n, fam) == "" {
				continue
			}
			targets := nodeTargets(confs, n)
			var in []string
			for _, cfgKey := range sortedKeys(used) {
				for _, lbKey := range sortedKeys(used[cfgKey]) {
					if used[cfgKey][lbKey][n.Name] {
						in = append(in, cfgKey)
						break
					}
				}
			}
			obj := "node " + n.Name
			doc := "multiple-load-balancers.md#node-placement"
			switch {
			case len(in) > 1:
				m.r.add(obj, doc, "is in the %s cluster pools of %d configurations (%s); a node is in exactly one", fam, len(in), strings.Join(in, ", "))
			case len(in) == 1:
				if !slices.Contains(targets, in[0]) {
					m.r.add(obj, doc, "is in the %s cluster pool of %s, which is not a valid target for it (targets: %s)", fam, in[0], strings.Join(targets, ", "))
				}
				for _, lbKey := range sortedKeys(used[in[0]]) {
					if !used[in[0]][lbKey][n.Name] {
						m.r.add(obj, doc, "is in the %s cluster pool of configuration %s but not in that of load balancer %s", fam, in[0], lbKey)
					}
				}
			case len(targets) > 0 && !slices.ContainsFunc(targets, func(t string) bool { return used[t] == nil }):
				m.r.add(obj, doc, "is in no %s cluster pool, though every target (%s) has one in use", fam, strings.Join(targets, ", "))
			}
		}
	}
}

// nodeTargets are the lower-cased configurations a node may be placed on.
func nodeTargets(confs []configEntry, n *v1.Node) []string {
	var out []string
	if set := vmSet(n); set != "" {
		for _, c := range confs {
			if c.PrimaryVMSet != "" && strings.EqualFold(c.PrimaryVMSet, set) {
				return []string{lower(c.Name)}
			}
		}
	}
	for _, c := range confs {
		if c.NodeSelector != nil && selectorMatches(c.NodeSelector, n.Labels) {
			out = append(out, lower(c.Name))
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, c := range confs {
		if c.NodeSelector == nil {
			out = append(out, lower(c.Name))
		}
	}
	return out
}

// usedByRules reports whether a rule of a Service (owner) uses the
// frontend.
func usedByRules(lb *armnetwork.LoadBalancer, fe *armnetwork.FrontendIPConfiguration, owner func(string) bool) bool {
	for _, r := range rulesOf(lb) {
		if r.Properties != nil && owner(ptr.Deref(r.Name, "")) && strings.EqualFold(childName(r.Properties.FrontendIPConfiguration), ptr.Deref(fe.Name, "")) {
			return true
		}
	}
	return false
}
