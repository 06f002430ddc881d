package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/migration"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
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

// requestedAddressField names where requestedAddress found the address.
func requestedAddressField(spec *annotations.ServiceSpec, family v1.IPFamily) string {
	switch {
	case family == v1.IPv6Protocol && spec.IPv6.IsValid():
		return annotations.KeyIPv6
	case family == v1.IPv4Protocol && spec.IPv4.IsValid():
		return annotations.KeyIPv4
	}
	return "spec.loadBalancerIP"
}

// notPublic says why an address can be no public IP's ("" when it can): a
// private (RFC 1918, RFC 4193), shared (RFC 6598), link-local, multicast
// or unspecified address. Loopback is left to the lookup: the emulator's
// public addresses are on 127.0.0.0/8, and Azure has no public IP there.
func notPublic(a netip.Addr) string {
	switch {
	case a.IsPrivate():
		return "a private address"
	case sharedAddressSpace.Contains(a):
		return "in the shared address space 100.64.0.0/10"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsUnspecified():
		return "the unspecified address"
	}
	return ""
}

var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

func requestedPIPName(spec *annotations.ServiceSpec, family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return spec.PIPNameIPv6
	}
	return spec.PIPName
}

// Event reasons of public IPs.
const (
	// EventReasonPublicIPPrefixUnusable: azure-pip-prefix-id(-ipv6) names
	// a prefix a new public IP cannot come from (missing, another IP
	// version, no free address).
	EventReasonPublicIPPrefixUnusable = "PublicIPPrefixUnusable"
	// EventReasonPublicIPUnchangeable: the Service asks an existing public
	// IP for something Azure sets only at creation (IP tags, prefix), and
	// the public IP is not one azlb replaces (planReplacement).
	EventReasonPublicIPUnchangeable = "PublicIPSettingUnchangeable"
)

// publicIPGroup is the resource group of the Service's public IPs:
// azure-load-balancer-resource-group, else the cluster's.
func (p *Provider) publicIPGroup(spec *annotations.ServiceSpec) string {
	if spec.PIPResourceGroup != "" {
		return spec.PIPResourceGroup
	}
	return p.cfg.ResourceGroup
}

// publicIPGroups are the resource groups where azlb may have created public
// IPs for the Service: the one its annotation names (read as written: a
// deleted Service's annotations need not be valid) and the cluster's.
func (p *Provider) publicIPGroups(svc *v1.Service) []string {
	groups := []string{p.cfg.ResourceGroup}
	if rg := strings.TrimSpace(svc.Annotations[annotations.KeyPIPResourceGroup]); rg != "" && !strings.EqualFold(rg, p.cfg.ResourceGroup) {
		groups = append([]string{rg}, groups...)
	}
	return groups
}

// resolvePublicIP finds, without writing, the public IP the Service's
// frontend of the family uses, in the resource group of publicIPGroup:
//   - azure-load-balancer-ipv4/-ipv6 or loadBalancerIP: an existing public
//     IP with that address in the resource group (never created);
//   - azure-pip-name(-ipv6): that public IP, created (and owned) if missing;
//   - otherwise <cluster>-<frontend base>[-IPv6], created and owned.
//
// What cannot be used refuses the Service: no public IP with the address
// asked for, one of the other IP version, a prefix that does not exist or
// is of the other IP version (PublicIPNotFound, PublicIPPrefixUnusable).
func (p *Provider) resolvePublicIP(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, family v1.IPFamily) (*publicIPPlan, error) {
	rg := p.publicIPGroup(spec)
	name := requestedPIPName(spec, family)
	if addr := requestedAddress(svc, spec, family); addr != "" && name == "" {
		if why := notPublic(netip.MustParseAddr(addr)); why != "" {
			// Azure has no public IP with such an address: no look-up.
			err := fmt.Errorf("service %s: %s=%s is not a public address (%s): a public Service's address must be that of a public IP; for a private address make the Service internal (%s: \"true\")",
				names.ServiceKey(svc), requestedAddressField(spec, family), addr, why, annotations.KeyInternal)
			return nil, refuse(EventReasonPublicIPNotFound, err)
		}
		pips, err := p.publicIPs(ctx).List(ctx, rg)
		if err != nil {
			return nil, fmt.Errorf("list public IPs in %s: %w", rg, err)
		}
		for _, pip := range pips {
			if pip.Properties != nil && ptr.Deref(pip.Properties.IPAddress, "") == addr {
				return &publicIPPlan{family: family, rg: rg, name: ptr.Deref(pip.Name, ""), existing: pip}, nil
			}
		}
		return nil, refuse(EventReasonPublicIPNotFound, fmt.Errorf("service %s: no public IP with address %s in resource group %s (the address must belong to an existing public IP)",
			names.ServiceKey(svc), addr, rg))
	}
	if name == "" {
		name = names.PublicIP(p.clusterName(), svc, family)
	}
	pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
	if err == nil {
		if got := ipFamilyOfPIP(pip); got != family {
			return nil, refuse(EventReasonPublicIPNotFound, fmt.Errorf("service %s: public IP %s is %s, the frontend needs %s", names.ServiceKey(svc), name, got, family))
		}
		return &publicIPPlan{family: family, rg: rg, name: name, existing: pip}, nil
	}
	if azure.Classify(err) != azure.ClassStale {
		return nil, fmt.Errorf("get public IP %s/%s: %w", rg, name, err)
	}
	pp := &publicIPPlan{family: family, rg: rg, name: name}
	if prefixID := spec.PIPPrefixFor(family == v1.IPv6Protocol); prefixID != "" {
		if pp.prefix, err = p.usablePrefix(ctx, svc, family, prefixID); err != nil {
			return nil, err
		}
	}
	return pp, nil
}

// ensurePublicIPs writes the plan's public IPs (creates those missing,
// brings an owned one's tags in line, upgrades a Basic one, replaces one
// the plan says must be new) and fills in
// the inputs' ids and addresses. It returns the ingress addresses and the
// (lower-cased) ids of the public IPs the Service keeps.
func (p *Provider) ensurePublicIPs(ctx context.Context, caller string, pl *servicePlan) (map[v1.IPFamily]string, map[string]bool, error) {
	ingress := map[v1.IPFamily]string{}
	keep := map[string]bool{}
	for i, pp := range pl.pips {
		var pip publicIP
		var err error
		switch {
		case pp.replace != "":
			pip, err = p.replacePublicIP(ctx, caller, pl, pp)
		case pp.existing != nil:
			pip, err = p.existingPublicIP(ctx, pl.svc, pl.spec, pp, pp.existing)
		default:
			pip, err = p.createPublicIP(ctx, pl.svc, pl.spec, pp.family, pp.rg, pp.name, pp.prefix)
		}
		if err != nil {
			return nil, nil, err
		}
		pl.inputs[i].publicIPID, pl.inputs[i].address = pip.id, pip.address
		p.notePublicIP(pip.id, pip.address)
		ingress[pp.family] = pip.address
		keep[strings.ToLower(pip.id)] = true
	}
	return ingress, keep, nil
}

// createPublicIP creates an owned public IP: Standard, static, tagged as
// azlb's (plus azure.json tags and azure-pip-tags), with the IP tags of
// azure-pip-ip-tags, from prefix (azure-pip-prefix-id(-ipv6), read by the
// plan) when set, zone-redundant where the region has zones (from a
// prefix: the prefix's zones).
func (p *Provider) createPublicIP(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, family v1.IPFamily, rg, name string, prefix *armnetwork.PublicIPPrefix) (publicIP, error) {
	tags, _ := p.tags.Apply(nil, p.publicIPTags(svc, spec))
	want := armnetwork.PublicIPAddress{
		Location: to.Ptr(p.cfg.Location),
		SKU: &armnetwork.PublicIPAddressSKU{
			Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard),
			Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional),
		},
		Tags: tags,
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(ipVersion(family)),
		},
	}
	if spec.DNSLabelName != "" && family == v1.IPv4Protocol {
		want.Properties.DNSSettings = &armnetwork.PublicIPAddressDNSSettings{DomainNameLabel: to.Ptr(spec.DNSLabelName)}
	}
	for _, t := range spec.PIPIPTags {
		want.Properties.IPTags = append(want.Properties.IPTags, &armnetwork.IPTag{IPTagType: to.Ptr(t.Type), Tag: to.Ptr(t.Tag)})
	}
	prefixID := spec.PIPPrefixFor(family == v1.IPv6Protocol)
	if prefix != nil {
		want.Properties.PublicIPPrefix = &armnetwork.SubResource{ID: prefix.ID}
		want.Zones = prefix.Zones
	} else {
		zones, err := p.regionZones(ctx)
		if err != nil {
			return publicIP{}, err
		}
		want.Zones = zones
	}
	created, err := p.publicIPs(ctx).CreateOrUpdate(ctx, rg, name, want, "")
	if err != nil {
		err = fmt.Errorf("create public IP %s/%s: %w", rg, name, err)
		if prefixID != "" && prefixExhausted(err) {
			p.warn(svc, EventReasonPublicIPPrefixUnusable, "%s=%s: the prefix has no free address for public IP %s: %v", prefixKey(family), prefixID, name, err)
			return publicIP{}, err
		}
		return publicIP{}, err
	}
	logger(ctx).Info("Created public IP", "service", names.ServiceKey(svc), "publicIP", name, "resourceGroup", rg,
		"address", pipAddress(created), "zones", derefAll(created.Zones), "prefix", prefixID)
	return publicIP{id: ptr.Deref(created.ID, ""), address: pipAddress(created)}, nil
}

// usablePrefix reads the prefix a new public IP of the family is to come
// from; a prefix that is missing or of the other IP version refuses the
// Service, naming the annotation and the prefix.
func (p *Provider) usablePrefix(ctx context.Context, svc *v1.Service, family v1.IPFamily, id string) (*armnetwork.PublicIPPrefix, error) {
	prefix, err := p.publicIPPrefix(ctx, id)
	var why string
	switch {
	case err != nil && azure.Classify(err) == azure.ClassStale:
		why = "the public IP prefix does not exist"
	case err != nil:
		return nil, fmt.Errorf("get public IP prefix %s: %w", id, err)
	case prefix.Properties != nil && prefix.Properties.PublicIPAddressVersion != nil && *prefix.Properties.PublicIPAddressVersion != ipVersion(family):
		why = fmt.Sprintf("the prefix is %s, the frontend needs %s", *prefix.Properties.PublicIPAddressVersion, family)
	default:
		return prefix, nil
	}
	err = fmt.Errorf("service %s: %s=%s: %s", names.ServiceKey(svc), prefixKey(family), id, why)
	return nil, refusef(EventReasonPublicIPPrefixUnusable, err, "%s=%s: %s; no public IP is created", prefixKey(family), id, why)
}

func prefixKey(family v1.IPFamily) string {
	if family == v1.IPv6Protocol {
		return annotations.KeyPIPPrefixIDIPv6
	}
	return annotations.KeyPIPPrefixID
}

// prefixExhausted reports an ARM error of a prefix without a free address
// (PublicIpPrefixOutOfIpAddresses...).
func prefixExhausted(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && strings.HasPrefix(strings.ToLower(re.ErrorCode), "publicipprefixoutofipaddresses")
}

// publicIPTags are the tags of a public IP azlb owns for the Service
// besides azure.json's: azure-pip-tags, then azlb's own (which no
// annotation overrides).
func (p *Provider) publicIPTags(svc *v1.Service, spec *annotations.ServiceSpec) map[string]string {
	out := map[string]string{}
	for k, v := range spec.PIPTags {
		if !strings.EqualFold(k, names.TagServiceName) && !strings.EqualFold(k, names.TagClusterName) {
			out[k] = v
		}
	}
	out[names.TagServiceName] = names.ServiceKey(svc)
	out[names.TagClusterName] = p.clusterName()
	return out
}

// existingPublicIP is an existing public IP for the Service's frontend:
// upgraded to Standard if Basic (standardPublicIP), and, when azlb owns it
// for the Service, with its tags brought in line (ownedPublicIP). A
// public IP azlb does not own is never written beyond the upgrade.
func (p *Provider) existingPublicIP(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, pp *publicIPPlan, pip *armnetwork.PublicIPAddress) (publicIP, error) {
	family, rg := pp.family, pp.rg
	if !p.ownsPublicIP(pip, svc) {
		if len(spec.PIPTags) > 0 || len(spec.PIPIPTags) > 0 {
			logger(ctx).V(2).Info("Public IP is not azlb's: its tags are left as they are", "service", names.ServiceKey(svc), "publicIP", ptr.Deref(pip.Name, ""), "resourceGroup", rg)
		}
		if want, ok := withDNSLabel(spec, family, pip); ok && !migration.IsBasic(pip) {
			// As the Azure cloud provider does, the label is set on the
			// user's public IP too; nothing else of it is written.
			return p.writePublicIP(ctx, svc, rg, want, "the DNS label")
		}
		return p.standardPublicIP(ctx, svc, rg, pip)
	}
	if migration.IsBasic(pip) {
		return p.standardPublicIP(ctx, svc, rg, pip)
	}
	return p.ownedPublicIP(ctx, svc, spec, pp, pip)
}

// ownedPublicIP brings an owned public IP's tags in line (azure.json tags,
// azure-pip-tags, azlb's own), with one write that changes nothing else.
// One the plan keeps although it does not meet a setting Azure sets only
// at creation (IP tags, azure-pip-ip-tags; the prefix,
// azure-pip-prefix-id(-ipv6)) is left as it is, with a Warning event
// saying why it is not replaced (pp.keep, planReplacement).
func (p *Provider) ownedPublicIP(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, pp *publicIPPlan, pip *armnetwork.PublicIPAddress) (publicIP, error) {
	family, rg := pp.family, pp.rg
	name := ptr.Deref(pip.Name, "")
	// The drift pass, which runs every few minutes, does not repeat what
	// the Service's own reconciles have said.
	_, repairing := ctx.Value(repairLogKey{}).(*repairLog)
	if pp.keep != "" && !repairing {
		if spec.PIPIPTags != nil && !sameIPTags(spec.PIPIPTags, pip) {
			p.warn(svc, EventReasonPublicIPUnchangeable, "%s=%s: public IP %s keeps its IP tags %s: Azure sets IP tags only when a public IP is created, and azlb does not replace this one: %s",
				annotations.KeyPIPIPTags, svc.Annotations[annotations.KeyPIPIPTags], name, ipTagsString(pip), pp.keep)
		}
		if id := spec.PIPPrefixFor(family == v1.IPv6Protocol); id != "" && !strings.EqualFold(id, pipPrefixID(pip)) {
			p.warn(svc, EventReasonPublicIPUnchangeable, "%s=%s: public IP %s keeps its address %s: Azure allocates a public IP from a prefix only when it is created, and azlb does not replace this one: %s",
				prefixKey(family), id, name, pipAddress(pip), pp.keep)
		}
	}
	wantTags := p.publicIPTags(svc, spec)
	if len(pipServiceKeys(pip)) > 1 {
		// The Azure cloud provider's list of the Services sharing it
		// stays as it is.
		wantTags[names.TagServiceName] = tagValue(pip.Tags, names.TagServiceName)
	}
	tags, changed := p.tags.Apply(pip.Tags, wantTags)
	want, labelled := withDNSLabel(spec, family, pip)
	if !changed && !labelled {
		return publicIP{id: ptr.Deref(pip.ID, ""), address: pipAddress(pip)}, nil
	}
	want.Tags = tags
	return p.writePublicIP(ctx, svc, rg, want, "the tags and DNS label")
}

// withDNSLabel is a copy of pip with the DNS label azure-dns-label-name asks
// for (IPv4 frontends), and whether that changes it. A public IP keeps its
// label when the annotation is unset.
func withDNSLabel(spec *annotations.ServiceSpec, family v1.IPFamily, pip *armnetwork.PublicIPAddress) (armnetwork.PublicIPAddress, bool) {
	want := *pip
	if spec.DNSLabelName == "" || family != v1.IPv4Protocol {
		return want, false
	}
	var have string
	if pip.Properties != nil && pip.Properties.DNSSettings != nil {
		have = ptr.Deref(pip.Properties.DNSSettings.DomainNameLabel, "")
	}
	if have == spec.DNSLabelName {
		return want, false
	}
	props := armnetwork.PublicIPAddressPropertiesFormat{}
	if pip.Properties != nil {
		props = *pip.Properties
	}
	dns := armnetwork.PublicIPAddressDNSSettings{}
	if props.DNSSettings != nil {
		dns = *props.DNSSettings
	}
	dns.DomainNameLabel, dns.Fqdn = to.Ptr(spec.DNSLabelName), nil
	props.DNSSettings = &dns
	want.Properties = &props
	return want, true
}

// writePublicIP writes an existing public IP (its etag as read).
func (p *Provider) writePublicIP(ctx context.Context, svc *v1.Service, rg string, want armnetwork.PublicIPAddress, what string) (publicIP, error) {
	name := ptr.Deref(want.Name, "")
	updated, err := p.publicIPs(ctx).CreateOrUpdate(ctx, rg, name, want, ptr.Deref(want.Etag, ""))
	if err != nil {
		return publicIP{}, fmt.Errorf("update %s of public IP %s/%s: %w", what, rg, name, err)
	}
	logger(ctx).Info("Updated public IP", "service", names.ServiceKey(svc), "publicIP", name, "resourceGroup", rg, "what", what)
	return publicIP{id: ptr.Deref(updated.ID, ""), address: pipAddress(updated)}, nil
}

// sameIPTags compares the wanted IP tags with a public IP's, as sets
// (types ignoring case).
func sameIPTags(want []annotations.IPTag, pip *armnetwork.PublicIPAddress) bool {
	var have []*armnetwork.IPTag
	if pip.Properties != nil {
		have = pip.Properties.IPTags
	}
	if len(have) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.ContainsFunc(have, func(h *armnetwork.IPTag) bool {
			return h != nil && strings.EqualFold(ptr.Deref(h.IPTagType, ""), w.Type) && ptr.Deref(h.Tag, "") == w.Tag
		}) {
			return false
		}
	}
	return true
}

func ipTagsString(pip *armnetwork.PublicIPAddress) string {
	var parts []string
	if pip.Properties != nil {
		for _, t := range pip.Properties.IPTags {
			if t != nil {
				parts = append(parts, ptr.Deref(t.IPTagType, "")+"="+ptr.Deref(t.Tag, ""))
			}
		}
	}
	if len(parts) == 0 {
		return "(none)"
	}
	return strings.Join(parts, ",")
}

func pipPrefixID(pip *armnetwork.PublicIPAddress) string {
	if pip.Properties == nil || pip.Properties.PublicIPPrefix == nil {
		return ""
	}
	return ptr.Deref(pip.Properties.PublicIPPrefix.ID, "")
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
	for _, rg := range p.publicIPGroups(svc) {
		for _, name := range p.publicIPNames(svc) {
			if err := p.deleteIfOwned(ctx, svc, rg, name); err != nil {
				return err
			}
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
	for _, rg := range p.publicIPGroups(svc) {
		for _, name := range p.publicIPNames(svc) {
			pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
			if err != nil {
				if azure.Classify(err) == azure.ClassStale {
					continue
				}
				return false, fmt.Errorf("get public IP %s/%s: %w", rg, name, err)
			}
			if p.ownsPublicIP(pip, svc) {
				return true, nil
			}
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
	// A frontend another Service shares still uses it: it stays until the
	// last of them leaves (sharedip.go).
	if at, used, err := p.publicIPInUse(ctx, ptr.Deref(pip.ID, "")); err != nil || used {
		if used {
			logger(ctx).Info("Public IP kept: a frontend other Services share still uses it", "service", names.ServiceKey(svc), "publicIP", name, "frontend", at)
		}
		return err
	}
	// Its address leaves the NSG first: once the public IP is gone nothing
	// tells that the address was the Service's, and a rule written before
	// its frontend (whose write then failed) would keep it for ever.
	if a := pipAddress(pip); a != "" && p.sg != nil {
		p.notePublicIP(ptr.Deref(pip.ID, ""), a)
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

// ownsPublicIP reports whether azlb created the public IP for the Service:
// its cluster tag is the cluster's and its service tag names the Service
// (alone, or among the Services the Azure cloud provider lists there for
// a shared IP).
func (p *Provider) ownsPublicIP(pip *armnetwork.PublicIPAddress, svc *v1.Service) bool {
	return slices.Contains(pipServiceKeys(pip), names.ServiceKey(svc)) && strings.EqualFold(tagValue(pip.Tags, names.TagClusterName), p.clusterName())
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

// Replacing an owned public IP. What Azure sets only when a public IP is
// created (the prefix it takes its address from, its IP tags) is met, on a
// public IP azlb created for the Service alone, by a new public IP of the
// same name, as the Azure cloud provider does: the plan reads and checks
// the new prefix before anything is written, then the write
//
//  1. removes the Service's frontends that use the public IP, with their
//     rules, from their load balancer (one write: Azure refuses to delete
//     a public IP a frontend uses);
//  2. deletes the public IP (its address leaves the security rules first);
//  3. creates the public IP anew, from the new prefix, with the new IP tags;
//  4. writes the frontends again (the Service's load balancer write).
//
// Each step is found again from what Azure holds: a reconcile that fails
// after 1 finds the old public IP unused and goes on from 2; after 2 it
// finds no public IP and creates it (the plain path). The Service is
// reported served only once the frontend uses the new public IP.

// Event reason of a replaced public IP.
const (
	// EventReasonPublicIPReplaced: an owned public IP was deleted and
	// created anew, with another address, to meet a setting Azure sets
	// only at creation.
	EventReasonPublicIPReplaced = "PublicIPReplaced"
)

// replacementSetting is the annotation (key=value) an owned public IP of
// the family does not meet and that only a new public IP can: the prefix
// (azure-pip-prefix-id(-ipv6)) or the IP tags (azure-pip-ip-tags). "" when
// it meets them.
func replacementSetting(svc *v1.Service, spec *annotations.ServiceSpec, family v1.IPFamily, pip *armnetwork.PublicIPAddress) string {
	if id := spec.PIPPrefixFor(family == v1.IPv6Protocol); id != "" && !strings.EqualFold(id, pipPrefixID(pip)) {
		return prefixKey(family) + "=" + id
	}
	if spec.PIPIPTags != nil && !sameIPTags(spec.PIPIPTags, pip) {
		return annotations.KeyPIPIPTags + "=" + svc.Annotations[annotations.KeyPIPIPTags]
	}
	return ""
}

// planReplacement decides whether the plan's existing public IP is
// replaced (pp.replace), or kept with a Warning saying why (pp.keep): only
// a Standard public IP azlb created for this Service alone, that the
// Service does not name by its address, whose frontends are the Service's
// own and serve no Private Link Service, is replaced. The new prefix is
// read and checked here (usablePrefix): one the public IP cannot come from
// refuses the Service before anything is written.
func (p *Provider) planReplacement(ctx context.Context, pl *servicePlan, pp *publicIPPlan) error {
	svc, spec, pip := pl.svc, pl.spec, pp.existing
	if pip == nil || !p.ownsPublicIP(pip, svc) || migration.IsBasic(pip) {
		return nil
	}
	setting := replacementSetting(svc, spec, pp.family, pip)
	if setting == "" {
		return nil
	}
	switch {
	case requestedAddress(svc, spec, pp.family) != "" && requestedPIPName(spec, pp.family) == "":
		pp.keep = "the Service asks for its address (" + requestedAddressField(spec, pp.family) + ")"
		return nil
	case len(pipServiceKeys(pip)) > 1:
		pp.keep = "it is shared by the Services " + tagValue(pip.Tags, names.TagServiceName)
		return nil
	case strings.EqualFold(strings.TrimSpace(svc.Annotations[privatelink.KeyCreate]), "true"):
		pp.keep = "its frontend serves the Service's Private Link Service, which would go with it"
		return nil
	}
	base := names.FrontendBase(svc)
	for _, f := range pl.previous {
		if f.fe.Properties == nil || f.fe.Properties.PublicIPAddress == nil || !idEqual(ptr.Deref(f.fe.Properties.PublicIPAddress.ID, ""), ptr.Deref(pip.ID, "")) {
			continue
		}
		lb, err := p.store.Get(ctx, f.lb)
		if err != nil {
			return err
		}
		if lb != nil && lb.Properties != nil && usedByOthers(lb, base, f.fe) {
			pp.keep = "other Services use its frontend " + feNameOf(f.fe)
			return nil
		}
	}
	// A frontend of another Service using it (an address it shares).
	if at, used, err := p.publicIPInUse(ctx, ptr.Deref(pip.ID, "")); err != nil {
		return err
	} else if used && !names.Owns(base, at[strings.LastIndex(at, "/")+1:]) {
		pp.keep = "frontend " + at + " of another Service uses it"
		return nil
	}
	// The new public IP comes from the prefix the Service names (the new
	// one, or the one it keeps when its IP tags change).
	if id := spec.PIPPrefixFor(pp.family == v1.IPv6Protocol); id != "" {
		prefix, err := p.usablePrefix(ctx, svc, pp.family, id)
		if err != nil {
			return err
		}
		pp.prefix = prefix
	}
	pp.replace = setting
	return nil
}

// replacePublicIP replaces the plan's existing public IP (see above) and
// returns the new one.
func (p *Provider) replacePublicIP(ctx context.Context, caller string, pl *servicePlan, pp *publicIPPlan) (publicIP, error) {
	svc, old := pl.svc, pp.existing
	oldID, oldAddr := ptr.Deref(old.ID, ""), pipAddress(old)
	if err := p.detachPublicIP(ctx, caller, pl, oldID); err != nil {
		return publicIP{}, err
	}
	// deleteIfOwned keeps a public IP a frontend still uses: the new one
	// cannot take its name then.
	if at, used, err := p.publicIPInUse(ctx, oldID); err != nil || used {
		if used {
			err = fmt.Errorf("service %s: public IP %s/%s is still used by frontend %s: not replaced", names.ServiceKey(svc), pp.rg, pp.name, at)
		}
		return publicIP{}, err
	}
	if err := p.deleteIfOwned(ctx, svc, pp.rg, pp.name); err != nil {
		return publicIP{}, err
	}
	created, err := p.createPublicIP(ctx, svc, pl.spec, pp.family, pp.rg, pp.name, pp.prefix)
	if err != nil {
		return publicIP{}, err
	}
	change := "the address changes from " + oldAddr + " to " + created.address
	if oldAddr == created.address {
		change = "Azure gave the new public IP the same address " + oldAddr
	}
	p.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonPublicIPReplaced,
		"Public IP %s replaced by a new one for %s (Azure sets it only when a public IP is created): %s; the old public IP is released",
		pp.name, pp.replace, change)
	logger(ctx).Info("Replaced public IP", "service", names.ServiceKey(svc), "publicIP", pp.name, "resourceGroup", pp.rg,
		"setting", pp.replace, "oldAddress", oldAddr, "address", created.address)
	return created, nil
}

// detachPublicIP removes, with one write per load balancer, the Service's
// frontends that use the public IP (as the plan found them) and the
// Service's rules on them. Each load balancer is compared with what Azure
// holds (Fresh): one where none is left is not written.
func (p *Provider) detachPublicIP(ctx context.Context, caller string, pl *servicePlan, pipID string) error {
	base := names.FrontendBase(pl.svc)
	done := map[string]bool{}
	for _, f := range pl.previous {
		if done[strings.ToLower(f.lb)] || f.fe.Properties == nil || f.fe.Properties.PublicIPAddress == nil ||
			!idEqual(ptr.Deref(f.fe.Properties.PublicIPAddress.ID, ""), pipID) {
			continue
		}
		done[strings.ToLower(f.lb)] = true
		if _, err := p.store.UpdateLB(ctx, caller, f.lb, lbstore.UpdateOptions{Fresh: true}, func(lb *armnetwork.LoadBalancer) (bool, error) {
			return dropFrontendsOf(lb, base, pipID), nil
		}); err != nil {
			return fmt.Errorf("remove the frontend of public IP %s from load balancer %s: %w", pipID, f.lb, err)
		}
	}
	return nil
}

// dropFrontendsOf removes from lb the frontends of base that use the public
// IP, and base's rules on them; it reports whether anything went.
func dropFrontendsOf(lb *armnetwork.LoadBalancer, base, pipID string) bool {
	if lb.Properties == nil {
		return false
	}
	var gone []*armnetwork.FrontendIPConfiguration
	kept := lb.Properties.FrontendIPConfigurations[:0:0]
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		if names.Owns(base, feNameOf(fe)) && fe.Properties != nil && fe.Properties.PublicIPAddress != nil && idEqual(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""), pipID) {
			gone = append(gone, fe)
			continue
		}
		kept = append(kept, fe)
	}
	if len(gone) == 0 {
		return false
	}
	lb.Properties.FrontendIPConfigurations = kept
	rules := lb.Properties.LoadBalancingRules[:0:0]
	for _, r := range lb.Properties.LoadBalancingRules {
		if r.Properties != nil && names.Owns(base, ruleNameOf(r)) && slicesContainsFrontend(gone, ptrID(r.Properties.FrontendIPConfiguration)) {
			continue
		}
		rules = append(rules, r)
	}
	lb.Properties.LoadBalancingRules = rules
	return true
}

func slicesContainsFrontend(fes []*armnetwork.FrontendIPConfiguration, id string) bool {
	for _, fe := range fes {
		if frontendRef(id, fe) {
			return true
		}
	}
	return false
}
