package provider

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/securitygroup"
)

// Shared IPs (docs/load-balancers.md, "Sharing an IP"): several Services
// may use one frontend when they name the same address (loadBalancerIP,
// azure-load-balancer-ipv4/ipv6, azure-pip-name) and their ports do not
// overlap. The frontend keeps the name of the Service that made it; the
// others' rules, named after themselves, point at it. A frontend stays
// while any rule uses it; one whose owner is gone goes with the last rule
// that used it.

// Event reasons of shared IPs.
const (
	// EventReasonSharedIPPortConflict: the Service asks for a port and
	// protocol another Service already has on the same frontend IP.
	EventReasonSharedIPPortConflict = "SharedIPPortConflict"
	// EventReasonSharedIPPlacementConflict: the Service's IP is on a load
	// balancer its azure-load-balancer-configurations does not allow.
	EventReasonSharedIPPlacementConflict = "SharedIPPlacementConflict"
	// EventReasonFrontendKept: the Service left a frontend that other
	// Services still use; it stays for them.
	EventReasonFrontendKept = "FrontendKeptForSharedIP"
)

// SharedIPConflictError reports that a Service asks for a frontend port and
// protocol another Service already has on the same IP.
type SharedIPConflictError struct {
	Service, Other, Address string
	Protocol                string
	Port                    int32
}

func (e *SharedIPConflictError) Error() string {
	return fmt.Sprintf("service %s: port %s/%d on IP %s is already used by Service %s (Services sharing an IP need distinct ports)",
		e.Service, e.Protocol, e.Port, e.Address, e.Other)
}

// frontendRef reports whether id references the frontend.
func frontendRef(id string, fe *armnetwork.FrontendIPConfiguration) bool {
	if fe.ID != nil && idEqual(id, *fe.ID) {
		return true
	}
	return names.ChildOf(id, "frontendIPConfigurations", feNameOf(fe))
}

// frontendReferenced reports whether a rule, inbound NAT rule or pool, or
// outbound rule of the load balancer uses the frontend: Azure refuses to
// remove it then.
func frontendReferenced(p *armnetwork.LoadBalancerPropertiesFormat, fe *armnetwork.FrontendIPConfiguration) bool {
	for _, r := range p.LoadBalancingRules {
		if r.Properties != nil && frontendRef(ptrID(r.Properties.FrontendIPConfiguration), fe) {
			return true
		}
	}
	for _, r := range p.InboundNatRules {
		if r.Properties != nil && frontendRef(ptrID(r.Properties.FrontendIPConfiguration), fe) {
			return true
		}
	}
	for _, r := range p.InboundNatPools {
		if r.Properties != nil && frontendRef(ptrID(r.Properties.FrontendIPConfiguration), fe) {
			return true
		}
	}
	for _, r := range p.OutboundRules {
		if r.Properties == nil {
			continue
		}
		for _, f := range r.Properties.FrontendIPConfigurations {
			if frontendRef(ptrID(f), fe) {
				return true
			}
		}
	}
	return false
}

// frontendsOfRules are the frontend ids (lower-cased) the rules owned by
// base use.
func frontendsOfRules(rules []*armnetwork.LoadBalancingRule, base string) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		if names.Owns(base, ruleNameOf(r)) && r.Properties != nil {
			if id := ptrID(r.Properties.FrontendIPConfiguration); id != "" {
				out[strings.ToLower(id)] = true
			}
		}
	}
	return out
}

// servesService reports whether the load balancer has anything of the
// Service: a frontend of its own or a rule (on a shared frontend).
func servesService(lb *armnetwork.LoadBalancer, base string) bool {
	if hasOwnedFrontend(lb, base) {
		return true
	}
	if lb.Properties == nil {
		return false
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if names.Owns(base, ruleNameOf(r)) {
			return true
		}
	}
	return false
}

// serviceFrontend is the frontend the Service uses for a family on lb: its
// own, or the shared one its rules of that family use. nil: none.
func serviceFrontend(lb *armnetwork.LoadBalancer, svc *v1.Service, family v1.IPFamily) *armnetwork.FrontendIPConfiguration {
	if fe := findFrontend(lb, names.Frontend(svc, family)); fe != nil {
		return fe
	}
	if lb == nil || lb.Properties == nil {
		return nil
	}
	base := names.FrontendBase(svc)
	for _, r := range lb.Properties.LoadBalancingRules {
		name := ruleNameOf(r)
		if !names.Owns(base, name) || r.Properties == nil || names.HasSuffixFold(name, names.IPv6Suffix) != (family == v1.IPv6Protocol) {
			continue
		}
		id := ptrID(r.Properties.FrontendIPConfiguration)
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if frontendRef(id, fe) {
				return fe
			}
		}
	}
	return nil
}

// usedFrontends are the frontends the Service uses on lb: its own and the
// shared ones its rules use.
func usedFrontends(lb *armnetwork.LoadBalancer, base string) []*armnetwork.FrontendIPConfiguration {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	ruleFEs := frontendsOfRules(lb.Properties.LoadBalancingRules, base)
	var out []*armnetwork.FrontendIPConfiguration
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		if names.Owns(base, feNameOf(fe)) || ruleFEs[strings.ToLower(ptr.Deref(fe.ID, ""))] {
			out = append(out, fe)
		}
	}
	return out
}

// sharedFrontendFor finds on lb the frontend of another Service that has
// the address the input asks for: the same public IP, or (internal) the
// requested private address in the same subnet. nil: none.
func sharedFrontendFor(lb *armnetwork.LoadBalancer, base string, in frontendInput, requestedPrivate string) *armnetwork.FrontendIPConfiguration {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		if names.Owns(base, feNameOf(fe)) || fe.Properties == nil {
			continue
		}
		props := fe.Properties
		switch {
		case in.publicIPID != "":
			if props.PublicIPAddress != nil && idEqual(ptr.Deref(props.PublicIPAddress.ID, ""), in.publicIPID) {
				return fe
			}
		case requestedPrivate != "":
			if props.Subnet != nil && idEqual(ptr.Deref(props.Subnet.ID, ""), in.subnetID) && ptr.Deref(props.PrivateIPAddress, "") == requestedPrivate {
				return fe
			}
		}
	}
	return nil
}

// sharedPortConflict finds a rule of another Service on the frontend
// (feID) that takes a frontend port and protocol one of the wanted rules
// needs. An HA ports rule (protocol All, port 0) takes every port.
func sharedPortConflict(lb *armnetwork.LoadBalancer, base, feID string, want []*armnetwork.LoadBalancingRule) (other *armnetwork.LoadBalancingRule, mine *armnetwork.LoadBalancingRule) {
	if lb == nil || lb.Properties == nil {
		return nil, nil
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if names.Owns(base, ruleNameOf(r)) || r.Properties == nil || !idEqual(ptrID(r.Properties.FrontendIPConfiguration), feID) {
			continue
		}
		for _, w := range want {
			if portsOverlap(r.Properties, w.Properties) {
				return r, w
			}
		}
	}
	return nil, nil
}

func portsOverlap(a, b *armnetwork.LoadBalancingRulePropertiesFormat) bool {
	pa, pb := ptr.Deref(a.Protocol, ""), ptr.Deref(b.Protocol, "")
	if pa == armnetwork.TransportProtocolAll || pb == armnetwork.TransportProtocolAll {
		return true
	}
	return strings.EqualFold(string(pa), string(pb)) && ptr.Deref(a.FrontendPort, 0) == ptr.Deref(b.FrontendPort, 0)
}

// liveBases returns a lookup of the Services (any class: another
// implementation's Service is not azlb's to remove) by frontend base name,
// from the Service lister. Without a lister every base counts as live, so
// nothing of another Service is ever removed.
//
// The index is built on the first lookup: most reconciles never look.
func (p *Provider) liveBases() func(string) *v1.Service {
	if p.services == nil {
		return func(string) *v1.Service { return &v1.Service{} }
	}
	var once sync.Once
	var byBase map[string]*v1.Service
	return func(base string) *v1.Service {
		once.Do(func() {
			svcs, err := p.services.List(labels.Everything())
			if err != nil {
				return
			}
			byBase = make(map[string]*v1.Service, len(svcs))
			for _, s := range svcs {
				if s.Spec.Type == v1.ServiceTypeLoadBalancer {
					byBase[strings.ToLower(names.FrontendBase(s))] = s
				}
			}
		})
		if byBase == nil {
			return &v1.Service{} // the lister failed: every base counts as live
		}
		return byBase[strings.ToLower(base)]
	}
}

// serviceNameOfBase names the Service with a base name for events: its
// key, or the base when no Service has it.
func serviceNameOfBase(lookup func(string) *v1.Service, base string) string {
	if s := lookup(base); s != nil && s.Name != "" {
		return names.ServiceKey(s)
	}
	return "(frontend " + base + ")"
}

// precheckSharedIP checks, on the cached copy of the load balancer the
// Service goes to, whether it shares an IP (another Service's frontend has
// its address, or another Service uses its frontend) and whether its ports
// overlap another's there. An overlap refuses the Service before anything
// is written; the load balancer write checks again on what Azure holds.
func (p *Provider) precheckSharedIP(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, lbName string, inputs []frontendInput) (bool, error) {
	lb, err := p.store.Get(ctx, lbName)
	if err != nil || lb == nil {
		return false, err
	}
	base := names.FrontendBase(svc)
	ref := p.lbRef(lbName)
	sharing := false
	var lookup func(string) *v1.Service
	for _, in := range inputs {
		var fe *armnetwork.FrontendIPConfiguration
		if own := findFrontend(lb, names.Frontend(svc, in.family)); own != nil {
			fe = own
		} else if fe = sharedFrontendFor(lb, base, in, in.requestedPrivateIP()); fe == nil {
			continue
		}
		feID := ptr.Deref(fe.ID, ref.Child("frontendIPConfigurations", feNameOf(fe)))
		if !usedByOthers(lb, base, fe) {
			continue
		}
		sharing = true
		if other, mine := sharedPortConflict(lb, base, feID, wantedPorts(svc, spec)); other != nil {
			if lookup == nil {
				lookup = p.liveBases()
			}
			err := &SharedIPConflictError{
				Service: names.ServiceKey(svc), Other: serviceNameOfBase(lookup, names.ServiceBaseOf(ruleNameOf(other))), Address: in.address,
				Protocol: string(ptr.Deref(mine.Properties.Protocol, "")), Port: ptr.Deref(mine.Properties.FrontendPort, 0),
			}
			return true, refusef(EventReasonSharedIPPortConflict, err, "%v; nothing is written for the Service", err)
		}
	}
	return sharing, nil
}

// usedByOthers reports whether a frontend is another Service's, or one of
// another Service's rules uses it.
func usedByOthers(lb *armnetwork.LoadBalancer, base string, fe *armnetwork.FrontendIPConfiguration) bool {
	if !names.Owns(base, feNameOf(fe)) {
		return true
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if !names.Owns(base, ruleNameOf(r)) && r.Properties != nil && frontendRef(ptrID(r.Properties.FrontendIPConfiguration), fe) {
			return true
		}
	}
	return false
}

// wantedPorts are the frontend ports and protocols the Service's rules
// take, as rules for sharedPortConflict.
func wantedPorts(svc *v1.Service, spec *annotations.ServiceSpec) []*armnetwork.LoadBalancingRule {
	if spec.HAPorts {
		return []*armnetwork.LoadBalancingRule{{Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: ptr.To(armnetwork.TransportProtocolAll), FrontendPort: ptr.To[int32](0)}}}
	}
	var out []*armnetwork.LoadBalancingRule
	for _, sp := range svc.Spec.Ports {
		if spec.Port(sp.Port).NoLBRule {
			continue
		}
		proto, err := transportProtocol(sp.Protocol)
		if err != nil {
			continue
		}
		out = append(out, &armnetwork.LoadBalancingRule{Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: ptr.To(proto), FrontendPort: ptr.To(sp.Port)}})
	}
	return out
}

// frontendAddressesOf are the addresses of the inputs known before the
// write.
func frontendAddressesOf(inputs []frontendInput) []string {
	var out []string
	for _, in := range inputs {
		if in.address != "" {
			out = append(out, in.address)
		}
	}
	return out
}

// deleteOrphanedFrontendIPs deletes the public IPs of frontends a write
// removed because their owner was gone and their last user left: those
// azlb created (cluster tag) for Services none of which exists any more.
func (p *Provider) deleteOrphanedFrontendIPs(ctx context.Context, svc *v1.Service, orphans []*armnetwork.FrontendIPConfiguration) error {
	if len(orphans) == 0 {
		return nil
	}
	for _, fe := range orphans {
		logger(ctx).Info("Removed a shared frontend its owner left and its last user no longer uses", "service", names.ServiceKey(svc), "frontend", feNameOf(fe))
		if fe.Properties == nil || fe.Properties.PublicIPAddress == nil {
			continue
		}
		id := ptr.Deref(fe.Properties.PublicIPAddress.ID, "")
		rg, name, err := names.ParseID(id)
		if err != nil {
			continue
		}
		pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
		if azure.Classify(err) == azure.ClassStale {
			continue
		}
		if err != nil {
			return fmt.Errorf("get public IP %s: %w", id, err)
		}
		if !strings.EqualFold(tagValue(pip.Tags, names.TagClusterName), p.clusterName()) || servicesOfPIPLive(pip, p.services) {
			continue
		}
		if a := pipAddress(pip); a != "" && p.sg != nil {
			if err := p.releaseAddresses(ctx, svc, []string{a}); err != nil {
				return err
			}
		}
		if err := p.publicIPs(ctx).Delete(ctx, rg, name); err != nil && azure.Classify(err) != azure.ClassStale {
			return fmt.Errorf("delete public IP %s/%s: %w", rg, name, err)
		}
		logger(ctx).Info("Deleted public IP of a shared frontend whose Services are all gone", "publicIP", name, "resourceGroup", rg)
	}
	return nil
}

// pipServiceKeys are the Services a public IP azlb created is tagged with
// (k8s-azure-service: one "namespace/name", or several separated by
// commas as the Azure cloud provider writes them for a shared IP).
func pipServiceKeys(pip *armnetwork.PublicIPAddress) []string {
	var out []string
	for _, k := range strings.Split(tagValue(pip.Tags, names.TagServiceName), ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// servicesOfPIPLive reports whether a Service the public IP is tagged with
// still exists (true without a lister: nothing is deleted then).
func servicesOfPIPLive(pip *armnetwork.PublicIPAddress, services corelisters.ServiceLister) bool {
	if services == nil {
		return true
	}
	for _, k := range pipServiceKeys(pip) {
		ns, name, ok := strings.Cut(k, "/")
		if !ok {
			return true // not a key azlb wrote: keep it
		}
		if _, err := services.Services(ns).Get(name); err == nil {
			return true
		}
	}
	return false
}

// publicIPInUse finds a frontend on a managed load balancer that uses the
// public IP (id): it cannot be deleted then ("", false: none).
func (p *Provider) publicIPInUse(ctx context.Context, id string) (string, bool, error) {
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return "", false, err
	}
	for _, name := range lbs {
		lb, err := p.store.Get(ctx, name)
		if err != nil {
			return "", false, err
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if fe.Properties != nil && fe.Properties.PublicIPAddress != nil && idEqual(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""), id) {
				return name + "/" + feNameOf(fe), true, nil
			}
		}
	}
	return "", false, nil
}

// notePublicIP remembers a public IP's address.
func (p *Provider) notePublicIP(id, address string) {
	if id != "" && address != "" {
		p.pipAddrs.Store(id, address) // as ARM spells it: looked up without allocating
		p.pipAddrs.Store(strings.ToLower(id), address)
	}
}

// frontendAddress is a frontend's address: its private one, or its public
// IP's as last read ("" when not read yet).
func (p *Provider) frontendAddress(fe *armnetwork.FrontendIPConfiguration) string {
	if fe.Properties == nil {
		return ""
	}
	if a := ptr.Deref(fe.Properties.PrivateIPAddress, ""); a != "" {
		return a
	}
	if fe.Properties.PublicIPAddress == nil {
		return ""
	}
	id := ptr.Deref(fe.Properties.PublicIPAddress.ID, "")
	if a, ok := p.pipAddrs.Load(id); ok {
		return a.(string)
	}
	if a, ok := p.pipAddrs.Load(strings.ToLower(id)); ok {
		return a.(string)
	}
	return ""
}

// addCoTenantGrants keeps the rules of the other Services sharing an
// address the edit releases: an edit takes its released addresses out of
// every rule, and then gives them back what those Services' access
// settings allow on their own ports (their allows and deny, as their own
// reconcile writes them). A Service whose settings are invalid gets
// nothing back: it fails closed until its own reconcile reports it.
func (p *Provider) addCoTenantGrants(ctx context.Context, svc *v1.Service, edit *securitygroup.Edit) {
	if len(edit.Release.Addresses) == 0 {
		return
	}
	released := map[string]bool{}
	for _, a := range edit.Release.Addresses {
		released[a] = true
	}
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return
	}
	base := names.FrontendBase(svc)
	var lookup func(string) *v1.Service
	for _, name := range lbs {
		lb, err := p.store.Get(ctx, name)
		if err != nil || lb == nil || lb.Properties == nil {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			addr := p.frontendAddress(fe)
			if addr == "" || !released[addr] {
				continue
			}
			users := map[string]bool{}
			for _, r := range lb.Properties.LoadBalancingRules {
				if b := names.ServiceBaseOf(ruleNameOf(r)); r.Properties != nil && !strings.EqualFold(b, base) && frontendRef(ptrID(r.Properties.FrontendIPConfiguration), fe) {
					users[strings.ToLower(b)] = true
				}
			}
			for b := range users {
				if lookup == nil {
					lookup = p.liveBases()
				}
				other := lookup(b)
				if other == nil || other.Name == "" {
					continue
				}
				allow, deny := p.grantsOn(other, addr)
				edit.Allow = append(edit.Allow, allow...)
				edit.Deny = append(edit.Deny, deny...)
			}
		}
	}
}

// grantsOn are the rules a Service's access settings give it on a frontend
// address (none when its rules' destinations are the nodes: floating IP
// off).
func (p *Provider) grantsOn(svc *v1.Service, addr string) ([]securitygroup.Allow, []securitygroup.Deny) {
	spec, err := annotations.Parse(svc)
	if err != nil || !spec.EnableFloatingIP {
		return nil, nil
	}
	acc, err := accesscontrol.Parse(svc, spec.Internal, spec.EnableFloatingIP)
	if err != nil {
		return nil, nil
	}
	fam := v1.IPv4Protocol
	if securitygroup.FamilyOf(addr) == securitygroup.IPv6 {
		fam = v1.IPv6Protocol
	}
	return acc.Grants(securityPorts(svc, spec), map[v1.IPFamily][]string{fam: {addr}})
}

// sharedIPLoadBalancer is the managed load balancer the Service must stay
// on or go to because of a shared IP: the one where another Service's
// frontend has the address the Service asks for, or where other Services
// use the Service's own frontend. "" when none: placement is free.
func (p *Provider) sharedIPLoadBalancer(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, families []v1.IPFamily) (string, error) {
	base := names.FrontendBase(svc)
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return "", err
	}
	// What the Service asks for: public IP ids (by name, or by address
	// through a listing) or private addresses.
	wantPIP := map[string]bool{}
	wantPriv := map[string]bool{}
	rg := p.publicIPGroup(spec)
	for _, fam := range families {
		if spec.Internal {
			if a := requestedAddress(svc, spec, fam); a != "" {
				wantPriv[a] = true
			}
			continue
		}
		if n := requestedPIPName(spec, fam); n != "" {
			wantPIP[strings.ToLower("/subscriptions/"+p.cfg.NetworkSubscriptionID()+"/resourceGroups/"+rg+"/providers/Microsoft.Network/publicIPAddresses/"+n)] = true
		} else if a := requestedAddress(svc, spec, fam); a != "" {
			pips, err := p.publicIPs(ctx).List(ctx, rg)
			if err != nil {
				return "", fmt.Errorf("list public IPs in %s: %w", rg, err)
			}
			for _, pip := range pips {
				if pipAddress(pip) == a {
					wantPIP[strings.ToLower(ptr.Deref(pip.ID, ""))] = true
				}
			}
		}
	}
	for _, name := range lbs {
		lb, err := p.store.Get(ctx, name)
		if err != nil {
			return "", err
		}
		if lb == nil || lb.Properties == nil || names.IsInternalLB(name) != spec.Internal {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if !usedByOthers(lb, base, fe) || fe.Properties == nil {
				continue
			}
			mine := names.Owns(base, feNameOf(fe))
			asked := wantPriv[ptr.Deref(fe.Properties.PrivateIPAddress, "")] ||
				fe.Properties.PublicIPAddress != nil && wantPIP[strings.ToLower(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""))]
			if mine && hasOtherRules(lb, base, fe) || !mine && asked {
				return name, nil
			}
		}
	}
	return "", nil
}

// hasOtherRules reports whether a rule of another Service uses the
// frontend.
func hasOtherRules(lb *armnetwork.LoadBalancer, base string, fe *armnetwork.FrontendIPConfiguration) bool {
	for _, r := range lb.Properties.LoadBalancingRules {
		if !names.Owns(base, ruleNameOf(r)) && r.Properties != nil && frontendRef(ptrID(r.Properties.FrontendIPConfiguration), fe) {
			return true
		}
	}
	return false
}

// addressKeys name the addresses a Service's reconcile touches, for
// lockAddresses: those its spec asks for (a public IP by name, its own
// generated one included, or by address; a private address in its
// subnet) and those of the frontends it has now (current). Two Services
// naming one IP get one key, whichever way they name it once its frontend
// exists (the address of a public IP read before is known).
func (p *Provider) addressKeys(svc *v1.Service, spec *annotations.ServiceSpec, families []v1.IPFamily, current serviceFrontendSet) []string {
	var keys []string
	pipKey := func(rg, name string) string { return "pip:" + strings.ToLower(rg+"/"+name) }
	if spec != nil {
		for _, fam := range families {
			addr := requestedAddress(svc, spec, fam)
			switch {
			case spec.Internal && addr != "":
				subnet := cmp.Or(spec.InternalSubnet, p.cfg.SubnetName)
				keys = append(keys, "priv:"+strings.ToLower(p.subnetID(subnet))+"/"+addr)
			case spec.Internal:
			case requestedPIPName(spec, fam) != "":
				keys = append(keys, pipKey(p.publicIPGroup(spec), requestedPIPName(spec, fam)))
			case addr != "":
				keys = append(keys, "addr:"+addr)
			default:
				keys = append(keys, pipKey(p.publicIPGroup(spec), names.PublicIP(p.clusterName(), svc, fam)))
			}
		}
	}
	for _, f := range current {
		props := f.fe.Properties
		if props == nil {
			continue
		}
		if props.PublicIPAddress != nil {
			id := ptr.Deref(props.PublicIPAddress.ID, "")
			if rg, name, err := names.ParseID(id); err == nil {
				keys = append(keys, pipKey(rg, name))
			}
			if a := p.frontendAddress(f.fe); a != "" {
				keys = append(keys, "addr:"+a)
			}
		} else if props.Subnet != nil {
			keys = append(keys, "priv:"+strings.ToLower(ptr.Deref(props.Subnet.ID, ""))+"/"+ptr.Deref(props.PrivateIPAddress, ""))
		}
	}
	return keys
}

// lockAddresses takes the locks of keys (addressKeys), in order, and
// returns their release. Services sharing an IP are reconciled one after
// another: the second is placed where the first's frontend is, and the
// rules each writes for the others on their address come from the load
// balancer as the previous one left it (two reconciles at once could each
// take the other's rules away).
func (p *Provider) lockAddresses(keys []string) func() {
	slices.Sort(keys)
	keys = slices.Compact(keys)
	unlocks := make([]func(), 0, len(keys))
	for _, k := range keys {
		unlocks = append(unlocks, p.perAddress.Lock(k))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// orphanedFrontendIDs are the ids of the frontends on lb of Services gone
// (live reports a base's Service) that the Service's rules use, that no
// other Service's rule uses, and that its rules will not use once they are
// replaced (keep: the ids they will use): the write removes them with the
// Service's last rule on them, so their Private Link Services go first
// (Azure refuses to remove a frontend one uses).
func orphanedFrontendIDs(lb *armnetwork.LoadBalancer, base string, keep []string, live func(string) bool) []string {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	used := frontendsOfRules(lb.Properties.LoadBalancingRules, base)
	var out []string
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		name, id := feNameOf(fe), ptr.Deref(fe.ID, "")
		if id == "" || names.Owns(base, name) || !used[strings.ToLower(id)] || live(names.ServiceBaseOf(name)) ||
			slices.ContainsFunc(keep, func(k string) bool { return idEqual(k, id) }) || hasOtherRules(lb, base, fe) {
			continue
		}
		out = append(out, id)
	}
	return out
}

// droppedFrontendIDs are the ids of the Service's own frontends on lb of
// families it no longer has (the write removes them), unless another
// Service uses them.
func droppedFrontendIDs(lb *armnetwork.LoadBalancer, base string, svc *v1.Service, families []v1.IPFamily) []string {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	var out []string
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		name := feNameOf(fe)
		if !names.Owns(base, name) || fe.ID == nil || usedByOthers(lb, base, fe) {
			continue
		}
		keep := false
		for _, fam := range families {
			keep = keep || strings.EqualFold(name, names.Frontend(svc, fam))
		}
		if !keep {
			out = append(out, *fe.ID)
		}
	}
	return out
}
