package verify

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbclass"
)

// What the documentation says about nodes and Services, read from the
// cluster. Each rule names the page it comes from.

// Labels and taints the documentation names.
const (
	labelExcludeLB       = "node.kubernetes.io/exclude-from-external-load-balancers"
	labelControlPlane    = "node-role.kubernetes.io/control-plane"
	labelMaster          = "node-role.kubernetes.io/master"
	taintToBeDeleted     = "ToBeDeletedByClusterAutoscaler"
	taintOutOfService    = "node.kubernetes.io/out-of-service"
	taintShutdown        = "node.cloudprovider.kubernetes.io/shutdown"
	taintDraining        = "cloudprovider.azure.microsoft.com/draining"
	drainingSpotEviction = "spot-eviction"

	labelAgentPool      = "kubernetes.azure.com/agentpool"
	labelAgentPoolShort = "agentpool"
)

// wantsLoadBalancer: a LoadBalancer Service of azlb's (lbclass: of the
// class it serves, or without one when it serves none) that is not being
// deleted.
func wantsLoadBalancer(c lbclass.Class, svc *v1.Service) bool {
	return c.Owns(svc) && svc.DeletionTimestamp == nil
}

// othersLoadBalancer: a LoadBalancer Service of another implementation
// (install.md, AKS; configuration.md, --load-balancer-class): azlb writes
// nothing for it, and what it has is not azlb's to judge.
func othersLoadBalancer(c lbclass.Class, svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && !c.Owns(svc)
}

// className describes a Service's class for a message.
func className(svc *v1.Service) string {
	if svc.Spec.LoadBalancerClass == nil {
		return "no loadBalancerClass"
	}
	return "loadBalancerClass " + *svc.Spec.LoadBalancerClass
}

// families is spec.ipFamilies, IPv4 when unset (load-balancers.md, Dual-stack).
func families(svc *v1.Service) []v1.IPFamily {
	if len(svc.Spec.IPFamilies) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return svc.Spec.IPFamilies
}

func isLocal(svc *v1.Service) bool {
	return svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// poolEligible: the nodes that may be in any backend pool
// (load-balancers.md, Backend pools; multiple-load-balancers.md, Local
// Services): not labelled exclude-from-external-load-balancers (any value
// but "false"), not a control-plane node while excludeMasterFromStandardLB,
// not being deleted, not tainted ToBeDeletedByClusterAutoscaler.
func poolEligible(cfg *config.Config, n *v1.Node) (bool, string) {
	if v, ok := n.Labels[labelExcludeLB]; ok && !strings.EqualFold(strings.TrimSpace(v), "false") {
		return false, "labelled " + labelExcludeLB
	}
	if cfg.ExcludeMasterFromStandardLB == nil || *cfg.ExcludeMasterFromStandardLB {
		for _, l := range []string{labelControlPlane, labelMaster} {
			if _, ok := n.Labels[l]; ok {
				return false, "a control-plane node (excludeMasterFromStandardLB)"
			}
		}
	}
	if n.DeletionTimestamp != nil {
		return false, "being deleted"
	}
	for _, t := range n.Spec.Taints {
		if t.Key == taintToBeDeleted {
			return false, "tainted " + taintToBeDeleted
		}
	}
	return true, ""
}

// internalIP is the node's first InternalIP of the family, canonical; "".
func internalIP(n *v1.Node, fam v1.IPFamily) string {
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		if ip.Is4() == (fam == v1.IPv4Protocol) {
			return ip.String()
		}
	}
	return ""
}

// outOfService lists the taints that take the node out of rotation
// (admin-state.md): out-of-service and shutdown with any value,
// draining=spot-eviction with that value only; any effect; then those of
// loadBalancerAdminStateTaints (configuredTaints).
func outOfService(cfg *config.Config, n *v1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		switch {
		case t.Key == taintOutOfService, t.Key == taintShutdown,
			t.Key == taintDraining && t.Value == drainingSpotEviction:
			if !slices.Contains(out, t.Key) {
				out = append(out, t.Key)
			}
		}
	}
	for _, k := range configuredTaints(cfg, n) {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// wantAdminState is the admin state every entry of the node must carry:
// Down while it has one of the taints and the feature is on, else None
// (admin-state.md; configuration.md, enableLoadBalancerAdminState).
func wantAdminState(cfg *config.Config, n *v1.Node) string {
	if cfg.EnableLoadBalancerAdminState != nil && !*cfg.EnableLoadBalancerAdminState {
		return "None"
	}
	if len(outOfService(cfg, n)) > 0 {
		return "Down"
	}
	return "None"
}

// vmSet is the node's agent pool (multiple-load-balancers.md, Node
// placement): kubernetes.azure.com/agentpool, or agentpool when that is
// missing or blank.
func vmSet(n *v1.Node) string {
	if v := strings.TrimSpace(n.Labels[labelAgentPool]); v != "" {
		return v
	}
	return strings.TrimSpace(n.Labels[labelAgentPoolShort])
}

// localPoolNodes is what a Local Service's pool must hold
// (multiple-load-balancers.md, Local Services; admin-state.md, Rolling
// updates), from all of its EndpointSlices, per node by its endpoints of
// the Service:
//
//   - a ready endpoint (ready true or unset, and not terminating): the node
//     is a member, with the admin state its taints call for;
//   - only endpoints that are terminating with serving set to true (an
//     unset serving is not serving): a member, and draining (Down) when
//     another node has a ready endpoint; when none has, it is an ordinary
//     member (it still takes traffic). With enableLoadBalancerAdminState
//     false a draining node is no member at all (no Down is written);
//   - anything else (not ready, terminating and not serving): not a
//     member.
func localPoolNodes(cfg *config.Config, svc *v1.Service, slices []*discoveryv1.EndpointSlice) (members, draining map[string]bool) {
	ready, serving := map[string]bool{}, map[string]bool{}
	for _, s := range slices {
		if s.Namespace != svc.Namespace || s.Labels[discoveryv1.LabelServiceName] != svc.Name {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			c := ep.Conditions
			switch {
			case c.Terminating != nil && *c.Terminating:
				if c.Serving != nil && *c.Serving {
					serving[*ep.NodeName] = true
				}
			case c.Ready == nil || *c.Ready:
				ready[*ep.NodeName] = true
			}
		}
	}
	adminState := cfg.EnableLoadBalancerAdminState == nil || *cfg.EnableLoadBalancerAdminState
	members, draining = map[string]bool{}, map[string]bool{}
	for n := range ready {
		members[n] = true
	}
	for n := range serving {
		switch {
		case ready[n]:
		case len(ready) == 0:
			members[n] = true
		case adminState:
			members[n], draining[n] = true, true
		}
	}
	return members, draining
}

// configEntry is one multiple-SLB configuration.
type configEntry = config.MultipleStandardLoadBalancerConfiguration

// checkDrainingState: the entry of a node draining for a Local Service
// (localPoolNodes) is Down, whatever its taints (admin-state.md, Rolling
// updates).
func (m *nodeMode) checkDrainingState(obj, entry string, got *armnetwork.LoadBalancerBackendAddressAdminState) {
	if g := string(ptr.Deref(got, "")); !strings.EqualFold(g, "Down") {
		if g == "" {
			g = "None"
		}
		m.r.add(obj, "admin-state.md#local-services-the-node-stays-down",
			"entry %s has adminState %s, want Down (the node's endpoints of the Service are all terminating but serving, and another node has a ready one)", entry, g)
	}
}
