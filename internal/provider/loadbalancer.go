package provider

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/placement"
	"github.com/azlb/azlb/internal/securitygroup"
)

var _ cloudprovider.LoadBalancer = (*Provider)(nil)

// Callers, as they appear in the lock-wait metric.
const (
	callerEnsure  = "EnsureLoadBalancer"
	callerUpdate  = "UpdateLoadBalancer"
	callerDeleted = "EnsureLoadBalancerDeleted"
	callerLabels  = "SyncClusterPools"
)

// GetLoadBalancerName returns the name every frontend, rule and probe of the
// Service starts with.
func (p *Provider) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return names.FrontendBase(svc)
}

// GetLoadBalancer reports the Service's ingress addresses, if any managed
// load balancer has a frontend for it. Without a frontend it still reports
// one (with no address) while a public IP azlb created for the Service
// remains, so that an interrupted delete is finished.
func (p *Provider) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	lbName, lb, err := p.findServiceLB(ctx, svc)
	if err != nil {
		return nil, false, err
	}
	if lb == nil {
		left, err := p.ownedPublicIPLeft(ctx, svc)
		if err != nil || !left {
			return nil, false, err
		}
		return &v1.LoadBalancerStatus{}, true, nil
	}
	status, err := p.statusOf(ctx, svc, lbName, lb)
	if err != nil {
		return nil, true, err
	}
	return status, true, nil
}

// EnsureLoadBalancer creates or updates the Service's frontends, rules and
// probes, and the cluster backend pools of its load balancer.
func (p *Provider) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	defer p.perService.Lock(string(svc.UID))()
	st, err := p.reconcile(ctx, callerEnsure, svc, nodes, true)
	return st, p.retryAfterThrottle(err)
}

// UpdateLoadBalancer brings the cluster backend pools of the Service's load
// balancer in line with the nodes. It writes nothing when they already match,
// and nothing for a Service no load balancer serves: only EnsureLoadBalancer
// builds one, which the service controller calls after it has put its cleanup
// finalizer on the Service. The node sync calls UpdateLoadBalancer with the
// Services it listed when its pass began; building one here could serve a
// Service deleted meanwhile, or one deleted before it got the finalizer, and
// nothing would ever remove it (found by the chaos suite, test/chaos).
func (p *Provider) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) error {
	defer p.perService.Lock(string(svc.UID))()
	return p.retryAfterThrottle(p.update(ctx, svc, nodes))
}

func (p *Provider) update(ctx context.Context, svc *v1.Service, nodes []*v1.Node) error {
	lbName, lb, err := p.findServiceLB(ctx, svc)
	if err != nil {
		return err
	}
	if lb == nil {
		logger(ctx).V(2).Info("No load balancer serves the Service: nothing to update", "service", names.ServiceKey(svc))
		return nil
	}
	if err := p.reconcileServicePools(ctx, callerUpdate, lbName, svc, nodes, serviceFamilies(svc)); err != nil {
		return err
	}
	return p.updateNodeSecurityRules(ctx, svc, lb, nodes)
}

// updateNodeSecurityRules follows the nodes in the rules of a Service with
// floating IP off (their destinations are the nodes' addresses). Services
// whose settings are invalid are left to EnsureLoadBalancer, which refuses
// them: what they have stays as it is.
func (p *Provider) updateNodeSecurityRules(ctx context.Context, svc *v1.Service, lb *armnetwork.LoadBalancer, nodes []*v1.Node) error {
	if p.sg == nil {
		return nil
	}
	spec, err := annotations.Parse(svc)
	if err != nil || spec.EnableFloatingIP || checkProtocols(svc, spec) != nil || p.privateLinkSpecInvalid(svc) {
		return nil
	}
	acc, err := accesscontrol.Parse(svc, spec.Internal, spec.EnableFloatingIP)
	if err != nil {
		return nil
	}
	current, err := p.serviceFrontends(ctx, names.FrontendBase(svc))
	if err != nil {
		return err
	}
	defer p.lockAddresses(p.addressKeys(svc, nil, nil, current))()
	frontends, err := p.frontendAddresses(ctx, svc, lb)
	if err != nil {
		return err
	}
	return p.ensureSecurityRules(ctx, svc, spec, acc, frontends, nodes)
}

// servicePoolNames are the pools the Service's rules send traffic to: its
// dedicated pools for a Local Service in multiple-SLB mode, otherwise the
// cluster pools.
func (p *Provider) servicePoolNames(svc *v1.Service, families []v1.IPFamily) []string {
	out := make([]string, 0, len(families))
	for _, fam := range families {
		if p.usesLocalPool(svc) {
			out = append(out, names.LocalServicePool(svc.Namespace, svc.Name, fam))
		} else {
			out = append(out, names.ClusterPool(p.clusterName(), fam))
		}
	}
	return out
}

// reconcileServicePools brings the pools the Service uses in line: the
// cluster pools with the load balancer's nodes, or the Service's dedicated
// pools with the nodes running its endpoints.
func (p *Provider) reconcileServicePools(ctx context.Context, caller, lbName string, svc *v1.Service, nodes []*v1.Node, families []v1.IPFamily) error {
	if p.usesLocalPool(svc) {
		return p.reconcileLocalPools(ctx, caller, lbName, svc, p.eligibleNodes(nodes), families)
	}
	return p.reconcilePools(ctx, caller, lbName, nodes, families)
}

// EnsureLoadBalancerDeleted removes the Service's frontends, rules and
// probes from every managed load balancer, deletes a load balancer left
// without frontends, and deletes the public IPs azlb created for the
// Service. It does not depend on the Service's annotations being valid.
func (p *Provider) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	defer p.perService.Lock(string(svc.UID))()
	return p.retryAfterThrottle(p.delete(ctx, svc))
}

func (p *Provider) delete(ctx context.Context, svc *v1.Service) error {
	if err := p.ensureStarted(ctx); err != nil {
		return err
	}
	base := names.FrontendBase(svc)
	current, err := p.serviceFrontends(ctx, base)
	if err != nil {
		return err
	}
	defer p.lockAddresses(p.addressKeys(svc, nil, nil, current))()
	if err := p.releaseSecurityRules(ctx, svc); err != nil {
		return err
	}
	if err := p.removeFromLBs(ctx, callerDeleted, svc, ""); err != nil {
		return err
	}
	if err := p.deleteOwnedPublicIPs(ctx, svc); err != nil {
		return err
	}
	p.state.RemoveService(base)
	p.unsupported.Forget(svc.UID)
	p.unprobedTold.Forget(svc.UID)
	p.affinityTold.Forget(svc.UID)
	p.refusals.Forget(svc.UID)
	p.familyTold.Forget(svc.UID)
	p.tagsTold.Forget(svc.UID)
	p.probesTold.Forget(svc.UID)
	return nil
}

// serviceSpec parses the Service's annotations and checks what its spec
// asks for: an invalid annotation or a rule without its node port refuses
// it (a *Refusal); unsupported annotations and settings Azure cannot apply
// are the notes returned (Warning events once per generation, recorded
// when the plan is written).
func (p *Provider) serviceSpec(log klog.Logger, svc *v1.Service) (*annotations.ServiceSpec, []v1.IPFamily, []func(), error) {
	spec, err := annotations.Parse(svc)
	if err != nil {
		return nil, nil, nil, refusef(EventReasonInvalidAnnotation, err, "Invalid load balancer annotations: %v", err)
	}
	if len(spec.Unsupported) > 0 {
		log.V(2).Info("Ignoring annotations azlb does not interpret", "annotations", spec.Unsupported)
	}
	families := serviceFamilies(svc)
	unprobed, err := p.checkNodePorts(svc, spec, families, strings.EqualFold(p.cfg.ClusterServiceLoadBalancerHealthProbeMode, "shared"))
	if err != nil {
		return nil, nil, nil, err
	}
	notes := []func(){
		func() { p.reportUnsupported(svc, spec.Unsupported) },
		func() { p.reportUnprobed(svc, unprobed) },
		func() { p.checkAffinityTimeout(svc) },
		func() { p.reportDroppedTags(svc, spec.DroppedPIPTags) },
		func() { p.reportIgnoredProbeSettings(svc, spec.IgnoredLocalProbeKeys()) },
	}
	return spec, families, notes, nil
}

// lbstoreUpdate are the options of a Service reconcile's load balancer
// write: created when missing; fresh compares with what Azure holds now.
func lbstoreUpdate(fresh bool) lbstore.UpdateOptions {
	return lbstore.UpdateOptions{Create: true, Fresh: fresh}
}

// serviceMutation is the load balancer mutation of a Service reconcile:
// its frontends, rules and probes as serviceStates computes them, within
// maximumLoadBalancerRuleCount.
//
// orphans receives the frontends of Services gone that the write removed
// (the last user of a shared frontend left it); changed whether the last
// run of the mutation changed the load balancer.
func (p *Provider) serviceMutation(svc *v1.Service, spec *annotations.ServiceSpec, lbName string, inputs []frontendInput, families []v1.IPFamily,
	orphans *[]*armnetwork.FrontendIPConfiguration, changed *bool) lbstore.Mutation {
	base := names.FrontendBase(svc)
	pools := p.servicePoolNames(svc, families)
	liveBase := p.liveBases()
	return func(lb *armnetwork.LoadBalancer) (bool, error) {
		*orphans, *changed = nil, false
		states, _, err := p.serviceStates(lb, svc, spec, lbName, inputs, families, liveBase)
		if err != nil {
			return false, err
		}
		adopt := map[string]string{}
		if p.usesLocalPool(svc) {
			adopt = legacyLocalPools(svc, families)
		}
		ch, removed := applySharedService(lb, base, states, pools, localPoolNames(svc), adopt, func(b string) bool { return liveBase(b) != nil })
		*orphans = removed
		if tags, ok := p.tags.Apply(lb.Tags, nil); ok {
			lb.Tags, ch = tags, true // azure.json tags (config.ResourceTags)
		}
		*changed = ch
		return ch, nil
	}
}

// serviceStates computes the Service's frontends, rules and probes on lb
// as it is (nil: not created yet), one state per input, and each input's
// frontend id (its own, or the shared frontend it uses): a port another
// Service has on a shared frontend is a *SharedIPConflictError, more rules
// than maximumLoadBalancerRuleCount a *RuleLimitError. It changes nothing.
func (p *Provider) serviceStates(lb *armnetwork.LoadBalancer, svc *v1.Service, spec *annotations.ServiceSpec, lbName string, inputs []frontendInput,
	families []v1.IPFamily, liveBase func(string) *v1.Service) ([]*serviceLBState, []string, error) {
	base := names.FrontendBase(svc)
	pools := p.servicePoolNames(svc, families)
	ref := p.lbRef(lbName)
	states := make([]*serviceLBState, 0, len(inputs))
	ids := make([]string, 0, len(inputs))
	newRules := 0
	for i, in := range inputs {
		existing := findFrontend(lb, names.Frontend(svc, in.family))
		if existing == nil && spec.InternalSubnet != "" {
			// The Azure cloud provider's name for it: kept (a
			// takeover writes nothing for it).
			if fe := findFrontend(lb, names.FrontendBase(svc)+"-"+spec.InternalSubnet+names.FamilySuffix(in.family)); fe != nil {
				existing, in.name = fe, feNameOf(fe)
			}
		}
		if existing == nil {
			// Another Service's frontend with the same address: the
			// Service shares it (sharedip.go).
			if fe := sharedFrontendFor(lb, base, in, in.requestedPrivateIP()); fe != nil {
				in.sharedID = ptr.Deref(fe.ID, ref.Child("frontendIPConfigurations", feNameOf(fe)))
			}
		}
		if in.privateIP == "" && in.keepIP != "" && existing == nil && in.sharedID == "" {
			in.privateIP = in.keepIP // a new frontend takes the address the Service had
		}
		if existing != nil {
			in.zones = existing.Zones // zones are set at creation only (zones.go)
		}
		st, err := buildServiceLBState(desiredInput{
			svc: svc, spec: spec, lb: ref, frontend: in, poolName: pools[i],
			sharedProbe:         strings.EqualFold(p.cfg.ClusterServiceLoadBalancerHealthProbeMode, "shared"),
			sharedProbePort:     p.cfg.ClusterServiceSharedLoadBalancerHealthProbePort,
			sharedProbePath:     p.cfg.ClusterServiceSharedLoadBalancerHealthProbePath,
			disableOutboundSNAT: ptr.Deref(p.cfg.DisableOutboundSNAT, false),
		})
		if err != nil {
			return nil, nil, err
		}
		feID := in.sharedID
		if feID == "" {
			feID = ref.Child("frontendIPConfigurations", cmp.Or(in.name, names.Frontend(svc, in.family)))
		}
		if other, mine := sharedPortConflict(lb, base, feID, st.rules); other != nil {
			return nil, nil, &SharedIPConflictError{
				Service: names.ServiceKey(svc), Other: serviceNameOfBase(liveBase, names.ServiceBaseOf(ruleNameOf(other))), Address: in.address,
				Protocol: string(ptr.Deref(mine.Properties.Protocol, "")), Port: ptr.Deref(mine.Properties.FrontendPort, 0),
			}
		}
		newRules += len(st.rules)
		states = append(states, st)
		ids = append(ids, feID)
	}
	if maxRules := p.cfg.MaximumLoadBalancerRuleCount; maxRules > 0 {
		if total := ruleCount(lb) - ownedRuleCount(lb, base) + newRules; total > maxRules {
			return nil, nil, &RuleLimitError{LoadBalancer: lbName, Service: names.ServiceKey(svc), Rules: total, Limit: maxRules}
		}
	}
	return states, ids, nil
}

// reconcileSecurity is a Service reconcile's NSG change in flight.
type reconcileSecurity struct {
	pending  *securitygroup.Pending // queued early (nil: not yet)
	done     bool                   // already written (the Service left addresses)
	released []string
}

// startSecurityRules starts a Service reconcile's NSG change. It goes out
// at once when every frontend address is known (public IPs, static
// private ones), so its write overlaps the load balancer's. It releases
// the addresses of the frontends the Service has now and leaves (public ->
// internal, another IP), which its status may not show (a crash before the
// status was written); those it leaves are out of the NSG before its
// frontends move: once a frontend has moved and its public IP is deleted
// nothing remembers them, should the reconcile fail after that.
//
// early false (a shared IP: the write waits until the load balancer has
// taken the Service's ports) keeps the write for finish.
func (p *Provider) startSecurityRules(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, acc *accesscontrol.Access, lbName string,
	nodes []*v1.Node, inputs []frontendInput, ingress map[v1.IPFamily]string, keepPIPs map[string]bool, previous serviceFrontendSet, early bool) (*reconcileSecurity, error) {
	released, err := p.frontendSetAddresses(ctx, previous, keepPIPs)
	if err != nil {
		return nil, err
	}
	sg := &reconcileSecurity{released: released}
	if known, ok := knownFrontendAddresses(spec, inputs, ingress); ok && early {
		sg.pending = p.beginSecurityRules(ctx, svc, spec, acc, known, nodes, released...)
	}
	leaving := leavingAddresses(svc, lbName, released, inputs, ingress, previous)
	switch {
	case len(leaving) == 0:
	case sg.pending != nil:
		if err := p.finishSecurityRules(ctx, svc, acc, sg.pending); err != nil {
			return nil, err
		}
		sg.done = true
	default:
		if err := p.releaseAddresses(ctx, svc, leaving); err != nil {
			return nil, err
		}
	}
	return sg, nil
}

// finish writes the NSG change (with the frontend addresses now known) if
// it is not written yet, and waits for it.
func (sg *reconcileSecurity) finish(ctx context.Context, p *Provider, svc *v1.Service, spec *annotations.ServiceSpec, acc *accesscontrol.Access,
	ingress map[v1.IPFamily]string, nodes []*v1.Node) error {
	if sg.done {
		return nil
	}
	if sg.pending == nil {
		sg.pending = p.beginSecurityRules(ctx, svc, spec, acc, ingress, nodes, sg.released...)
	}
	return p.finishSecurityRules(ctx, svc, acc, sg.pending)
}

// RuleLimitError reports that placing the Service would exceed
// maximumLoadBalancerRuleCount.
type RuleLimitError struct {
	LoadBalancer, Service string
	Rules, Limit          int
}

func (e *RuleLimitError) Error() string {
	return fmt.Sprintf("service %s: load balancer %s would have %d rules, more than maximumLoadBalancerRuleCount (%d)", e.Service, e.LoadBalancer, e.Rules, e.Limit)
}

func ownedRuleCount(lb *armnetwork.LoadBalancer, base string) int {
	n := 0
	if lb != nil && lb.Properties != nil {
		for _, r := range lb.Properties.LoadBalancingRules {
			if names.Owns(base, ptr.Deref(r.Name, "")) {
				n++
			}
		}
	}
	return n
}

// removeFromLBs removes the Service's frontends from every managed load
// balancer other than except (also from load balancers whose configuration
// was removed: they stay managed until they are empty).
func (p *Provider) removeFromLBs(ctx context.Context, caller string, svc *v1.Service, except string) error {
	base := names.FrontendBase(svc)
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return err
	}
	for _, name := range lbs {
		if strings.EqualFold(name, except) {
			continue
		}
		lb, err := p.store.Get(ctx, name)
		if err != nil {
			return err
		}
		if lb == nil || !servesService(lb, base) {
			continue
		}
		// Private Link Services of the frontends this write removes go
		// first: Azure refuses to remove a frontend one uses.
		liveBase := p.liveBases()
		live := func(b string) bool { return liveBase(b) != nil }
		var leaving []string
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if names.Owns(base, feNameOf(fe)) && !usedByOthers(lb, base, fe) && fe.ID != nil {
				leaving = append(leaving, *fe.ID)
			}
		}
		// And a shared frontend whose owner is gone, of which this
		// Service is the last user (found by the differential test).
		leaving = append(leaving, orphanedFrontendIDs(lb, base, nil, live)...)
		if err := p.releasePrivateLinks(ctx, p.pls, svc, leaving); err != nil {
			return err
		}
		var orphans []*armnetwork.FrontendIPConfiguration
		kept := false
		if _, err := p.store.UpdateLB(ctx, caller, name, lbstore.UpdateOptions{}, func(lb *armnetwork.LoadBalancer) (bool, error) {
			changed, removed := applySharedService(lb, base, nil, nil, localPoolNames(svc), nil, live)
			orphans, kept = removed, hasOwnedFrontend(lb, base)
			return changed, nil
		}); err != nil {
			return err
		}
		if kept {
			p.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonFrontendKept,
				"Load balancer %s keeps the Service's frontend: other Services sharing its IP still use it", name)
		}
		if err := p.deleteOrphanedFrontendIPs(ctx, svc, orphans); err != nil {
			return err
		}
		if cfg, ok := p.configOf(name); ok && except == "" {
			p.state.RemoveServiceFrom(cfg, base)
		}
		logger(ctx).Info("Removed Service from load balancer", "service", names.ServiceKey(svc), "loadBalancer", name)
	}
	return nil
}

// frontendAt is one of a Service's frontends and the load balancer holding it.
type frontendAt struct {
	lb string
	fe *armnetwork.FrontendIPConfiguration
}

// serviceFrontendSet is every frontend a Service has, on every managed load
// balancer.
type serviceFrontendSet []frontendAt

// serviceFrontends finds the Service's frontends on every managed load
// balancer.
func (p *Provider) serviceFrontends(ctx context.Context, base string) (serviceFrontendSet, error) {
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return nil, err
	}
	var out serviceFrontendSet
	for _, name := range lbs {
		lb, err := p.store.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if lb == nil || lb.Properties == nil {
			continue
		}
		for _, fe := range usedFrontends(lb, base) {
			out = append(out, frontendAt{lb: name, fe: fe})
		}
	}
	return out, nil
}

// publicIPs lists (lower-cased) the public IP ids the frontends reference.
func (s serviceFrontendSet) publicIPs() []string {
	var out []string
	for _, f := range s {
		if f.fe.Properties != nil && f.fe.Properties.PublicIPAddress != nil {
			out = append(out, strings.ToLower(ptr.Deref(f.fe.Properties.PublicIPAddress.ID, "")))
		}
	}
	return out
}

// movingPrivateIP is the private address the frontend named name has on a
// load balancer other than target, in the same subnet: the address an
// internal Service keeps when it moves to target. "" when there is none.
func (s serviceFrontendSet) movingPrivateIP(target, name, subnetID string) string {
	for _, f := range s {
		props := f.fe.Properties
		if strings.EqualFold(f.lb, target) || !strings.EqualFold(ptr.Deref(f.fe.Name, ""), name) || props == nil || props.Subnet == nil {
			continue
		}
		if strings.EqualFold(ptr.Deref(props.Subnet.ID, ""), subnetID) {
			return ptr.Deref(props.PrivateIPAddress, "")
		}
	}
	return ""
}

func hasOwnedFrontend(lb *armnetwork.LoadBalancer, base string) bool {
	if lb.Properties == nil {
		return false
	}
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		if names.Owns(base, ptr.Deref(fe.Name, "")) {
			return true
		}
	}
	return false
}

// findServiceLB returns the managed load balancer holding the Service's
// frontends, or ("", nil, nil).
func (p *Provider) findServiceLB(ctx context.Context, svc *v1.Service) (string, *armnetwork.LoadBalancer, error) {
	if err := p.ensureStarted(ctx); err != nil {
		return "", nil, err
	}
	base := names.FrontendBase(svc)
	lbs, err := p.store.Managed(ctx)
	if err != nil {
		return "", nil, err
	}
	for _, name := range lbs {
		lb, err := p.store.Get(ctx, name)
		if err != nil {
			return "", nil, err
		}
		if lb != nil && servesService(lb, base) {
			return name, lb, nil
		}
	}
	return "", nil, nil
}

// chooseLB picks the load balancer for the Service: the default one (or its
// internal twin) in single mode, the placement result in multiple-SLB mode.
// configName is "" in single mode. placed ends the Service's in-flight
// reservation; the caller calls it once its write is done.
func (p *Provider) chooseLB(ctx context.Context, svc *v1.Service, spec *annotations.ServiceSpec, families []v1.IPFamily) (lbName, configName string, placed func(), err error) {
	if p.placer == nil {
		return names.LoadBalancer(p.cfg.DefaultLoadBalancerName(), spec.Internal), "", func() {}, nil
	}
	nsLabels, err := p.namespaceLabels(ctx, svc.Namespace)
	if err != nil {
		return "", "", nil, err
	}
	base := names.FrontendBase(svc)
	// Services sharing an IP are on one load balancer: a Service goes where
	// its IP is (or stays where others use its frontend), or, when its
	// configurations do not allow that, is refused without a move.
	if pinned, err := p.sharedIPLoadBalancer(ctx, svc, spec, families); err != nil || pinned != "" {
		if err != nil {
			return "", "", nil, err
		}
		cfgName, ok := p.configOf(pinned)
		if !ok || len(spec.LoadBalancerConfigurations) > 0 && !containsFold(spec.LoadBalancerConfigurations, cfgName) {
			err := fmt.Errorf("service %s: its IP is shared on load balancer %s, which %s=%q does not allow; Services sharing an IP must be on one load balancer, so nothing is written or moved",
				names.ServiceKey(svc), pinned, annotations.KeyLoadBalancerConfigurations, strings.Join(spec.LoadBalancerConfigurations, ","))
			return "", "", nil, refuse(EventReasonSharedIPPlacementConflict, err)
		}
		return pinned, cfgName, func() {}, nil
	}
	current, _ := p.state.ServiceConfig(base)
	info := placement.ServiceInfo{
		Key:             names.ServiceKey(svc),
		NamespaceLabels: nsLabels,
		ServiceLabels:   svc.Labels,
		Requested:       spec.LoadBalancerConfigurations,
		Current:         current,
	}
	// Rule counts of the load balancer the Service would use on each
	// configuration (the public one, or its internal twin), plus the rules
	// of Services placed there whose write has not landed yet: Services
	// created together count each other.
	// The load balancers are read before the placement lock is taken, so
	// that concurrent placements do not wait on each other's reads.
	lbs := map[string]*armnetwork.LoadBalancer{}
	for _, cfgName := range p.configNames() {
		lb, err := p.store.Get(ctx, names.LoadBalancer(cfgName, spec.Internal))
		if err != nil {
			return "", "", nil, err
		}
		lbs[cfgName] = lb
	}
	lbName, placed, err = p.inflight.Place(base, func(reserved map[string]int) (string, int, error) {
		counts := map[string]int{}
		for cfgName, lb := range lbs {
			counts[cfgName] = ruleCount(lb) + reserved[names.LoadBalancer(cfgName, spec.Internal)]
		}
		cfgName, err := p.placer.PlaceService(info, counts)
		if err != nil {
			return "", 0, refuse(EventReasonPlacementFailed, err)
		}
		configName = cfgName
		rules := len(svc.Spec.Ports) * len(families)
		if lb := lbs[cfgName]; lb != nil {
			rules -= ownedRuleCount(lb, base) // already counted there
		}
		return names.LoadBalancer(cfgName, spec.Internal), rules, nil
	})
	if err != nil {
		return "", "", nil, err
	}
	return lbName, configName, placed, nil
}

// configOf maps a load balancer name to its configuration name.
func (p *Provider) configOf(lbName string) (string, bool) {
	if p.placer == nil {
		def := p.cfg.DefaultLoadBalancerName()
		return def, strings.EqualFold(names.PublicLB(lbName), def)
	}
	cfg, _, ok := p.placer.ConfigForLoadBalancer(lbName)
	return cfg, ok
}

// statusOf reads the ingress addresses of the Service's frontends.
func (p *Provider) statusOf(ctx context.Context, svc *v1.Service, _ string, lb *armnetwork.LoadBalancer) (*v1.LoadBalancerStatus, error) {
	families := serviceFamilies(svc)
	ingress := map[v1.IPFamily]string{}
	for _, fam := range families {
		fe := serviceFrontend(lb, svc, fam)
		if fe == nil || fe.Properties == nil {
			continue
		}
		if fe.Properties.PublicIPAddress != nil {
			id := ptr.Deref(fe.Properties.PublicIPAddress.ID, "")
			rg, name, err := names.ParseID(id)
			if err != nil {
				return nil, err
			}
			pip, err := p.publicIPs(ctx).Get(ctx, rg, name)
			if err != nil {
				return nil, fmt.Errorf("get public IP %s: %w", id, err)
			}
			ingress[fam] = pipAddress(pip)
			p.notePublicIP(id, ingress[fam])
		} else {
			ingress[fam] = ptr.Deref(fe.Properties.PrivateIPAddress, "")
		}
	}
	return ingressStatus(families, ingress), nil
}

func findFrontend(lb *armnetwork.LoadBalancer, name string) *armnetwork.FrontendIPConfiguration {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	if i := findByName(lb.Properties.FrontendIPConfigurations, name, feNameOf); i >= 0 {
		return lb.Properties.FrontendIPConfigurations[i]
	}
	return nil
}

func ingressStatus(families []v1.IPFamily, ips map[v1.IPFamily]string) *v1.LoadBalancerStatus {
	st := &v1.LoadBalancerStatus{}
	for _, f := range families {
		if ip := ips[f]; ip != "" {
			st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
	}
	return st
}

// serviceFamilies is the Service's IP families, IPv4 when unset.
func serviceFamilies(svc *v1.Service) []v1.IPFamily {
	if len(svc.Spec.IPFamilies) == 0 {
		return []v1.IPFamily{v1.IPv4Protocol}
	}
	return svc.Spec.IPFamilies
}
