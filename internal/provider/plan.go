package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
	"github.com/azlb/azlb/internal/securitygroup"
)

// A Service reconcile is one plan: everything the Service will own in
// Azure (public IPs, frontends, rules, probes, pools, security rules, its
// Private Link Service) is computed and checked from reads first (plan),
// and only a plan that passes is written (apply). A Service the plan
// refuses gets one Warning event naming the field and value, and nothing
// of its change is written: no new Azure object, no rule. A Service
// already served keeps what it has, except that its security rules narrow
// at once to what its new settings allow (failing closed on an invalid
// one, refused).

// Refusal is a Service azlb does not serve as its spec asks: the plan
// found a setting it cannot honour before anything was written.
type Refusal struct {
	// Reason is the Warning event's reason.
	Reason string
	// Message is the event's message: it names the field and value.
	Message string
	// Err is the underlying error.
	Err error
}

func (r *Refusal) Error() string { return r.Err.Error() }
func (r *Refusal) Unwrap() error { return r.Err }

// refuse makes err a refusal whose event message is err's text.
func refuse(reason string, err error) error {
	return &Refusal{Reason: reason, Message: err.Error(), Err: err}
}

// refusef makes err a refusal with its own event message.
func refusef(reason string, err error, format string, args ...any) error {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...), Err: err}
}

// IsRefusal reports whether err refused a Service: nothing of its change
// was written, and retrying changes nothing until the Service or Azure
// changes.
func IsRefusal(err error) bool {
	var r *Refusal
	return errors.As(err, &r)
}

// servicePlan is one Service reconcile: what it will write, decided from
// reads only.
type servicePlan struct {
	svc      *v1.Service
	spec     *annotations.ServiceSpec
	families []v1.IPFamily
	access   *accesscontrol.Access
	// notes are the Warning events of settings that fail closed (invalid
	// source ranges, say): recorded when the plan is written.
	notes []func()
	// previous are the Service's frontends now, on any managed load
	// balancer (nil until read).
	previous serviceFrontendSet
	read     bool // previous was read

	lbName, configName string
	// inputs are the frontend targets, one per family; the public IPs to
	// create have their id but no address yet.
	inputs []frontendInput
	// pips are the public IPs of the inputs (public Services), in the
	// same order.
	pips    []*publicIPPlan
	sharing bool
	// frontendIDs are the frontends the inputs use (their own, or shared).
	frontendIDs []string

	unlock []func()
}

// release lets go of the plan's locks and placement reservation.
func (pl *servicePlan) release() {
	for i := len(pl.unlock) - 1; i >= 0; i-- {
		pl.unlock[i]()
	}
	pl.unlock = nil
}

// reconcile is the full EnsureLoadBalancer path: a plan, checked, then
// written.
//
// fresh makes the load balancer write compare with what Azure holds now
// (EnsureLoadBalancer: the Service changed); the drift pass, whose copies
// were just read, passes false.
func (p *Provider) reconcile(ctx context.Context, caller string, svc *v1.Service, nodes []*v1.Node, fresh bool) (*v1.LoadBalancerStatus, error) {
	if err := p.ensureStarted(ctx); err != nil {
		return nil, err
	}
	pl, err := p.plan(ctx, svc, nodes)
	defer pl.release()
	var r *Refusal
	if errors.As(err, &r) {
		return nil, p.refused(ctx, pl, r, nodes)
	}
	if err != nil {
		return nil, err
	}
	p.refusals.ShouldReport(svc, nil) // served: a later refusal is news
	return p.apply(ctx, caller, pl, nodes, fresh)
}

// plan computes and checks everything the Service's reconcile will write,
// in this order: annotations and node ports, protocols, access settings,
// placement, public IPs (read: a missing one it names, a prefix it cannot
// use), shared IPs, the load balancer (rule limit), the network security
// group (Azure's limits) and the Private Link Service (its settings, the
// NAT subnet read). Any of them failing is a *Refusal (other errors are
// reads that failed). It writes nothing. The plan returned is never nil:
// release it.
func (p *Provider) plan(ctx context.Context, svc *v1.Service, nodes []*v1.Node) (*servicePlan, error) {
	pl := &servicePlan{svc: svc}
	spec, families, notes, err := p.serviceSpec(logger(ctx).WithValues("service", names.ServiceKey(svc)), svc)
	if err != nil {
		return pl, err
	}
	pl.spec, pl.families = spec, families
	if err := checkProtocols(svc, spec); err != nil {
		return pl, err
	}
	access, accessNotes, err := p.accessOf(svc, spec, families)
	if err != nil {
		return pl, err
	}
	pl.access, pl.notes = access, append(notes, accessNotes...)
	if pl.previous, err = p.serviceFrontends(ctx, names.FrontendBase(svc)); err != nil {
		return pl, err
	}
	pl.read = true
	// Services sharing an IP are planned and written one after another,
	// placement included (sharedip.go).
	pl.unlock = append(pl.unlock, p.lockAddresses(p.addressKeys(svc, spec, families, pl.previous)))
	lbName, configName, placed, err := p.chooseLB(ctx, svc, spec, families)
	if err != nil {
		return pl, err
	}
	pl.unlock = append(pl.unlock, placed)
	pl.lbName, pl.configName = lbName, configName
	if err := p.planFrontends(ctx, pl); err != nil {
		return pl, err
	}
	// A shared IP whose ports overlap another Service's.
	if pl.sharing, err = p.precheckSharedIP(ctx, svc, spec, lbName, pl.inputs); err != nil {
		return pl, err
	}
	frontendIDs, err := p.checkLoadBalancer(ctx, pl)
	if err != nil {
		return pl, err
	}
	pl.frontendIDs = frontendIDs
	if err := p.checkSecurityRules(ctx, pl, nodes); err != nil {
		return pl, err
	}
	if err := p.checkPrivateLink(ctx, pl, frontendIDs); err != nil {
		return pl, err
	}
	return pl, nil
}

// checkProtocols refuses a port whose protocol Azure Load Balancer rules
// do not carry (TCP and UDP; an HA ports rule carries every protocol).
func checkProtocols(svc *v1.Service, spec *annotations.ServiceSpec) error {
	if spec.HAPorts {
		return nil
	}
	for i, port := range svc.Spec.Ports {
		if spec.Port(port.Port).NoLBRule {
			continue
		}
		if _, err := transportProtocol(port.Protocol); err != nil {
			err = fmt.Errorf("service %s: spec.ports[%d] (port %d): %w", names.ServiceKey(svc), i, port.Port, err)
			return refusef(EventReasonUnsupportedProtocol, err,
				"spec.ports[%d].protocol %s (port %d) is not supported by Azure Load Balancer rules (TCP or UDP); nothing is written for the Service", i, port.Protocol, port.Port)
		}
	}
	return nil
}

// planFrontends computes the frontend targets, one per family: the public
// IP (read: an existing one, or the one to create) or the internal subnet
// and address.
func (p *Provider) planFrontends(ctx context.Context, pl *servicePlan) error {
	svc, spec := pl.svc, pl.spec
	for _, fam := range pl.families {
		in := frontendInput{family: fam}
		if !spec.Internal {
			pip, err := p.resolvePublicIP(ctx, svc, spec, fam)
			if err != nil {
				return err
			}
			if err := p.planReplacement(ctx, pl, pip); err != nil {
				return err
			}
			in.publicIPID, in.address = pip.id(p.cfg.SubscriptionID), pip.address()
			pl.pips = append(pl.pips, pip)
			pl.inputs = append(pl.inputs, in)
			continue
		}
		subnet := spec.InternalSubnet
		if subnet == "" {
			subnet = p.cfg.SubnetName
		}
		if subnet == "" || p.cfg.VnetName == "" {
			err := fmt.Errorf("service %s: an internal load balancer needs vnetName and subnetName in azure.json or the %s annotation", names.ServiceKey(svc), annotations.KeyInternalSubnet)
			return refuse(EventReasonInvalidAnnotation, err)
		}
		in.subnetID = p.subnetID(subnet)
		zones, err := p.regionZones(ctx)
		if err != nil {
			return err
		}
		in.zones = zones
		in.privateIP = requestedAddress(svc, spec, fam)
		in.requested, in.address = in.privateIP != "", in.privateIP
		if in.privateIP == "" {
			in.privateIP = pl.previous.movingPrivateIP(pl.lbName, names.Frontend(svc, fam), in.subnetID)
		}
		if in.privateIP == "" {
			keep, err := p.statusPrivateIP(ctx, svc, pl.lbName, fam, in.subnetID)
			if err != nil {
				return err
			}
			in.keepIP = keep
		}
		pl.inputs = append(pl.inputs, in)
	}
	return nil
}

// checkLoadBalancer computes the Service's frontends, rules and probes on
// the cached copy of its load balancer, as the write will: a port another
// Service has on a shared frontend, or more rules than
// maximumLoadBalancerRuleCount, refuses it. It returns each input's
// frontend id (its own, or the shared one).
func (p *Provider) checkLoadBalancer(ctx context.Context, pl *servicePlan) ([]string, error) {
	lb, err := p.store.Get(ctx, pl.lbName)
	if err != nil {
		return nil, err
	}
	_, ids, err := p.serviceStates(lb, pl.svc, pl.spec, pl.lbName, pl.inputs, pl.families, p.liveBases())
	var rl *RuleLimitError
	var ce *SharedIPConflictError
	switch {
	case errors.As(err, &rl):
		return nil, refuse(EventReasonRuleLimitExceeded, err)
	case errors.As(err, &ce):
		return nil, refusef(EventReasonSharedIPPortConflict, err, "%v; nothing is written for the Service", err)
	case err != nil:
		return nil, refuse(EventReasonInvalidAnnotation, err)
	}
	return ids, nil
}

// Addresses that stand in, in checkSecurityRules, for a frontend address
// Azure has not given yet (a public IP to create, a dynamic private
// address): documentation ranges, never a frontend's.
const (
	placeholderIPv4 = "192.0.2.1"
	placeholderIPv6 = "2001:db8::1"
)

// checkSecurityRules checks the Service's security rules against the
// network security group as the writer last saw it: a change over Azure's
// limits is refused (SecurityRuleLimitExceeded), and so is a Service that
// needs rules in a group that does not exist (SecurityGroupNotFound).
func (p *Provider) checkSecurityRules(ctx context.Context, pl *servicePlan, nodes []*v1.Node) error {
	if p.sg == nil || pl.access == nil || !pl.access.NeedsRules() {
		return nil
	}
	frontends := map[v1.IPFamily]string{}
	for i, in := range pl.inputs {
		a := in.address
		switch {
		case a == "" && in.subnetID != "":
			a = cmpOr(in.privateIP, in.keepIP)
		case a == "" && i < len(pl.pips) && pl.pips[i].existing != nil:
			a = pipAddress(pl.pips[i].existing)
		}
		if a == "" {
			a = placeholderIPv4
			if in.family == v1.IPv6Protocol {
				a = placeholderIPv6
			}
		}
		frontends[in.family] = a
	}
	// The Service's addresses now leave its rules first (as the write
	// releases them), so a change of its sources is not counted twice.
	var released []string
	for _, f := range pl.previous {
		if a := p.frontendAddress(f.fe); a != "" {
			released = append(released, a)
		}
	}
	edit := p.securityEdit(ctx, pl.svc, pl.spec, pl.access, frontends, nodes, released)
	err := p.sg.Check(ctx, edit)
	var le *securitygroup.LimitError
	var nf *securitygroup.NotFoundError
	switch {
	case errors.As(err, &le):
		return refusef(EventReasonSecurityRuleLimitExceeded, err, "%v; nothing of this Service's change was written", err)
	case errors.As(err, &nf):
		return refuse(EventReasonSecurityGroupNotFound, err)
	}
	return err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkPrivateLink vets the Service's Private Link Service settings on the
// frontend it will have (its IPv4 one, or the IPv6 one of an IPv6-only
// Service), reading the resource group's Private Link Services and the NAT
// subnet: every setting the Private Link Service writer would refuse is a
// refusal here, before anything is written (docs/private-link.md).
func (p *Provider) checkPrivateLink(ctx context.Context, pl *servicePlan, frontendIDs []string) error {
	if p.pls == nil {
		return nil
	}
	fe := privatelink.Frontend{Location: p.cfg.Location, Internal: pl.spec.Internal, FloatingIP: pl.spec.EnableFloatingIP}
	// Its frontends on other load balancers leave first (a move), their
	// Private Link Services with them: their names are free.
	for _, f := range pl.previous {
		if !strings.EqualFold(f.lb, pl.lbName) && f.fe.ID != nil {
			fe.Leaving = append(fe.Leaving, *f.fe.ID)
		}
	}
	for i, in := range pl.inputs {
		switch {
		case in.family == v1.IPv4Protocol:
			fe.ID = frontendIDs[i]
		case fe.ID == "" && len(pl.inputs) == 1:
			fe.ID, fe.IPv6Only = frontendIDs[i], true
		}
	}
	err := p.pls.m.Check(ctx, pl.svc, fe)
	if ae := (*annotations.Error)(nil); errors.As(err, &ae) {
		return refuse(privatelink.EventReasonInvalid, err)
	}
	return err
}

// refused handles a Service the plan refused: one Warning event (not
// repeated for the same generation and message, nor by the drift pass),
// nothing of the change written. A Service that has no frontend gets
// anything azlb left of it before collected (a public IP it created); one
// already served keeps what it has, its security rules narrowed to what
// its settings allow now (narrowSecurityRules). The refusal is returned.
func (p *Provider) refused(ctx context.Context, pl *servicePlan, r *Refusal, nodes []*v1.Node) error {
	svc := pl.svc
	if _, repairing := ctx.Value(repairLogKey{}).(*repairLog); !repairing && p.refusals.ShouldReport(svc, []string{r.Reason, r.Message}) {
		p.warn(svc, r.Reason, "%s", r.Message)
	}
	logger(ctx).V(2).Info("Service refused: nothing of its change is written", "service", names.ServiceKey(svc), "reason", r.Reason, "err", r.Err)
	previous := pl.previous
	if !pl.read {
		var err error
		if previous, err = p.serviceFrontends(ctx, names.FrontendBase(svc)); err != nil {
			return err
		}
	}
	if len(previous) == 0 {
		if err := p.deleteOwnedPublicIPs(ctx, svc); err != nil {
			return err
		}
		return r
	}
	if err := p.narrowSecurityRules(ctx, svc, previous, nodes); err != nil {
		return err
	}
	return r
}

// narrowSecurityRules brings the security rules of a served Service whose
// change was refused within what its access settings allow now: its
// addresses (and, floating IP off, its node ports on the nodes) stay in
// the rules whose sources those settings allow and leave the others, so a
// refused change never keeps a Service open to sources its spec no longer
// allows. Settings that are invalid (or refused themselves) allow nothing
// and fail closed: a deny-all after the allows covers the Service's
// frontend addresses. Nothing is added: the refused change does not open
// anything.
func (p *Provider) narrowSecurityRules(ctx context.Context, svc *v1.Service, previous serviceFrontendSet, nodes []*v1.Node) error {
	if p.sg == nil {
		return nil
	}
	released, err := p.frontendSetAddresses(ctx, previous, nil)
	if err != nil {
		return err
	}
	// The access settings are read on their own: an invalid annotation
	// elsewhere does not make them invalid.
	internal := names.IsInternalLB(previous[0].lb)
	floating := !strings.EqualFold(strings.TrimSpace(svc.Annotations[annotations.KeyDisableFloatingIP]), "true")
	acc, aerr := accesscontrol.Parse(svc, internal, floating)
	known := p.knownNodeAddresses(nodes)
	// The extra addresses it had (azure-additional-public-ips) and still
	// lists are narrowed like its frontend addresses, those it no longer
	// lists leave: nothing is added.
	keep, drop := p.refusedExtras(svc, known)
	released = append(released, keep...)
	edit := securitygroup.Edit{Service: names.ServiceKey(svc), Release: p.releaseOf(svc, nil, known, released), Drop: drop,
		Narrow: func(fam securitygroup.Family, _ string, sources []string) bool {
			return aerr == nil && !acc.Disabled && acc.Covers(ipFamilyOf(fam), sources)
		}}
	if (aerr != nil || acc.DenyAll) && floating {
		byFam := map[securitygroup.Family][]string{}
		for _, a := range released {
			byFam[securitygroup.FamilyOf(a)] = append(byFam[securitygroup.FamilyOf(a)], a)
		}
		for fam, dsts := range byFam {
			edit.Deny = append(edit.Deny, securitygroup.Deny{Family: fam, Destinations: dsts})
		}
	}
	p.addCoTenantGrants(ctx, svc, &edit)
	p.addExtraCoTenantGrants(svc, &edit, append(keep, drop...))
	res, err := p.sg.Update(ctx, edit)
	if err != nil {
		return fmt.Errorf("narrow the security rules of the refused Service: %w", err)
	}
	p.extras.set(names.ServiceKey(svc), keep)
	if res.Changed && res.Written {
		rg, name := p.sg.Name()
		noteRepair(ctx, RepairSecurityGroup, "network security group %s/%s (the rules of a refused Service, narrowed)", rg, name)
		what := "its settings are invalid: nobody may connect (fail closed)"
		if aerr == nil {
			what = "allowed sources: " + acc.Describe()
		}
		p.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonSecurityRulesUpdated,
			"Network security group %s/%s: the Service's change is refused, and its rules are narrowed to what its settings allow now (%s)", rg, name, what)
	}
	return nil
}

func ipFamilyOf(f securitygroup.Family) v1.IPFamily {
	if f == securitygroup.IPv6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

// publicIPPlan is the public IP of one frontend: an existing one (written
// only to bring an owned one's tags in line, or to upgrade a Basic one),
// or one to create.
type publicIPPlan struct {
	family   v1.IPFamily
	rg, name string
	existing *armnetwork.PublicIPAddress
	// prefix of the public IP to create (azure-pip-prefix-id(-ipv6)).
	prefix *armnetwork.PublicIPPrefix
	// replace is the setting (annotation=value) for which the existing
	// public IP is replaced by a new one (planReplacement); keep says why an
	// owned one that does not meet such a setting is kept.
	replace, keep string
}

func (pp *publicIPPlan) id(subscription string) string {
	if pp.existing != nil && pp.existing.ID != nil {
		return *pp.existing.ID
	}
	return publicIPID(subscription, pp.rg, pp.name)
}

func (pp *publicIPPlan) address() string { return pipAddress(pp.existing) }

// publicIPID is the ARM id of a public IP.
func publicIPID(subscription, rg, name string) string {
	return "/subscriptions/" + subscription + "/resourceGroups/" + rg + "/providers/Microsoft.Network/publicIPAddresses/" + name
}

// apply writes a plan: the public IPs, the security rules (queued as soon
// as the frontend addresses are known, so that they overlap the load
// balancer write), the load balancer, the pools and the Private Link
// Service, in that order.
func (p *Provider) apply(ctx context.Context, caller string, pl *servicePlan, nodes []*v1.Node, fresh bool) (*v1.LoadBalancerStatus, error) {
	svc, spec, acc, families, lbName := pl.svc, pl.spec, pl.access, pl.families, pl.lbName
	for _, note := range pl.notes {
		note()
	}
	base := names.FrontendBase(svc)
	ingress, keepPIPs, err := p.ensurePublicIPs(ctx, caller, pl)
	if err != nil {
		return nil, err
	}
	inputs, previous := pl.inputs, pl.previous
	sg, err := p.startSecurityRules(ctx, svc, spec, acc, lbName, nodes, inputs, ingress, keepPIPs, previous, !pl.sharing)
	if err != nil {
		return nil, err
	}

	// A frontend of a family the Service no longer has goes with this
	// write: its Private Link Service goes first (Azure refuses to remove
	// a frontend one uses).
	cached, err := p.store.Get(ctx, lbName)
	if err != nil {
		return nil, err
	}
	liveBase := p.liveBases()
	leaving := append(droppedFrontendIDs(cached, base, svc, families),
		orphanedFrontendIDs(cached, base, pl.frontendIDs, func(b string) bool { return liveBase(b) != nil })...)
	if err := p.releasePrivateLinks(ctx, p.pls, svc, leaving); err != nil {
		return nil, err
	}
	var orphans []*armnetwork.FrontendIPConfiguration
	changed := false
	mutate := p.serviceMutation(svc, spec, lbName, inputs, families, &orphans, &changed)
	// A Service that moves (another load balancer, or public <-> internal)
	// leaves its old load balancer first: its public IP or static private IP
	// can be referenced by one frontend only.
	if err := p.removeFromLBs(ctx, caller, svc, lbName); err != nil {
		return nil, err
	}
	// The Service changed (or its last reconcile failed): compare with what
	// Azure holds now, not with the cache, so an out-of-band change is
	// repaired rather than reported as success.
	lb, err := p.store.UpdateLB(ctx, caller, lbName, lbstoreUpdate(fresh), mutate)
	if err != nil {
		// What the plan checked on the cached copy can still fail on what
		// Azure holds (another Service took the ports meanwhile).
		var rl *RuleLimitError
		if errors.As(err, &rl) {
			p.warn(svc, EventReasonRuleLimitExceeded, "%v", err)
		}
		var ce *SharedIPConflictError
		if errors.As(err, &ce) {
			p.warn(svc, EventReasonSharedIPPortConflict, "%v; nothing is written for the Service", err)
			// Its rules may have gone out early (before another Service
			// took the IP): they leave again, the others' stay.
			if sg.pending != nil {
				if _, werr := sg.pending.Wait(); werr == nil {
					err = errors.Join(err, p.releaseAddresses(ctx, svc, frontendAddressesOf(inputs)))
				}
			}
		}
		return nil, err
	}
	if changed {
		noteRepair(ctx, RepairLoadBalancer, "load balancer %s (the Service's frontends, rules or probes)", lbName)
	}
	if err := p.deleteOrphanedFrontendIPs(ctx, svc, orphans); err != nil {
		return nil, err
	}
	if pl.configName != "" {
		p.state.MoveService(base, pl.configName)
	}

	// Public IPs it no longer uses (public -> internal, a family dropped)
	// are deleted once no frontend references them.
	if err := p.deleteOrphanedPublicIPs(ctx, svc, previous.publicIPs(), keepPIPs); err != nil {
		return nil, err
	}
	if spec.Internal {
		// An internal Service uses no public IP: one azlb created for it is
		// left by a move public -> internal interrupted after the frontends
		// moved (a crash, a lost lease; found by the chaos suite).
		if err := p.deleteOwnedPublicIPs(ctx, svc); err != nil {
			return nil, err
		}
	}
	if err := p.reconcileServicePools(ctx, caller, lbName, svc, nodes, families); err != nil {
		return nil, err
	}
	// Its Private Link Service (azure-pls-*, docs/private-link.md), once
	// the frontend it serves is written.
	if err := p.ensurePrivateLink(ctx, p.pls, svc, spec, lb); err != nil {
		return nil, err
	}
	if spec.Internal {
		for _, fam := range families {
			if fe := serviceFrontend(lb, svc, fam); fe != nil && fe.Properties != nil {
				ingress[fam] = ptr.Deref(fe.Properties.PrivateIPAddress, "")
			}
		}
	}
	if err := sg.finish(ctx, p, svc, spec, acc, ingress, nodes); err != nil {
		return nil, err
	}
	return ingressStatus(families, ingress), nil
}
