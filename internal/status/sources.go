package status

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
)

// keyDisableNSGRule: azlb writes no security rule for the Service
// (docs/security-groups.md).
const keyDisableNSGRule = annotations.Prefix + "azure-disable-load-balancer-nsg-rule"

// CollectSecurityGroup reads the network security group azure.json names
// (name "" : none configured, nothing is read) into the snapshot, once. An
// NSG that does not exist is shown as such, not an error.
func CollectSecurityGroup(ctx context.Context, clients *azure.Clients, resourceGroup, name string, s *Snapshot) error {
	s.SecurityGroupName = name
	if name == "" {
		return nil
	}
	sg, err := clients.SecurityGroup.Get(ctx, resourceGroup, name)
	if azure.Classify(err) == azure.ClassStale {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read security group %s/%s: %w", resourceGroup, name, err)
	}
	s.SecurityGroup = sg
	return nil
}

// secRule is one of azlb's inbound rules (name k8s-azure-lb*, priority
// 500-4096), flattened.
type secRule struct {
	allow               bool
	sources, dsts, port []string
}

func (s *Snapshot) azlbRules() []secRule {
	if s.SecurityGroup == nil || s.SecurityGroup.Properties == nil {
		return nil
	}
	var out []secRule
	for _, r := range s.SecurityGroup.Properties.SecurityRules {
		if r == nil || r.Properties == nil {
			continue
		}
		p := r.Properties
		prio := ptr.Deref(p.Priority, 0)
		if !strings.HasPrefix(strings.ToLower(str(r.Name)), "k8s-azure-lb") || prio < 500 || prio > 4096 ||
			!strings.EqualFold(string(ptr.Deref(p.Direction, "")), "Inbound") {
			continue
		}
		out = append(out, secRule{
			allow:   strings.EqualFold(string(ptr.Deref(p.Access, "")), "Allow"),
			sources: both(p.SourceAddressPrefix, p.SourceAddressPrefixes),
			dsts:    both(p.DestinationAddressPrefix, p.DestinationAddressPrefixes),
			port:    both(p.DestinationPortRange, p.DestinationPortRanges),
		})
	}
	return out
}

func both(one *string, many []*string) []string {
	var out []string
	if v := str(one); v != "" {
		out = append(out, v)
	}
	for _, v := range many {
		if v := str(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func isTrue(svc *v1.Service, key string) bool {
	return strings.EqualFold(strings.TrimSpace(svc.Annotations[key]), "true")
}

// sources says who azlb's rules in the NSG let reach a frontend's Service
// on the frontend's family: the sources of the allow rules holding its
// destinations (the frontend address and the Service ports; with floating
// IP off the nodes' addresses and the node ports), plus the virtual network
// for an internal Service no deny-all covers.
func (s *Snapshot) sources(lbName string, fe *armnetwork.FrontendIPConfiguration) string {
	if s.serviceOfUID(lbName) != "" {
		return "-" // pod-based: not covered by the NSG page
	}
	svc := s.Objects[strings.ToLower(strings.TrimSuffix(str(fe.Name), "-IPv6"))]
	if svc == nil || !s.Class.Owns(svc) {
		return "-" // no LoadBalancer Service, or another implementation's
	}
	switch {
	case s.SecurityGroupName == "":
		return "NSG not configured"
	case s.SecurityGroup == nil:
		return "NSG " + s.SecurityGroupName + " not found"
	case isTrue(svc, keyDisableNSGRule):
		return "none (nsg rule disabled)"
	}
	addr, err := netip.ParseAddr(s.address(fe))
	if err != nil {
		return "-" // no address yet
	}
	dsts := []netip.Addr{addr.Unmap()}
	var ports []int32
	floating := !isTrue(svc, annotations.KeyDisableFloatingIP)
	for _, p := range svc.Spec.Ports {
		if floating {
			ports = append(ports, p.Port)
		} else if p.NodePort != 0 {
			ports = append(ports, p.NodePort)
		}
	}
	if !floating {
		dsts = nil
		for _, n := range s.Nodes {
			for _, a := range n.Status.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == v1.NodeInternalIP && ip.Is4() == addr.Is4() {
					dsts = append(dsts, ip.Unmap())
				}
			}
		}
	}
	var srcs []string
	denied := false
	for _, r := range s.azlbRules() {
		if !holdsAny(r.dsts, dsts) {
			continue
		}
		if !r.allow {
			denied = true
			continue
		}
		if !slices.ContainsFunc(ports, func(p int32) bool { return coversPort(r.port, p) }) {
			continue
		}
		for _, src := range r.sources {
			if !slices.Contains(srcs, src) {
				srcs = append(srcs, src)
			}
		}
	}
	slices.Sort(srcs)
	if isTrue(svc, annotations.KeyInternal) && !denied {
		if len(srcs) == 0 {
			return "virtual network only"
		}
		srcs = append(srcs, "virtual network")
	}
	if len(srcs) == 0 {
		return "none"
	}
	return strings.Join(srcs, ", ")
}

func holdsAny(prefixes []string, addrs []netip.Addr) bool {
	for _, p := range prefixes {
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(p); err == nil && ip.Unmap() == a {
				return true
			}
			if pr, err := netip.ParsePrefix(p); err == nil && pr.Contains(a) {
				return true
			}
		}
	}
	return false
}

// coversPort: one of the rule's port ranges ("*", "80", "80-90") holds p.
func coversPort(ranges []string, p int32) bool {
	for _, r := range ranges {
		r = strings.TrimSpace(r)
		if r == "*" {
			return true
		}
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(strings.TrimSpace(lo))
		b, err2 := strconv.Atoi(strings.TrimSpace(hi))
		if err1 == nil && err2 == nil && int(p) >= a && int(p) <= b {
			return true
		}
	}
	return false
}
