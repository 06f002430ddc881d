package provider

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/securitygroup"
)

// Event reasons of access control (docs/security-groups.md).
const (
	EventReasonSecurityRulesUpdated         = "SecurityRulesUpdated"
	EventReasonInvalidSourceRanges          = "InvalidSourceRanges"
	EventReasonInvalidAllowedServiceTags    = "InvalidAllowedServiceTags"
	EventReasonConflictingAccess            = "ConflictingAccessConfiguration"
	EventReasonSecurityRuleLimitExceeded    = "SecurityRuleLimitExceeded"
	EventReasonSecurityGroupNotConfigured   = "SecurityGroupNotConfigured"
	EventReasonSecurityGroupNotFound        = "SecurityGroupNotFound"
	securityGroupNameField                  = "securityGroupName"
	securityGroupNotConfiguredRestrictedMsg = "the Service restricts its sources (%s) but azure.json %s is empty: azlb cannot restrict it, so nothing is written for it"
)

// ErrSecurityGroupNotConfigured fails the reconcile of a Service that
// restricts its sources while no NSG is configured.
var ErrSecurityGroupNotConfigured = errors.New("azure.json securityGroupName is empty: a Service that restricts its sources cannot be served")

// accessOf parses the Service's access settings: a conflict, a value that
// is not a boolean, or a restricted Service without a security group to
// restrict it refuses the Service (a *Refusal); invalid values fail closed
// and are reported by the notes returned (Warning events, recorded when
// the plan is written), as are the families its source ranges leave
// closed.
func (p *Provider) accessOf(svc *v1.Service, spec *annotations.ServiceSpec, families []v1.IPFamily) (*accesscontrol.Access, []func(), error) {
	acc, err := accesscontrol.Parse(svc, spec.Internal, spec.EnableFloatingIP)
	if err != nil {
		reason := EventReasonConflictingAccess
		if ie := (*accesscontrol.InvalidError)(nil); errors.As(err, &ie) {
			reason = EventReasonInvalidAnnotation
		}
		return nil, nil, refusef(reason, err, "%v; nothing is written for the Service", err)
	}
	if p.sg == nil && acc.Restricted() {
		return nil, nil, refusef(EventReasonSecurityGroupNotConfigured, fmt.Errorf("service %s: %w", names.ServiceKey(svc), ErrSecurityGroupNotConfigured),
			securityGroupNotConfiguredRestrictedMsg, acc.Describe(), securityGroupNameField)
	}
	notes := []func(){func() {
		if len(closedFamilies(acc, families)) == 0 {
			p.familyTold.ShouldReport(svc, nil) // fixed: a later gap is news
		}
	}}
	for _, v := range acc.InvalidRanges {
		notes = append(notes, func() {
			p.warn(svc, EventReasonInvalidSourceRanges, "Invalid source range %s; the Service stays closed to every source it does not list validly (fail closed)", v)
		})
	}
	for _, v := range acc.InvalidTags {
		notes = append(notes, func() {
			p.warn(svc, EventReasonInvalidAllowedServiceTags, "Invalid service tag %s; the Service stays closed to every source it does not list validly (fail closed)", v)
		})
	}
	for _, v := range acc.InvalidSettings {
		notes = append(notes, func() {
			p.warn(svc, EventReasonInvalidAnnotation, "Invalid access setting %s; the Service stays closed to every source it does not list validly (fail closed)", v)
		})
	}
	if closed := closedFamilies(acc, families); len(closed) > 0 {
		notes = append(notes, func() {
			if !p.familyTold.ShouldReport(svc, closed) {
				return
			}
			p.warn(svc, EventReasonNoSourceOfFamily, "The Service's source ranges have no %s range, so nothing may reach it over %s (fail closed); list a range of that family to let its clients in",
				strings.Join(closed, " or "), strings.Join(closed, " or "))
		})
	}
	if p.cfg.SecurityGroupName == "" && acc.NeedsRules() {
		notes = append(notes, func() {
			p.warn(svc, EventReasonSecurityGroupNotConfigured,
				"azure.json %s is empty: azlb writes no security rule, and a Standard load balancer is closed until a network security group allows the Service's ports", securityGroupNameField)
		})
	}
	return acc, notes, nil
}

// closedFamilies are the Service's families its valid source ranges leave
// without a source (only ranges of the other family, no service tag),
// when the Service restricts its sources.
func closedFamilies(acc *accesscontrol.Access, families []v1.IPFamily) []string {
	if acc.Disabled || !acc.RangesSet || len(acc.Tags) > 0 || acc.Invalid() {
		return nil
	}
	var out []string
	for _, fam := range families {
		if len(acc.Ranges[fam]) == 0 {
			out = append(out, string(fam))
		}
	}
	if len(out) == len(families) && len(acc.Ranges[v1.IPv4Protocol])+len(acc.Ranges[v1.IPv6Protocol]) == 0 {
		return nil // no valid range at all: the invalid ones are reported
	}
	return out
}

// securityPorts are the ports the Service's rules cover: its ports
// (floating IP on) or node ports (off), without ports that have no load
// balancing rule.
func securityPorts(svc *v1.Service, spec *annotations.ServiceSpec) []accesscontrol.Port {
	var out []accesscontrol.Port
	for _, sp := range svc.Spec.Ports {
		if spec.Port(sp.Port).NoLBRule {
			continue
		}
		n := sp.Port
		switch {
		case spec.HAPorts:
			n = 0
		case !spec.EnableFloatingIP:
			n = sp.NodePort
			if n == 0 {
				continue
			}
		}
		out = append(out, accesscontrol.Port{Protocol: sp.Protocol, Number: n})
	}
	return out
}

// ensureSecurityRules writes the Service's NSG change: its old destinations
// leave every rule and it gets the rules its access settings ask for.
// frontends are the Service's frontend addresses by family (empty on
// delete).
func (p *Provider) ensureSecurityRules(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, acc *accesscontrol.Access,
	frontends map[v1.IPFamily]string, nodes []*v1.Node) error {
	return p.finishSecurityRules(ctx, svc, acc, p.beginSecurityRules(ctx, svc, spec, acc, frontends, nodes))
}

// frontendSetAddresses are the addresses of a Service's frontends: private
// ones as they are, public ones read (but those in skip, lower-cased ids,
// whose addresses the caller knows). A public IP gone meanwhile has none.
func (p *Provider) frontendSetAddresses(ctx context.Context, fs serviceFrontendSet, skip map[string]bool) ([]string, error) {
	if p.sg == nil {
		return nil, nil
	}
	var out []string
	for _, f := range fs {
		props := f.fe.Properties
		if props == nil {
			continue
		}
		if a := ptr.Deref(props.PrivateIPAddress, ""); a != "" {
			out = append(out, a)
		}
		if props.PublicIPAddress == nil {
			continue
		}
		id := ptr.Deref(props.PublicIPAddress.ID, "")
		if skip[strings.ToLower(id)] {
			continue
		}
		rg, name, err := names.ParseID(id)
		if err != nil {
			continue
		}
		pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
		if azure.Classify(err) == azure.ClassStale {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read public IP %s: %w", id, err)
		}
		if a := pipAddress(pip); a != "" {
			p.notePublicIP(id, a)
			out = append(out, a)
		}
	}
	return out, nil
}

// beginSecurityRules queues the Service's NSG change and returns at once
// (nil without an NSG writer); finishSecurityRules waits for it. The
// reconcile queues it as soon as the frontend addresses are known, so its
// write overlaps the load balancer's.
func (p *Provider) beginSecurityRules(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, acc *accesscontrol.Access,
	frontends map[v1.IPFamily]string, nodes []*v1.Node, released ...string) *securitygroup.Pending {
	if p.sg == nil {
		return nil
	}
	edit := p.securityEdit(ctx, svc, spec, acc, frontends, nodes, released)
	// Until the write is confirmed the Service may hold both its old and
	// its new extra addresses.
	p.extras.add(names.ServiceKey(svc), extraAddresses(spec))
	return p.sg.Begin(ctx, edit)
}

// securityEdit is the Service's NSG change: what it may hold leaves every
// rule (released: addresses of its frontends now), and it gets the rules
// its access settings call for on its frontend addresses (frontends, by
// family) or, floating IP off, on the nodes' addresses. No spec: it only
// leaves (a delete).
func (p *Provider) securityEdit(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, acc *accesscontrol.Access,
	frontends map[v1.IPFamily]string, nodes []*v1.Node, released []string) securitygroup.Edit {
	nodeIPs := p.nodeAddrs.addresses(p.eligibleNodes(p.freshNodes(nodes)))
	known := p.knownNodeAddresses(nodes)
	// Its extra addresses (azure-additional-public-ips), those it had and
	// those it lists, leave every rule like its frontend addresses.
	extras := p.extrasToRelease(svc, spec, known)
	// Its node ports leave every node, eligible or not: a node that
	// became ineligible (excluded, deleted) may still be in a rule.
	edit := securitygroup.Edit{Service: names.ServiceKey(svc), Release: p.releaseOf(svc, frontends, known, append(slices.Clone(released), extras...)),
		FromCopy: nsgCopyOf(ctx)}
	if acc != nil && spec != nil {
		// Destinations follow the Service's floating IP setting. The IPv6
		// rules of an internal Service have floating IP off all the same
		// (desired.go), yet their destination stays the frontend address,
		// as the Azure cloud provider writes it: the virtual network
		// reaches the nodes anyway (AllowVnetInBound), and a deny-all on
		// the nodes' addresses would cut every port of theirs
		// (docs/security-groups.md, Destinations).
		dsts := map[v1.IPFamily][]string{}
		if spec.EnableFloatingIP {
			for fam, a := range frontends {
				if a != "" {
					dsts[fam] = []string{a}
				}
			}
		} else {
			for fam, ips := range nodeIPs {
				dsts[fam] = slices.Clone(ips)
			}
		}
		// Its extra addresses join the destinations of their family, on
		// the same ports, from the same sources (and in its deny-all).
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			dsts[fam] = append(dsts[fam], spec.AdditionalIPsOf(fam)...)
		}
		edit.Allow, edit.Deny = acc.Grants(securityPorts(svc, spec), dsts)
	}
	p.addCoTenantGrants(ctx, svc, &edit)
	p.addExtraCoTenantGrants(svc, &edit, extras)
	return edit
}

// finishSecurityRules waits for the change beginSecurityRules queued and
// reports it (events).
func (p *Provider) finishSecurityRules(ctx context.Context, svc *v1.Service, acc *accesscontrol.Access, pd *securitygroup.Pending) error {
	if pd == nil {
		return nil
	}
	res, err := pd.Wait()
	if err != nil {
		var le *securitygroup.LimitError
		var nf *securitygroup.NotFoundError
		switch {
		case errors.As(err, &le):
			p.warn(svc, EventReasonSecurityRuleLimitExceeded, "%v; nothing of this Service's change was written", err)
		case errors.As(err, &nf):
			p.warn(svc, EventReasonSecurityGroupNotFound, "%v", err)
		}
		return err
	}
	// Written: the Service holds the extra addresses it lists now (none
	// once its rules are removed).
	var held []string
	if acc != nil {
		if spec, err := annotations.Parse(svc); err == nil {
			held = extraAddresses(spec)
		} else {
			held = p.extras.get(names.ServiceKey(svc))
		}
	}
	p.extras.set(names.ServiceKey(svc), held)
	if res.Changed && res.Written {
		rg, name := p.sg.Name()
		noteRepair(ctx, RepairSecurityGroup, "network security group %s/%s (the Service's rules)", rg, name)
		msg := "removed the Service's rules"
		if acc != nil {
			msg = "allowed sources: " + acc.Describe()
		}
		p.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonSecurityRulesUpdated, "Network security group %s/%s: %s", rg, name, msg)
	}
	return nil
}

// releaseOf is everything the Service may hold in the NSG: the addresses
// of the frontends it has (and is leaving), and its node ports on every
// node address seen.
func (p *Provider) releaseOf(svc *v1.Service, frontends map[v1.IPFamily]string, nodeIPs map[v1.IPFamily][]string, released []string) securitygroup.Release {
	var r securitygroup.Release
	seen := map[string]bool{}
	add := func(a string) {
		if ip, err := netip.ParseAddr(a); err == nil && !seen[ip.String()] {
			seen[ip.String()] = true
			r.Addresses = append(r.Addresses, ip.String())
		}
	}
	for _, a := range frontends {
		add(a)
	}
	// Not the addresses of its status: once its frontend is gone such an
	// address is free, and another Service may hold it already (found by
	// the chaos suite: a retried delete took a new Service's rules away).
	// The frontends it still has are in frontends and released.
	for _, a := range released {
		add(a)
	}
	for _, ips := range nodeIPs {
		r.NodeAddresses = append(r.NodeAddresses, ips...)
	}
	for _, sp := range svc.Spec.Ports {
		if sp.NodePort != 0 {
			r.NodePorts = append(r.NodePorts, securitygroup.ProtocolPort{Protocol: accesscontrol.RuleProtocol(sp.Protocol), Port: accesscontrol.PortString(sp.NodePort)})
		}
	}
	return r
}

// frontendAddresses are the Service's frontend addresses on lb by family:
// the private address, or the public IP's (read).
func (p *Provider) frontendAddresses(ctx context.Context, svc *v1.Service, lb *armnetwork.LoadBalancer) (map[v1.IPFamily]string, error) {
	out := map[v1.IPFamily]string{}
	st, err := p.statusOf(ctx, svc, "", lb)
	if azure.Classify(err) == azure.ClassStale {
		return out, nil // its public IP is gone: the addresses last reported are released anyway
	}
	if err != nil {
		return nil, err
	}
	for _, in := range st.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			if ip.Is4() {
				out[v1.IPv4Protocol] = ip.String()
			} else {
				out[v1.IPv6Protocol] = ip.String()
			}
		}
	}
	return out, nil
}

// collectSecurityRules removes from azlb's rules the destinations that are
// no addresses of a frontend on a managed load balancer nor of a node: the
// rules of Services deleted while no controller ran. It runs once per
// start, before the first reconcile, and in every drift pass; without a
// node lister it does not run (node addresses could not be told apart).
// With grace (the drift pass, while Services are reconciled), an address
// goes only when the previous pass found it dead too: a Service being
// created writes its rule before its frontend is on the load balancer, and
// must not lose it to a pass that read the load balancers just before. With a load-balancer class
// (SetLoadBalancerClass) it removes no address, only node ports no Service
// has.
func (p *Provider) collectSecurityRules(ctx context.Context, grace bool) error {
	if p.sg == nil || p.nodes == nil {
		return nil
	}
	live, err := p.liveAddresses(ctx)
	if err != nil {
		return err
	}
	// The extra addresses Services list (azure-additional-public-ips)
	// are no frontend of azlb's, yet not dead.
	extras, err := p.listedExtras()
	if err != nil {
		return err
	}
	for a := range extras {
		live[a] = true
	}
	p.deadMu.Lock()
	prevDead := p.deadDests
	p.deadMu.Unlock()
	var deadMu sync.Mutex
	dead := map[string]bool{}
	liveDest := func(d string) bool {
		ip, err := netip.ParseAddr(d)
		if err != nil {
			return true // a prefix or tag: not an address azlb put there for a Service
		}
		if live[ip.String()] {
			return true
		}
		deadMu.Lock()
		defer deadMu.Unlock()
		dead[ip.String()] = true
		return grace && !prevDead[ip.String()]
	}
	edit := securitygroup.Edit{Service: "(collect)", Live: p.collectable(liveDest)}
	if err := p.collectNodePorts(&edit); err != nil {
		return err
	}
	res, err := p.sg.Update(ctx, edit)
	if err != nil {
		return err
	}
	deadMu.Lock()
	p.deadMu.Lock()
	p.deadDests = dead
	p.deadMu.Unlock()
	deadMu.Unlock()
	if res.Changed {
		logger(ctx).Info("Removed destinations of deleted Services from the network security group")
		rg, name := p.sg.Name()
		noteRepair(ctx, RepairSecurityGroup, "network security group %s/%s (destinations no Service has)", rg, name)
	}
	return nil
}

// liveAddresses are the addresses of every frontend on a managed load
// balancer (public IPs read in one listing) and of every node.
func (p *Provider) liveAddresses(ctx context.Context) (map[string]bool, error) {
	live := map[string]bool{}
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return nil, err
	}
	pipIDs := map[string]bool{}
	for _, name := range lbs {
		lb, err := p.store.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if fe.Properties == nil {
				continue
			}
			if a := ptr.Deref(fe.Properties.PrivateIPAddress, ""); a != "" {
				live[a] = true
			}
			if fe.Properties.PublicIPAddress != nil {
				pipIDs[strings.ToLower(ptr.Deref(fe.Properties.PublicIPAddress.ID, ""))] = true
			}
		}
	}
	if err := p.livePublicIPAddresses(ctx, pipIDs, live); err != nil {
		return nil, err
	}
	nodes, err := p.nodes.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	for _, ips := range p.nodeAddrs.addresses(nodes) {
		for _, a := range ips {
			live[a] = true
		}
	}
	return live, nil
}

// livePublicIPAddresses adds the addresses of the public IPs (lower-cased
// ids) to live: one listing per resource group they are in (the cluster's
// first; others through azure-load-balancer-resource-group). A public IP
// found in none is an error: collecting without its address could take a
// live Service's address out of the NSG.
func (p *Provider) livePublicIPAddresses(ctx context.Context, pipIDs, live map[string]bool) error {
	groups := []string{p.cfg.ResourceGroup}
	for id := range pipIDs {
		if rg, _, err := names.ParseID(id); err == nil && !slices.ContainsFunc(groups, func(g string) bool { return strings.EqualFold(g, rg) }) {
			groups = append(groups, rg)
		}
	}
	slices.Sort(groups[1:])
	for _, rg := range groups {
		if len(pipIDs) == 0 {
			break
		}
		pips, err := p.publicIPs(ctx).List(ctx, rg)
		if err != nil {
			return fmt.Errorf("list public IPs in %s: %w", rg, err)
		}
		for _, pip := range pips {
			id := strings.ToLower(ptr.Deref(pip.ID, ""))
			if pipIDs[id] {
				delete(pipIDs, id)
				if a := pipAddress(pip); a != "" {
					live[a] = true
				}
			}
		}
	}
	if len(pipIDs) > 0 {
		return fmt.Errorf("collect security rules: %d public IPs of frontends were not found in their resource groups; not collecting", len(pipIDs))
	}
	return nil
}

// collectNodePorts makes the collection also take node ports no Service
// has any more (ports changed or Service deleted while no controller ran)
// off the nodes' addresses. Every Service counts, of any class: a node
// port another implementation's Service has is not azlb's to close.
func (p *Provider) collectNodePorts(edit *securitygroup.Edit) error {
	if p.services == nil {
		return nil
	}
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return err
	}
	ports := map[[2]string]bool{}
	for _, s := range svcs {
		for _, sp := range s.Spec.Ports {
			if sp.NodePort != 0 {
				ports[[2]string{accesscontrol.RuleProtocol(sp.Protocol), accesscontrol.PortString(sp.NodePort)}] = true
			}
		}
	}
	edit.LiveNodePort = func(protocol, port string) bool { return ports[[2]string{protocol, port}] }
	for _, ips := range p.knownNodeAddresses(nil) {
		edit.Release.NodeAddresses = append(edit.Release.NodeAddresses, ips...)
	}
	return nil
}

// collectable is live, unless azlb serves a load-balancer class
// (SetLoadBalancerClass): then the default implementation may write the
// same rules into this NSG (on AKS, AKS's cloud controller manager does),
// an address on no load balancer of azlb's may be one of its Services',
// and no address is collected, only node ports.
func (p *Provider) collectable(live func(string) bool) func(string) bool {
	if p.class.IsDefault() {
		return live
	}
	return func(string) bool { return true }
}

// releaseSecurityRules takes the Service out of every rule (delete): its
// frontend addresses, those it last reported, and its node ports.
func (p *Provider) releaseSecurityRules(ctx context.Context, svc *v1.Service) error {
	if p.sg == nil {
		return nil
	}
	fs, err := p.serviceFrontends(ctx, names.FrontendBase(svc))
	if err != nil {
		return err
	}
	released, err := p.frontendSetAddresses(ctx, fs, nil)
	if err != nil {
		return err
	}
	var nodes []*v1.Node
	if p.nodes != nil {
		all, err := p.nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		nodes = all
	}
	return p.finishSecurityRules(ctx, svc, nil, p.beginSecurityRules(ctx, svc, nil, nil, nil, nodes, released...))
}

// leavingAddresses are the addresses among released (those of the
// Service's frontends now) that it will not hold after this reconcile:
// not a public IP it keeps (ingress), not the private address a frontend
// asks for or keeps, not the address of a dynamic internal frontend that
// stays where it is.
func leavingAddresses(svc *v1.Service, lbName string, released []string, inputs []frontendInput, ingress map[v1.IPFamily]string, previous serviceFrontendSet) []string {
	kept := map[string]bool{}
	keep := func(a string) {
		if ip, err := netip.ParseAddr(a); err == nil {
			kept[ip.String()] = true
		}
	}
	for _, a := range ingress {
		keep(a)
	}
	for _, in := range inputs {
		keep(in.privateIP)
		keep(in.keepIP)
		if in.subnetID == "" || in.privateIP != "" {
			continue
		}
		for _, f := range previous {
			if strings.EqualFold(f.lb, lbName) && strings.EqualFold(ptr.Deref(f.fe.Name, ""), names.Frontend(svc, in.family)) && f.fe.Properties != nil {
				keep(ptr.Deref(f.fe.Properties.PrivateIPAddress, ""))
			}
		}
	}
	var out []string
	for _, a := range released {
		if ip, err := netip.ParseAddr(a); err == nil && !kept[ip.String()] {
			out = append(out, ip.String())
		}
	}
	return out
}

// releaseAddresses takes addresses the Service leaves out of every rule,
// and nothing else.
func (p *Provider) releaseAddresses(ctx context.Context, svc *v1.Service, addrs []string) error {
	edit := securitygroup.Edit{Service: names.ServiceKey(svc), Release: securitygroup.Release{Addresses: addrs}}
	p.addCoTenantGrants(ctx, svc, &edit)
	res, err := p.sg.Update(ctx, edit)
	if err != nil {
		return fmt.Errorf("release the addresses the Service leaves (%s) from the network security group: %w", strings.Join(addrs, ", "), err)
	}
	if res.Changed && res.Written {
		rg, name := p.sg.Name()
		p.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonSecurityRulesUpdated, "Network security group %s/%s: released the addresses the Service leaves (%s)", rg, name, strings.Join(addrs, ", "))
	}
	return nil
}

// knownFrontendAddresses are the Service's frontend addresses when all are
// known before the load balancer write: public IPs, or private addresses
// the Service asks for.
func knownFrontendAddresses(spec *annotations.ServiceSpec, inputs []frontendInput, ingress map[v1.IPFamily]string) (map[v1.IPFamily]string, bool) {
	out := map[v1.IPFamily]string{}
	for _, in := range inputs {
		a := ingress[in.family]
		if spec.Internal {
			a = in.privateIP
		}
		if a == "" {
			return nil, false
		}
		out[in.family] = a
	}
	return out, true
}

// knownNodeAddresses are the addresses of the nodes passed in, of the node
// lister, and of every node seen since the start: a node deleted since
// still has its grants (found by the chaos suite), and a Service's node
// ports must leave it too. Shared: read only.
func (p *Provider) knownNodeAddresses(nodes []*v1.Node) map[v1.IPFamily][]string {
	var listed []*v1.Node
	if p.nodes != nil {
		listed, _ = p.nodes.List(labels.Everything())
	}
	return p.nodeAddrs.known(listed, nodes)
}
