// Package status renders, for a terminal, every load balancer in the
// cluster's load balancer resource group: frontends with their address,
// Service, rules and the sources azlb's network security group rules let in
// (docs/security-groups.md), and each pool's backends with their admin
// state; and, with pod-based load balancing, what the cluster's
// ServiceGateway holds: its services and the pod addresses per node
// location.
package status

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/names"
)

// Snapshot is what Render shows.
type Snapshot struct {
	LoadBalancers []*armnetwork.LoadBalancer
	// PublicIPs maps lower-cased public IP ids to their address.
	PublicIPs map[string]string
	// Services maps frontend base names to "namespace/name".
	Services map[string]string
	// Nodes maps node names to nodes, for taints; may be empty.
	Nodes map[string]*v1.Node
	// Policy says which taints take a node out of rotation
	// (backendpool.PolicyFromConfig); the zero Policy uses the default
	// loadBalancerAdminStateTaints.
	Policy backendpool.Policy
	// Owners maps the owners of NIC-based members (backendpool.EntryKey:
	// a scale set VM's or a NIC's lower-cased id) to node names.
	Owners map[string]string
	// Gateway is the service gateway's content (pod-based load
	// balancing); nil otherwise.
	Gateway *Gateway
	// Objects maps frontend base names to the LoadBalancer Services, for
	// their effective sources.
	Objects map[string]*v1.Service
	// SecurityGroupName is the NSG of azure.json ("": none configured);
	// SecurityGroup is its content, nil when it does not exist.
	SecurityGroupName string
	SecurityGroup     *armnetwork.SecurityGroup
	// Class is the load-balancer class azlb serves (--load-balancer-class;
	// the zero Class: none). A frontend of a LoadBalancer Service of
	// another implementation is marked so, and its sources are not shown:
	// the rules holding it are not azlb's.
	Class lbclass.Class
	// PrivateLinks are the Private Link Services to show
	// (CollectPrivateLinks).
	PrivateLinks []*armnetwork.PrivateLinkService
}

// Collect reads the snapshot: load balancers and public IPs from ARM, and,
// when cs is not nil, Services and nodes from Kubernetes.
func Collect(ctx context.Context, clients *azure.Clients, lbResourceGroup, pipResourceGroup string, cs kubernetes.Interface) (*Snapshot, error) {
	lbs, err := clients.LoadBalancer.List(ctx, lbResourceGroup)
	if err != nil {
		return nil, fmt.Errorf("list load balancers in %s: %w", lbResourceGroup, err)
	}
	pips, err := clients.PublicIP.List(ctx, pipResourceGroup)
	if err != nil {
		return nil, fmt.Errorf("list public IPs in %s: %w", pipResourceGroup, err)
	}
	s := &Snapshot{LoadBalancers: lbs, PublicIPs: map[string]string{}, Services: map[string]string{}, Nodes: map[string]*v1.Node{},
		Owners: map[string]string{}, Objects: map[string]*v1.Service{}}
	for _, p := range pips {
		if p.ID != nil && p.Properties != nil && p.Properties.IPAddress != nil {
			s.PublicIPs[strings.ToLower(*p.ID)] = *p.Properties.IPAddress
		}
	}
	if cs == nil {
		return s, nil
	}
	svcs, err := cs.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		s.Services[strings.ToLower(cloudprovider.DefaultLoadBalancerName(svc))] = svc.Namespace + "/" + svc.Name
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			s.Objects[strings.ToLower(cloudprovider.DefaultLoadBalancerName(svc))] = svc
		}
		// Pod-based load balancers and gateway services are named by UID.
		s.Services[names.ServiceUID(svc.UID)] = svc.Namespace + "/" + svc.Name
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		s.Nodes[n.Name] = n
		for _, k := range ownerKeys(ctx, clients, n) {
			s.Owners[k] = n.Name
		}
	}
	return s, nil
}

// ownerKeys are the owners of a node's NIC-based members: its scale set
// VM, or its VM's network interfaces (a VM read).
func ownerKeys(ctx context.Context, clients *azure.Clients, n *v1.Node) []string {
	ref, err := names.ParseProviderID(n.Spec.ProviderID)
	if err != nil {
		return nil
	}
	if ref.Kind == names.ScaleSetVM {
		return []string{strings.ToLower(ref.ID())}
	}
	vm, err := clients.VM.Get(ctx, ref.ResourceGroup, ref.Name)
	if err != nil || vm.Properties == nil || vm.Properties.NetworkProfile == nil {
		return nil
	}
	var out []string
	for _, nic := range vm.Properties.NetworkProfile.NetworkInterfaces {
		if nic != nil && nic.ID != nil {
			out = append(out, strings.ToLower(*nic.ID))
		}
	}
	return out
}

// Render writes the snapshot as indented tables.
func Render(w io.Writer, s *Snapshot) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	lbs := slices.Clone(s.LoadBalancers)
	slices.SortFunc(lbs, func(a, b *armnetwork.LoadBalancer) int { return cmp.Compare(str(a.Name), str(b.Name)) })
	if len(lbs) == 0 {
		fmt.Fprintln(tw, "No load balancers.")
	}

	for _, lb := range lbs {
		p := lb.Properties
		if p == nil {
			p = &armnetwork.LoadBalancerPropertiesFormat{}
		}
		title := str(lb.Name)
		if svc := s.serviceOfUID(title); svc != "" {
			title += " (" + svc + ")"
		}
		sku := ""
		if lb.SKU != nil && lb.SKU.Name != nil {
			sku = ", SKU " + string(*lb.SKU.Name)
		}
		fmt.Fprintf(tw, "LOAD BALANCER %s\t%d frontends, %d rules, %d probes, %d pools%s\n", title,
			len(p.FrontendIPConfigurations), len(p.LoadBalancingRules), len(p.Probes), len(p.BackendAddressPools), sku)
		fmt.Fprintln(tw, "  FRONTEND\tADDRESS\tSERVICE\tRULES\tSOURCES")
		for _, fe := range p.FrontendIPConfigurations {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", str(fe.Name), s.address(fe), cmp.Or(s.serviceOfUID(str(lb.Name)), s.frontendServices(p, str(fe.Name))),
				rulesOf(p, str(fe.Name)), s.sources(str(lb.Name), fe))
		}
		for _, pool := range p.BackendAddressPools {
			var addrs []*armnetwork.LoadBalancerBackendAddress
			if pool.Properties != nil {
				addrs = pool.Properties.LoadBalancerBackendAddresses
			}
			drain := ""
			if pool.Properties != nil && pool.Properties.DrainPeriodInSeconds != nil && *pool.Properties.DrainPeriodInSeconds > 0 {
				drain = fmt.Sprintf(", drain %ds", *pool.Properties.DrainPeriodInSeconds)
			}
			if len(addrs) == 0 && s.Gateway != nil && s.serviceOfUID(str(lb.Name)) != "" {
				fmt.Fprintf(tw, "  POOL %s\tpods: see SERVICE GATEWAY%s\n", str(pool.Name), drain)
				continue
			}
			kind := ""
			if slices.ContainsFunc(addrs, backendpool.IsNICEntry) {
				kind = " (NIC-based: members are VM ip configurations)"
			}
			fmt.Fprintf(tw, "  POOL %s\t%d backends%s%s\n", str(pool.Name), len(addrs), drain, kind)
			if len(addrs) > 0 {
				fmt.Fprintln(tw, "    BACKEND\tIP\tADMIN STATE\tNODE TAINTS\tMEMBER")
			}
			for _, a := range addrs {
				name, ip, member := str(a.Name), "", "ip"
				if a.Properties != nil {
					ip = str(a.Properties.IPAddress)
				}
				if backendpool.IsNICEntry(a) {
					name, ip, member = s.nicMember(a)
				}
				fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\t%s\n", name, cmp.Or(ip, "-"), string(backendpool.AdminStateOf(a)), s.reasons(name), member)
			}
		}
		fmt.Fprintln(tw)
	}
	renderPrivateLinks(tw, s)
	if s.Gateway != nil {
		renderGateway(tw, s)
	}
	return tw.Flush()
}

func (s *Snapshot) address(fe *armnetwork.FrontendIPConfiguration) string {
	if fe.Properties == nil {
		return "-"
	}
	if fe.Properties.PublicIPAddress != nil {
		if a := s.PublicIPs[strings.ToLower(str(fe.Properties.PublicIPAddress.ID))]; a != "" {
			return a
		}
		return "(public IP " + lastSegment(str(fe.Properties.PublicIPAddress.ID)) + ")"
	}
	return cmp.Or(str(fe.Properties.PrivateIPAddress), "-")
}

// frontendServices names the Services using a frontend: the one it is
// named after, then those whose rules use it (a shared IP), as
// "a/x+a/y (shared)".
func (s *Snapshot) frontendServices(p *armnetwork.LoadBalancerPropertiesFormat, frontend string) string {
	owner := strings.ToLower(strings.TrimSuffix(frontend, "-IPv6"))
	bases := []string{owner}
	for _, r := range p.LoadBalancingRules {
		if r.Properties == nil || r.Properties.FrontendIPConfiguration == nil ||
			!strings.EqualFold(lastSegment(str(r.Properties.FrontendIPConfiguration.ID)), frontend) {
			continue
		}
		if b := strings.ToLower(names.ServiceBaseOf(str(r.Name))); !slices.Contains(bases, b) {
			bases = append(bases, b)
		}
	}
	if len(bases) == 1 {
		return s.service(frontend)
	}
	var out []string
	for _, b := range bases {
		if b == owner && s.Services[b] == "" {
			continue // its Service is gone: the frontend stays for the others
		}
		out = append(out, s.service(b))
	}
	return strings.Join(out, "+") + " (shared)"
}

func (s *Snapshot) service(frontend string) string {
	base := strings.ToLower(strings.TrimSuffix(frontend, "-IPv6"))
	if svc := s.Objects[base]; svc != nil && !s.Class.Owns(svc) {
		return s.Services[base] + " (not azlb's)"
	}
	return cmp.Or(s.Services[base], "-")
}

// nicMember names a NIC-derived entry by its node (when known) and shows
// the node's address and the ip configuration.
func (s *Snapshot) nicMember(a *armnetwork.LoadBalancerBackendAddress) (name, ip, member string) {
	cfg := str(a.Properties.NetworkInterfaceIPConfiguration.ID)
	member = "nic:" + lastSegment(strings.TrimSuffix(cfg[:max(0, strings.LastIndex(strings.ToLower(cfg), "/ipconfigurations/"))], "/")) + "/" + lastSegment(cfg)
	node, ok := s.Owners[backendpool.EntryKey(a)]
	if !ok {
		return str(a.Name), "", member
	}
	if n := s.Nodes[node]; n != nil {
		ip = backendpool.NodeInternalIP(n, v1.IPv4Protocol)
	}
	return node, ip, member
}

func (s *Snapshot) reasons(node string) string {
	n := s.Nodes[node]
	if n == nil {
		return "-"
	}
	return cmp.Or(strings.Join(s.Policy.OutOfServiceReasons(n), ","), "-")
}

func rulesOf(p *armnetwork.LoadBalancerPropertiesFormat, frontend string) string {
	var out []string
	for _, r := range p.LoadBalancingRules {
		if r.Properties == nil || r.Properties.FrontendIPConfiguration == nil {
			continue
		}
		if !strings.EqualFold(lastSegment(str(r.Properties.FrontendIPConfiguration.ID)), frontend) {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%d->%d", strings.ToUpper(string(ptr.Deref(r.Properties.Protocol, ""))), ptr.Deref(r.Properties.FrontendPort, 0), ptr.Deref(r.Properties.BackendPort, 0)))
	}
	return cmp.Or(strings.Join(out, " "), "-")
}

func lastSegment(id string) string { return id[strings.LastIndex(id, "/")+1:] }

func str(p *string) string { return ptr.Deref(p, "") }
