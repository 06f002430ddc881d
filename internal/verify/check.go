package verify

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
)

// Finalizers whose presence on a Service being deleted means its cleanup
// has not finished (load-balancers.md; container-load-balancer.md).
const (
	finalizerServiceController = "service.kubernetes.io/load-balancer-cleanup"
	finalizerServiceGateway    = "servicegateway.azure.com/service-cleanup"
)

// Check compares the snapshot with the documented behaviour. It is pure.
func Check(s *Snapshot) *Report {
	r := &Report{Services: len(s.Services), Nodes: len(s.Nodes), LoadBalancers: len(s.LoadBalancers), PublicIPs: len(s.PublicIPs)}
	checkClassNames(s, r)
	for _, svc := range s.Services {
		// Another implementation's Service: its finalizer is its own to
		// remove. A Service that is no longer a LoadBalancer has no class
		// (the API server wipes it): whosever it was, the cleanup is due.
		if svc.DeletionTimestamp == nil || othersLoadBalancer(s.Class, svc) {
			continue
		}
		for _, f := range svc.Finalizers {
			if f == finalizerServiceController || f == finalizerServiceGateway {
				r.add(serviceObject(svc), "load-balancers.md#how-a-reconcile-works",
					"is being deleted but still has the finalizer %s: its load balancer cleanup has not finished", f)
			}
		}
	}
	switch {
	case s.Config.ServiceGatewayEnabled:
		r.Mode = "pod-based"
		checkPodMode(s, r)
	case nicBased(s.Config):
		r.Mode = "NIC-based pools"
		checkNodeMode(s, r)
	default:
		r.Mode = "IP-based pools"
		checkNodeMode(s, r)
	}
	r.sort()
	return r
}

// checkNodeMode checks node-pool load balancing: the security group, the
// Services, the load balancers and the Private Link Services (those of the
// Services azlb refuses are left as they are).
func checkNodeMode(s *Snapshot, r *Report) {
	checkSecurityGroupConfig(s, r)
	m := newNodeMode(s, r)
	m.check()
	checkPrivateLinks(s, r, m.refused)
}

// checkClassNames warns, as the controller does, when azlb serves a class
// under the load balancer name the default implementation on Azure uses
// (install.md, AKS): that implementation's load balancers are then judged
// as azlb's.
func checkClassNames(s *Snapshot, r *Report) {
	if s.Class.IsDefault() || s.Config.ServiceGatewayEnabled {
		return
	}
	if name := s.Config.DefaultLoadBalancerName(); strings.EqualFold(name, config.DefaultClusterName) {
		r.Warnings = append(r.Warnings, fmt.Sprintf("load balancer name %q with --load-balancer-class=%s: the default implementation on Azure "+
			"(AKS's or the upstream cloud controller manager) uses that name too, and its load balancers are judged as azlb's; "+
			"set clusterName (or loadBalancerName) so that azlb's are its own (docs/install.md#aks)", name, s.Class))
	}
}

// checkSecurityGroupConfig notes, in the node-pool modes, which security
// group the report judged: none configured (no NSG checks), or one that
// does not exist (a finding: azlb cannot write any rule).
func checkSecurityGroupConfig(s *Snapshot, r *Report) {
	name := s.Config.SecurityGroupName
	switch {
	case name == "":
		r.SecurityGroup = "none configured"
	case s.SecurityGroupNotFound:
		r.SecurityGroup = name
		r.add("security group "+name, docNSGSetup, "does not exist in resource group %s: azlb never creates it, and cannot write the rules of any Service until it exists",
			cmpOr(s.Config.SecurityGroupResourceGroup, s.Config.ResourceGroup))
	default:
		r.SecurityGroup = name
	}
}

func serviceObject(svc *v1.Service) string { return "service " + svc.Namespace + "/" + svc.Name }

func lbObject(name string) string { return "load balancer " + name }

func lower(s string) string { return strings.ToLower(s) }

// childName is the last segment of a reference's id, lower-cased.
func childName(ref *armnetwork.SubResource) string {
	if ref == nil {
		return ""
	}
	return lower(names.ChildName(ptr.Deref(ref.ID, "")))
}

// parentLB is the load balancer name in a child id, lower-cased.
func parentLB(id string) string {
	l := lower(id)
	const seg = "/loadbalancers/"
	i := strings.Index(l, seg)
	if i < 0 {
		return ""
	}
	rest := l[i+len(seg):]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

func tagValue(tags map[string]*string, key string) (string, bool) {
	for k, v := range tags {
		if strings.EqualFold(k, key) {
			return ptr.Deref(v, ""), true
		}
	}
	return "", false
}

// props are nil-safe accessors of the load balancer's children.
func frontendsOf(lb *armnetwork.LoadBalancer) []*armnetwork.FrontendIPConfiguration {
	if lb.Properties == nil {
		return nil
	}
	return lb.Properties.FrontendIPConfigurations
}

func rulesOf(lb *armnetwork.LoadBalancer) []*armnetwork.LoadBalancingRule {
	if lb.Properties == nil {
		return nil
	}
	return lb.Properties.LoadBalancingRules
}

func probesOf(lb *armnetwork.LoadBalancer) []*armnetwork.Probe {
	if lb.Properties == nil {
		return nil
	}
	return lb.Properties.Probes
}

func poolsOf(lb *armnetwork.LoadBalancer) []*armnetwork.BackendAddressPool {
	if lb.Properties == nil {
		return nil
	}
	return lb.Properties.BackendAddressPools
}

func entriesOf(p *armnetwork.BackendAddressPool) []*armnetwork.LoadBalancerBackendAddress {
	if p == nil || p.Properties == nil {
		return nil
	}
	return p.Properties.LoadBalancerBackendAddresses
}

// rulePools is the set of (lower-cased) pool names the load balancer's rules
// send traffic to.
func rulePools(lb *armnetwork.LoadBalancer) map[string]bool {
	out := map[string]bool{}
	for _, r := range rulesOf(lb) {
		if r.Properties == nil {
			continue
		}
		if n := childName(r.Properties.BackendAddressPool); n != "" {
			out[n] = true
		}
		for _, p := range r.Properties.BackendAddressPools {
			if n := childName(p); n != "" {
				out[n] = true
			}
		}
	}
	return out
}
