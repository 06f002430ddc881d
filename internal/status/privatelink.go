package status

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/privatelink"
)

// CollectPrivateLinks reads the Private Link Services to show: those of
// resource group rg (privateLinkServiceResourceGroup) and of every
// Service's azure-pls-resource-group that carry the cluster's tag
// (clusterName) or serve a frontend of the snapshot's load balancers.
func CollectPrivateLinks(ctx context.Context, clients *azure.Clients, rg, clusterName string, s *Snapshot) error {
	c, _, err := privatelink.NewClients(clients.NetworkSubscriptionID(), clients.NetworkCredential(), clients.ARMClientOptions("azlb-status"), 0)
	if err != nil {
		return err
	}
	svcs := make([]*v1.Service, 0, len(s.Objects))
	for _, svc := range s.Objects {
		svcs = append(svcs, svc)
	}
	all, err := privatelink.ListAll(ctx, c, privatelink.ResourceGroups(rg, svcs))
	if err != nil {
		return err
	}
	frontends := map[string]bool{}
	for _, lb := range s.LoadBalancers {
		if lb.Properties == nil {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if fe.ID != nil {
				frontends[strings.ToLower(*fe.ID)] = true
			}
		}
	}
	for _, p := range all {
		if strings.EqualFold(privatelink.Cluster(p), clusterName) || frontends[strings.ToLower(privatelink.FrontendOf(p))] {
			s.PrivateLinks = append(s.PrivateLinks, p)
		}
	}
	return nil
}

// renderPrivateLinks writes one block per Private Link Service: its
// frontend and owner, visibility, auto-approval, proxy protocol, fqdns,
// NAT ip configurations and private endpoint connections with their state.
func renderPrivateLinks(w io.Writer, s *Snapshot) {
	pls := slices.Clone(s.PrivateLinks)
	slices.SortFunc(pls, func(a, b *armnetwork.PrivateLinkService) int { return cmp.Compare(str(a.Name), str(b.Name)) })
	for _, p := range pls {
		fe := privatelink.FrontendOf(p)
		title := str(p.Name)
		if owner := privatelink.Owner(p); owner != "" {
			title += " (" + owner + ")"
		}
		proxy := "off"
		if p.Properties != nil && ptr.Deref(p.Properties.EnableProxyProtocol, false) {
			proxy = "on"
		}
		// Key-value lines carry no tab: only the two tables below align.
		fmt.Fprintf(w, "PRIVATE LINK SERVICE %s  frontend %s/%s, resource group %s\n", title, parentName(fe), lastSegment(fe), resourceGroupOf(str(p.ID)))
		fmt.Fprintf(w, "  visibility: %s; auto-approval: %s; proxy protocol: %s\n",
			listOr(privatelink.Visibility(p), "this subscription only"), listOr(privatelink.AutoApproval(p), "-"), proxy)
		var fqdns []string
		alias := "-"
		if p.Properties != nil {
			for _, f := range p.Properties.Fqdns {
				fqdns = append(fqdns, ptr.Deref(f, ""))
			}
			alias = cmp.Or(str(p.Properties.Alias), "-")
		}
		fmt.Fprintf(w, "  alias: %s; fqdns: %s\n", alias, listOr(fqdns, "-"))
		fmt.Fprintln(w, "  NAT IP CONFIGURATION\tADDRESS\tPRIMARY\tSUBNET")
		if p.Properties != nil {
			for _, c := range p.Properties.IPConfigurations {
				if c == nil || c.Properties == nil {
					continue
				}
				cp := c.Properties
				// ARM shows a Dynamic NAT address only on the service's
				// network interface.
				addr := cmp.Or(str(cp.PrivateIPAddress), "(dynamic)")
				subnet := ""
				if cp.Subnet != nil {
					subnet = lastSegment(str(cp.Subnet.ID))
				}
				primary := "no"
				if ptr.Deref(cp.Primary, false) {
					primary = "yes"
				}
				fmt.Fprintf(w, "    %s\t%s\t%s\t%s\n", str(c.Name), addr, primary, cmp.Or(subnet, "-"))
			}
		}
		conns := privatelink.Connections(p)
		if len(conns) == 0 {
			fmt.Fprintln(w, "  no private endpoint connections")
		} else {
			fmt.Fprintln(w, "  CONNECTION\tPRIVATE ENDPOINT\tSTATE\tDESCRIPTION")
			for _, c := range conns {
				fmt.Fprintf(w, "    %s\t%s/%s\t%s\t%s\n", c.Name, resourceGroupOf(c.Endpoint), lastSegment(c.Endpoint), cmp.Or(c.Status, "-"), cmp.Or(c.Description, "-"))
			}
		}
		fmt.Fprintln(w)
	}
}

func listOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, " ")
}

// parentName is the load balancer of a frontend id.
func parentName(frontendID string) string {
	parts := strings.Split(frontendID, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "loadBalancers") {
			return parts[i+1]
		}
	}
	return "-"
}

// resourceGroupOf is the resource group of an ARM id ("-" when none).
func resourceGroupOf(id string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "resourceGroups") {
			return parts[i+1]
		}
	}
	return "-"
}
