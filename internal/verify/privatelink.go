package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
)

const docPrivateLink = "private-link.md"

// collectPrivateLinks lists the Private Link Services of every resource
// group the cluster's may be in (privateLinkServiceResourceGroup and each
// Service's azure-pls-resource-group).
func collectPrivateLinks(ctx context.Context, cfg *config.Config, clients *azure.Clients, svcs []*v1.Service) ([]*armnetwork.PrivateLinkService, error) {
	c, _, err := privatelink.NewClients(clients.NetworkSubscriptionID(), clients.NetworkCredential(), clients.ARMClientOptions("azlb-verify"), 0)
	if err != nil {
		return nil, err
	}
	return privatelink.ListAll(ctx, c, privatelink.ResourceGroups(plsResourceGroup(cfg), svcs))
}

// collectNATSubnets reads the NAT subnet of every Service that asks for a
// Private Link Service (private-link.md: azlb reads it before it writes
// anything), once each.
func collectNATSubnets(ctx context.Context, cfg *config.Config, clients *azure.Clients, svcs []*v1.Service) (map[string]*armnetwork.Subnet, error) {
	out := map[string]*armnetwork.Subnet{}
	if cfg.VnetName == "" {
		return out, nil
	}
	rg := cmpOr(cfg.VnetResourceGroup, cfg.ResourceGroup)
	for _, svc := range svcs {
		spec, err := privatelink.Parse(svc.Annotations, privatelink.Defaults{ResourceGroup: plsResourceGroup(cfg), Subnet: plsSubnet(cfg, svc)})
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || err != nil || !spec.Create || spec.Subnet == "" {
			continue
		}
		id := lower(subnetIDOf(cfg, spec.Subnet))
		if _, ok := out[id]; ok {
			continue
		}
		sn, err := clients.Subnet.Get(ctx, rg, cfg.VnetName, spec.Subnet)
		switch {
		case azure.Classify(err) == azure.ClassStale:
			sn = nil
		case err != nil:
			return nil, fmt.Errorf("read NAT subnet %s: %w", spec.Subnet, err)
		}
		out[id] = sn
	}
	return out, nil
}

func plsResourceGroup(cfg *config.Config) string {
	return cmpOr(cfg.PrivateLinkServiceResourceGroup, cfg.ResourceGroup)
}

// checkOrphanPLS: a Private Link Service of this cluster whose Service is
// gone stays only while another Service uses its frontend.
func checkOrphanPLS(r *Report, obj, owner, feID string, lb *armnetwork.LoadBalancer, feExists bool) {
	switch {
	case !feExists:
		r.add(obj, docPrivateLink+"#lifetime", "is this cluster's, but its Service %s is gone and so is its frontend %s: it should have been deleted (its private endpoint connections first)",
			cmpOr(owner, "(no owner tag)"), feID)
	case !frontendUsed(lb, lastSegmentOf(feID)):
		r.add(obj, docPrivateLink+"#lifetime", "is this cluster's, but its Service %s is gone and no Service uses its frontend %s: it should have been deleted (its private endpoint connections first)",
			cmpOr(owner, "(no owner tag)"), feID)
	}
}

// checkPrivateLinks judges the Private Link Services of this cluster
// (tag k8s-azure-cluster-name) against docs/private-link.md: each must
// match its owning Service's azure-pls-* annotations, and go with its
// Service (unless other Services still use its frontend); a Service that
// asks for one must have one on its frontend.
func checkPrivateLinks(s *Snapshot, r *Report, refused map[string]bool) {
	cfg := s.Config
	byKey := map[string]*v1.Service{}
	for _, svc := range s.Services {
		if svc.Spec.Type == v1.ServiceTypeLoadBalancer {
			byKey[strings.ToLower(svc.Namespace+"/"+svc.Name)] = svc
		}
	}
	frontends := map[string]*armnetwork.LoadBalancer{} // lower frontend id -> its load balancer
	for _, lb := range s.LoadBalancers {
		for _, fe := range frontendsOf(lb) {
			if id := frontendID(lb, fe); id != "" {
				frontends[lower(id)] = lb
			}
		}
	}
	served := map[string]bool{} // lower frontend ids a PLS of this cluster serves
	for _, p := range s.PrivateLinks {
		if !strings.EqualFold(privatelink.Cluster(p), cfg.ClusterName) {
			continue
		}
		feID := privatelink.FrontendOf(p)
		served[lower(feID)] = true
		obj := "private link service " + plsName(p)
		owner := privatelink.Owner(p)
		lb, feExists := frontends[lower(feID)]
		svc := byKey[lower(owner)]
		if svc == nil {
			checkOrphanPLS(r, obj, owner, feID, lb, feExists)
			continue
		}
		if !s.Class.Owns(svc) || svc.DeletionTimestamp != nil || refused[lower(owner)] {
			continue // a refused Service keeps what it had (its SKIP line says why)
		}
		if !feExists {
			r.add(obj, docPrivateLink+"#lifetime", "serves frontend %s, which does not exist (Service %s)", feID, owner)
			continue
		}
		spec, err := privatelink.Parse(svc.Annotations, privatelink.Defaults{ResourceGroup: plsResourceGroup(cfg), Subnet: plsSubnet(cfg, svc)})
		if err != nil {
			r.skip(obj, "the azure-pls-* annotations of its Service %s are invalid (a Warning event says so): %v", owner, err)
			continue
		}
		if !spec.Create {
			r.add(obj, docPrivateLink+"#lifetime", "its Service %s no longer asks for one (%s is not \"true\"): it should have been deleted (its private endpoint connections first)",
				owner, privatelink.KeyCreate)
			continue
		}
		if rg := resourceGroupOf(ptr.Deref(p.ID, "")); rg != "" && !strings.EqualFold(rg, spec.ResourceGroup) {
			r.add(obj, docPrivateLink+"#annotations", "is in resource group %s, but its Service %s asks for %s", rg, owner, spec.ResourceGroup)
			continue
		}
		if spec.Name != "" && !strings.EqualFold(spec.Name, plsName(p)) {
			// A PLS never changes its name: the controller refuses the
			// change with a Warning event; the annotation does not match.
			r.add(obj, docPrivateLink+"#ownership-and-sharing", "its Service %s names it %s (%s); a Private Link Service's name never changes", owner, spec.Name, privatelink.KeyName)
		}
		want := privatelink.Desired(spec, privatelink.Target{FrontendID: feID, Location: ptr.Deref(p.Location, ""),
			SubnetID:    subnetIDOf(cfg, spec.Subnet),
			ClusterName: cfg.ClusterName, Owner: svc.Namespace + "/" + svc.Name}, plsName(p))
		if d := privatelink.Drift(p, want); len(d) > 0 {
			r.add(obj, docPrivateLink+"#annotations", "does not match the azure-pls-* annotations of its Service %s: %s differ", owner, strings.Join(d, ", "))
		}
	}

	checkWantedPLS(s, r, served, refused)
}

// checkWantedPLS: a Service that asks for a Private Link Service has one
// on its IPv4 frontend (served: the frontends this cluster's serve).
func checkWantedPLS(s *Snapshot, r *Report, served, refused map[string]bool) {
	cfg := s.Config
	for _, svc := range s.Services {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || !s.Class.Owns(svc) || svc.DeletionTimestamp != nil || refused[lower(svc.Namespace+"/"+svc.Name)] {
			continue
		}
		pspec, err := privatelink.Parse(svc.Annotations, privatelink.Defaults{ResourceGroup: plsResourceGroup(cfg), Subnet: plsSubnet(cfg, svc)})
		if err != nil || !pspec.Create {
			continue
		}
		spec, err := annotations.Parse(svc)
		if err != nil || (!spec.Internal && spec.EnableFloatingIP) || !slices.Contains(families(svc), v1.IPv4Protocol) {
			continue // refused by the controller, with a Warning event
		}
		fes := serviceFrontendIDs(s.LoadBalancers, names.FrontendBase(svc))
		if len(fes) == 0 {
			continue // no frontend yet: the load balancer checks report it
		}
		if !slices.ContainsFunc(fes, func(id string) bool { return served[lower(id)] }) {
			r.add(serviceObject(svc), docPrivateLink+"#lifetime", "asks for a Private Link Service (%s) but none of this cluster serves its frontend %s",
				privatelink.KeyCreate, strings.Join(fes, ", "))
		}
	}
}

// serviceFrontendIDs are the ids of the IPv4 frontends a Service owns or
// whose rules it has (a shared IP).
func serviceFrontendIDs(lbs []*armnetwork.LoadBalancer, base string) []string {
	var out []string
	for _, lb := range lbs {
		used := map[string]bool{}
		for _, r := range rulesOf(lb) {
			if names.Owns(base, ptr.Deref(r.Name, "")) && r.Properties != nil && !names.HasSuffixFold(ptr.Deref(r.Name, ""), names.IPv6Suffix) {
				used[lower(childName(r.Properties.FrontendIPConfiguration))] = true
			}
		}
		for _, fe := range frontendsOf(lb) {
			n, id := ptr.Deref(fe.Name, ""), frontendID(lb, fe)
			if id == "" || names.HasSuffixFold(n, names.IPv6Suffix) {
				continue
			}
			if names.Owns(base, n) || used[lower(n)] {
				out = append(out, id)
			}
		}
	}
	return out
}

// frontendID is a frontend's id (built from its load balancer's when ARM
// left it out).
func frontendID(lb *armnetwork.LoadBalancer, fe *armnetwork.FrontendIPConfiguration) string {
	if fe.ID != nil {
		return *fe.ID
	}
	if lb.ID == nil || fe.Name == nil {
		return ""
	}
	return *lb.ID + "/frontendIPConfigurations/" + *fe.Name
}

// frontendUsed reports whether a rule of lb uses its frontend fe.
func frontendUsed(lb *armnetwork.LoadBalancer, fe string) bool {
	for _, r := range rulesOf(lb) {
		if r.Properties != nil && strings.EqualFold(childName(r.Properties.FrontendIPConfiguration), fe) {
			return true
		}
	}
	return false
}

// plsSubnet is the subnet a Service's NAT addresses default to: its
// azure-load-balancer-internal-subnet, else azure.json's subnetName.
func plsSubnet(cfg *config.Config, svc *v1.Service) string {
	if v := strings.TrimSpace(svc.Annotations[annotations.KeyInternalSubnet]); v != "" {
		return v
	}
	return cfg.SubnetName
}

func subnetIDOf(cfg *config.Config, subnet string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s/subnets/%s",
		cfg.NetworkSubscriptionID(), cmpOr(cfg.VnetResourceGroup, cfg.ResourceGroup), cfg.VnetName, subnet)
}

func plsName(p *armnetwork.PrivateLinkService) string { return ptr.Deref(p.Name, "") }

func lastSegmentOf(id string) string { return id[strings.LastIndexByte(id, '/')+1:] }

// resourceGroupOf is the resource group of an ARM id ("" when none).
func resourceGroupOf(id string) string {
	parts := strings.Split(id, "/")
	for i := 0; i+1 < len(parts); i++ {
		if strings.EqualFold(parts[i], "resourceGroups") {
			return parts[i+1]
		}
	}
	return ""
}
