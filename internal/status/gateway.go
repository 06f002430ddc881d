package status

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/names"
)

// Gateway is what the cluster's ServiceGateway holds (pod-based load
// balancing).
type Gateway struct {
	Name      string
	Services  []*armnetwork.ServiceGatewayService
	Locations []*armnetwork.ServiceGatewayAddressLocationResponse
	// Egress are the outbound services other than the default: egress
	// identities.
	Egress []EgressIdentity
}

// EgressIdentity is one outbound service of the gateway with its NAT
// gateway.
type EgressIdentity struct {
	Name string
	// NAT is the NAT gateway's name ("" when the service names none);
	// Missing when it does not exist; Attached when its serviceGateway is
	// the gateway.
	NAT               string
	Missing, Attached bool
	// PublicIPs are the NAT gateway's public IP addresses.
	PublicIPs []string
}

// CollectGateway reads the services and address locations of the cluster's
// ServiceGateway in resourceGroup into the snapshot.
func CollectGateway(ctx context.Context, clients *azure.Clients, resourceGroup string, s *Snapshot) error {
	svcs, err := clients.ServiceGateway.GetServices(ctx, resourceGroup, names.ServiceGateway)
	if err != nil {
		return fmt.Errorf("read service gateway %s/%s: %w", resourceGroup, names.ServiceGateway, err)
	}
	locs, err := clients.ServiceGateway.GetAddressLocations(ctx, resourceGroup, names.ServiceGateway)
	if err != nil {
		return fmt.Errorf("read service gateway %s/%s: %w", resourceGroup, names.ServiceGateway, err)
	}
	s.Gateway = &Gateway{Name: names.ServiceGateway, Services: svcs, Locations: locs}
	for _, sv := range svcs {
		if sv == nil || sv.Properties == nil || ptr.Deref(sv.Properties.ServiceType, "") != armnetwork.ServiceTypeOutbound ||
			strings.EqualFold(str(sv.Name), names.DefaultOutboundService) {
			continue
		}
		eg := EgressIdentity{Name: str(sv.Name)}
		natID := ptr.Deref(sv.Properties.PublicNatGatewayID, "")
		if i := strings.LastIndex(natID, "/"); i >= 0 {
			eg.NAT = natID[i+1:]
		}
		if eg.NAT != "" && clients.NatGateway != nil {
			nat, err := clients.NatGateway.Get(ctx, resourceGroup, eg.NAT)
			switch {
			case azure.Classify(err) == azure.ClassStale:
				eg.Missing = true
			case err != nil:
				return fmt.Errorf("read NAT gateway %s/%s: %w", resourceGroup, eg.NAT, err)
			case nat.Properties != nil:
				eg.Attached = nat.Properties.ServiceGateway != nil && strings.HasSuffix(strings.ToLower(ptr.Deref(nat.Properties.ServiceGateway.ID, "")), "/servicegateways/"+names.ServiceGateway)
				for _, p := range nat.Properties.PublicIPAddresses {
					id := ptr.Deref(p.ID, "")
					name := id[strings.LastIndex(id, "/")+1:]
					pip, err := clients.PublicIP.Get(ctx, resourceGroup, name)
					if err == nil && pip.Properties != nil && pip.Properties.IPAddress != nil {
						eg.PublicIPs = append(eg.PublicIPs, *pip.Properties.IPAddress)
					}
				}
			}
		}
		s.Gateway.Egress = append(s.Gateway.Egress, eg)
	}
	return nil
}

// serviceOfUID names the Kubernetes Service behind a gateway service or a
// per-Service load balancer (named by the Service's UID), or "".
func (s *Snapshot) serviceOfUID(name string) string {
	return s.Services[strings.ToLower(name)]
}

// nodeOf names the node whose InternalIP is addr, or "".
func (s *Snapshot) nodeOf(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	for _, n := range s.Nodes {
		for _, na := range n.Status.Addresses {
			if b, err := netip.ParseAddr(na.Address); err == nil && na.Type == v1.NodeInternalIP && b == a {
				return n.Name
			}
		}
	}
	return ""
}

// renderGateway writes the gateway's services, and its addresses per
// location (node).
func renderGateway(w io.Writer, s *Snapshot) {
	g := s.Gateway
	addrs := 0
	for _, l := range g.Locations {
		addrs += len(l.Addresses)
	}
	fmt.Fprintf(w, "SERVICE GATEWAY %s\t%d services, %d locations, %d addresses\n", g.Name, len(g.Services), len(g.Locations), addrs)
	fmt.Fprintln(w, "  SERVICE\tTYPE\tKUBERNETES SERVICE\tPOOLS")
	svcs := slices.Clone(g.Services)
	slices.SortFunc(svcs, func(a, b *armnetwork.ServiceGatewayService) int { return cmp.Compare(str(a.Name), str(b.Name)) })
	for _, sv := range svcs {
		typ, pools := "", 0
		if sv.Properties != nil {
			typ = string(ptr.Deref(sv.Properties.ServiceType, ""))
			pools = len(sv.Properties.LoadBalancerBackendPools)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%d\n", str(sv.Name), typ, cmp.Or(s.serviceOfUID(str(sv.Name)), "-"), pools)
	}
	if len(g.Egress) > 0 {
		pods := map[string]int{}
		for _, l := range g.Locations {
			for _, a := range l.Addresses {
				for _, x := range a.Services {
					pods[ptr.Deref(x, "")]++
				}
			}
		}
		fmt.Fprintln(w, "  EGRESS IDENTITY\tNAT GATEWAY\tPUBLIC IPS\tPODS")
		eg := slices.Clone(g.Egress)
		slices.SortFunc(eg, func(a, b EgressIdentity) int { return cmp.Compare(a.Name, b.Name) })
		for _, e := range eg {
			nat := cmp.Or(e.NAT, "-")
			switch {
			case e.Missing:
				nat += " (missing)"
			case e.NAT != "" && !e.Attached:
				nat += " (detached)"
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%d\n", e.Name, nat, cmp.Or(strings.Join(e.PublicIPs, ","), "-"), pods[e.Name])
		}
	}
	locs := slices.Clone(g.Locations)
	slices.SortFunc(locs, func(a, b *armnetwork.ServiceGatewayAddressLocationResponse) int {
		return cmp.Compare(strings.ToLower(str(a.AddressLocation)), strings.ToLower(str(b.AddressLocation)))
	})
	for _, l := range locs {
		loc := str(l.AddressLocation)
		fmt.Fprintf(w, "  LOCATION %s\tnode %s\t%d addresses\n", loc, cmp.Or(s.nodeOf(loc), "-"), len(l.Addresses))
		if len(l.Addresses) > 0 {
			fmt.Fprintln(w, "    ADDRESS\tSERVICES")
		}
		for _, a := range l.Addresses {
			var svcs []string
			for _, x := range a.Services {
				n := ptr.Deref(x, "")
				svcs = append(svcs, cmp.Or(s.serviceOfUID(n), n))
			}
			slices.Sort(svcs)
			fmt.Fprintf(w, "    %s\t%s\n", str(a.Address), cmp.Or(strings.Join(svcs, ","), "-"))
		}
	}
	fmt.Fprintln(w)
}
