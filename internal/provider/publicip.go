package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/migration"
	"github.com/azlb/azlb/internal/names"
)

// Public IPs are created outside the service-reconcile lock: each Service
// has its own, so concurrent workers never contend for them.

// publicIP is a public IP a Service's frontend uses.
type publicIP struct {
	id, address string
}

// requestedAddress is the address the user asked for, for one family: the
// azure-load-balancer-ipv4/ipv6 annotation, else spec.loadBalancerIP when
// it is of that family.
func requestedAddress(svc *v1.Service, spec *annotations.ServiceSpec, family v1.IPFamily) string {
	a := spec.IPv4
	if family == v1.IPv6Protocol {
		a = spec.IPv6
	}
	if a.IsValid() {
		return a.String()
	}
	if ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP); err == nil && ip.Is4() == (family == v1.IPv4Protocol) {
		return ip.String()
	}
	return ""
}

func requestedPIPName(spec *annotations.ServiceSpec, family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return spec.PIPNameIPv6
	}
	return spec.PIPName
}

// ensurePublicIP returns the public IP the Service's frontend of the family
// uses, creating an owned one when needed:
//   - azure-load-balancer-ipv4/-ipv6 or loadBalancerIP: an existing public
//     IP with that address in the resource group (never created);
//   - azure-pip-name(-ipv6): that public IP, created (and owned) if missing;
//   - otherwise <cluster>-<frontend base>[-IPv6], created and owned.
func (p *Provider) ensurePublicIP(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, family v1.IPFamily) (publicIP, error) {
	rg := p.cfg.ResourceGroup
	name := requestedPIPName(spec, family)
	if addr := requestedAddress(svc, spec, family); addr != "" && name == "" {
		pips, err := p.publicIPs(ctx).List(ctx, rg)
		if err != nil {
			return publicIP{}, fmt.Errorf("list public IPs in %s: %w", rg, err)
		}
		for _, pip := range pips {
			if pip.Properties != nil && ptr.Deref(pip.Properties.IPAddress, "") == addr {
				return p.standardPublicIP(ctx, svc, rg, pip)
			}
		}
		return publicIP{}, fmt.Errorf("service %s: no public IP with address %s in resource group %s (the address must belong to an existing public IP)", names.ServiceKey(svc), addr, rg)
	}
	if name == "" {
		name = names.PublicIP(p.clusterName(), svc, family)
	}
	pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
	if err == nil {
		if got := ipFamilyOfPIP(pip); got != family {
			return publicIP{}, fmt.Errorf("service %s: public IP %s is %s, the frontend needs %s", names.ServiceKey(svc), name, got, family)
		}
		return p.standardPublicIP(ctx, svc, rg, pip)
	}
	if azure.Classify(err) != azure.ClassStale {
		return publicIP{}, fmt.Errorf("get public IP %s/%s: %w", rg, name, err)
	}
	want := armnetwork.PublicIPAddress{
		Location: to.Ptr(p.cfg.Location),
		SKU: &armnetwork.PublicIPAddressSKU{
			Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard),
			Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional),
		},
		Tags: map[string]*string{
			names.TagServiceName: to.Ptr(names.ServiceKey(svc)),
			names.TagClusterName: to.Ptr(p.clusterName()),
		},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(ipVersion(family)),
		},
	}
	if spec.DNSLabelName != "" && family == v1.IPv4Protocol {
		want.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr(spec.DNSLabelName)}
	}
	created, err := p.publicIPs(ctx).CreateOrUpdate(ctx, rg, name, want, "")
	if err != nil {
		return publicIP{}, fmt.Errorf("create public IP %s/%s: %w", rg, name, err)
	}
	logger(ctx).Info("Created public IP", "service", names.ServiceKey(svc), "publicIP", name, "address", pipAddress(created))
	return publicIP{id: ptr.Deref(created.ID, ""), address: pipAddress(created)}, nil
}

// standardPublicIP returns an existing public IP for a Service's frontend,
// upgraded from Basic to Standard (keeping its address) when it is Basic:
// the public IPs of a cluster migrated from Basic load balancers, the
// user's own as much as azlb's. A Basic public IP that cannot be upgraded
// (in use elsewhere, or Dynamic) is an *migration.UpgradeError, with a
// Warning event; nothing is written then.
func (p *Provider) standardPublicIP(ctx context.Context, svc *v1.Service, rg string, pip *armnetwork.PublicIPAddress) (publicIP, error) {
	if !migration.IsBasic(pip) {
		return publicIP{id: ptr.Deref(pip.ID, ""), address: pipAddress(pip)}, nil
	}
	up, err := migration.UpgradePublicIP(ctx, p.clients.PublicIP, rg, pip)
	metrics.CountPublicIPUpgrade(err)
	if err != nil {
		p.warn(svc, migration.EventReasonPublicIPUpgradeFailed, "%v", err)
		return publicIP{}, fmt.Errorf("service %s: %w", names.ServiceKey(svc), err)
	}
	name := ptr.Deref(pip.Name, "")
	p.recorder.Eventf(svc, v1.EventTypeNormal, migration.EventReasonPublicIPUpgraded,
		"Public IP %s (%s) upgraded from Basic to Standard SKU; the address is kept", name, pipAddress(up))
	logger(ctx).Info("Basic load balancer migration: upgraded a Service's public IP to Standard", "service", names.ServiceKey(svc), "publicIP", name, "address", pipAddress(up))
	return publicIP{id: ptr.Deref(up.ID, ""), address: pipAddress(up)}, nil
}

// deleteOwnedPublicIPs deletes every public IP azlb created for the Service
// (tagged with its key and the cluster): the generated names and any named
// by azure-pip-name(-ipv6). A public IP without azlb's tags belongs to the
// user and stays.
func (p *Provider) deleteOwnedPublicIPs(ctx context.Context, svc *v1.Service) error {
	for _, name := range p.publicIPNames(svc) {
		if err := p.deleteIfOwned(ctx, svc, p.cfg.ResourceGroup, name); err != nil {
			return err
		}
	}
	return nil
}

// publicIPNames are the names of the public IPs azlb may have created for
// the Service: its generated names and those its annotations give.
func (p *Provider) publicIPNames(svc *v1.Service) []string {
	pipNames := []string{names.PublicIP(p.clusterName(), svc, v1.IPv4Protocol), names.PublicIP(p.clusterName(), svc, v1.IPv6Protocol)}
	for _, key := range []string{annotations.KeyPIPName, annotations.KeyPIPNameIPv6} {
		if n := strings.TrimSpace(svc.Annotations[key]); n != "" {
			pipNames = append(pipNames, n)
		}
	}
	seen := map[string]bool{}
	return slices.DeleteFunc(pipNames, func(n string) bool {
		dup := seen[strings.ToLower(n)]
		seen[strings.ToLower(n)] = true
		return dup
	})
}

// ownedPublicIPLeft reports whether a public IP azlb created for the
// Service still exists: a delete interrupted after the frontends went
// (a crash, a lost lease) leaves one, and GetLoadBalancer must then still
// report the load balancer, or the service controller would drop its
// finalizer without calling EnsureLoadBalancerDeleted.
func (p *Provider) ownedPublicIPLeft(ctx context.Context, svc *v1.Service) (bool, error) {
	for _, name := range p.publicIPNames(svc) {
		pip, err := p.publicIPs(ctx).Get(ctx, p.cfg.ResourceGroup, name)
		if err != nil {
			if azure.Classify(err) == azure.ClassStale {
				continue
			}
			return false, fmt.Errorf("get public IP %s/%s: %w", p.cfg.ResourceGroup, name, err)
		}
		if p.ownsPublicIP(pip, svc) {
			return true, nil
		}
	}
	return false, nil
}

// deleteOrphanedPublicIPs deletes, among the public IPs the Service used
// before (ARM ids), those it no longer uses and that azlb owns.
func (p *Provider) deleteOrphanedPublicIPs(ctx context.Context, svc *v1.Service, previous []string, keep map[string]bool) error {
	for _, id := range previous {
		if keep[id] {
			continue
		}
		rg, name, err := names.ParseID(id)
		if err != nil {
			return err
		}
		if err := p.deleteIfOwned(ctx, svc, rg, name); err != nil {
			return err
		}
	}
	return nil
}

// deleteIfOwned deletes a public IP if azlb created it for the Service.
func (p *Provider) deleteIfOwned(ctx context.Context, svc *v1.Service, rg, name string) error {
	pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
	if err != nil {
		if azure.Classify(err) == azure.ClassStale {
			return nil
		}
		return fmt.Errorf("get public IP %s/%s: %w", rg, name, err)
	}
	if !p.ownsPublicIP(pip, svc) {
		return nil
	}
	// Its address leaves the NSG first: once the public IP is gone nothing
	// tells that the address was the Service's, and a rule written before
	// its frontend (whose write then failed) would keep it for ever.
	if a := pipAddress(pip); a != "" && p.sg != nil {
		if err := p.releaseAddresses(ctx, svc, []string{a}); err != nil {
			return err
		}
	}
	if err := p.publicIPs(ctx).Delete(ctx, rg, name); err != nil && azure.Classify(err) != azure.ClassStale {
		return fmt.Errorf("delete public IP %s/%s: %w", rg, name, err)
	}
	logger(ctx).Info("Deleted public IP", "service", names.ServiceKey(svc), "publicIP", name)
	return nil
}

func (p *Provider) ownsPublicIP(pip *armnetwork.PublicIPAddress, svc *v1.Service) bool {
	return tagValue(pip.Tags, names.TagServiceName) == names.ServiceKey(svc) && tagValue(pip.Tags, names.TagClusterName) == p.clusterName()
}

func tagValue(tags map[string]*string, key string) string {
	for k, v := range tags {
		if strings.EqualFold(k, key) {
			return ptr.Deref(v, "")
		}
	}
	return ""
}

func pipAddress(pip *armnetwork.PublicIPAddress) string {
	if pip == nil || pip.Properties == nil {
		return ""
	}
	return ptr.Deref(pip.Properties.IPAddress, "")
}

func ipFamilyOfPIP(pip *armnetwork.PublicIPAddress) v1.IPFamily {
	if pip != nil && pip.Properties != nil && ptr.Deref(pip.Properties.PublicIPAddressVersion, "") == armnetwork.IPVersionIPv6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}
