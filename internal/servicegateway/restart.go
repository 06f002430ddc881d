package servicegateway

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
)

// initialize reads the state of Azure and the cluster (load), retrying
// with backoff until it succeeds, then opens the engine. It returns false
// when ctx ended first.
func (e *Controller) initialize(ctx context.Context) bool {
	log := klog.FromContext(ctx)
	start := e.clock.Now()
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: maxJitter, Cap: 30 * time.Second, Steps: math.MaxInt32}
	for attempt := 1; ; attempt++ {
		err := e.load(ctx)
		if err == nil {
			break
		}
		delay := backoff.Step()
		log.Error(err, "Pod-based load balancing cannot start; retrying", "attempt", attempt, "after", delay)
		select {
		case <-ctx.Done():
			return false
		case <-e.clock.After(delay):
		}
	}
	metrics.SetServiceGatewayEnabled()
	metrics.SetServiceGatewayInitDuration(e.clock.Since(start))
	e.mu.Lock()
	n := len(e.states)
	e.mu.Unlock()
	log.Info("Read the state of the service gateway", "services", n, "took", e.clock.Since(start))
	e.initOnce.Do(func() { close(e.initialized) })
	return true
}

// azureState is what start-up reads from Azure.
type azureState struct {
	registered map[string][]string // inbound gateway services named by a UID -> pool ids
	lbs        map[string]*armnetwork.LoadBalancer
	pips       map[string]*armnetwork.PublicIPAddress
	locations  []*armnetwork.ServiceGatewayAddressLocationResponse
	// outbound: Outbound services other than default-natgw -> NAT gateway
	// id; egressPIPs: public IPs tagged for an egress identity (IPv4,
	// IPv6).
	outbound   map[string]string
	egressPIPs map[string][2]*armnetwork.PublicIPAddress
}

// readAzure reads the gateway's services and address locations and the
// resource group's load balancers and public IPs. An inbound service whose
// name is not a UID, every outbound one (the RP's default-natgw, egress)
// and resources named otherwise are not azlb's and are left out. A service
// of a type azlb does not know fails start-up rather than being taken for
// garbage.
func (e *Controller) readAzure(ctx context.Context) (*azureState, error) {
	gwName := e.rg + "/" + names.ServiceGateway
	svcs, err := e.gw.GetServices(ctx, e.rg, names.ServiceGateway)
	if azure.Classify(err) == azure.ClassStale {
		return nil, fmt.Errorf("the service gateway %s does not exist; pod-based load balancing needs it (it is provisioned with the cluster): %w", gwName, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read the services of service gateway %s: %w", gwName, err)
	}
	st := &azureState{registered: map[string][]string{}, lbs: map[string]*armnetwork.LoadBalancer{}, pips: map[string]*armnetwork.PublicIPAddress{},
		outbound: map[string]string{}, egressPIPs: map[string][2]*armnetwork.PublicIPAddress{}}
	for _, s := range svcs {
		if s == nil || s.Name == nil {
			continue
		}
		typ := armnetwork.ServiceType("")
		if s.Properties != nil {
			typ = ptr.Deref(s.Properties.ServiceType, "")
		}
		switch typ {
		case armnetwork.ServiceTypeOutbound:
			if !strings.EqualFold(*s.Name, names.DefaultOutboundService) && s.Properties != nil {
				st.outbound[*s.Name] = ptr.Deref(s.Properties.PublicNatGatewayID, "")
			}
			continue
		case armnetwork.ServiceTypeInbound, armnetwork.ServiceTypeInboundOutbound:
		default:
			return nil, fmt.Errorf("service gateway %s: service %q has type %q, which azlb does not know; refusing to guess whether it is azlb's", gwName, *s.Name, typ)
		}
		if !isUID(*s.Name) {
			continue
		}
		pools := []string{}
		for _, p := range s.Properties.LoadBalancerBackendPools {
			if p != nil && p.ID != nil {
				pools = append(pools, *p.ID)
			}
		}
		st.registered[strings.ToLower(*s.Name)] = pools
	}
	if st.locations, err = e.gw.GetAddressLocations(ctx, e.rg, names.ServiceGateway); err != nil {
		return nil, fmt.Errorf("read the address locations of service gateway %s: %w", gwName, err)
	}
	lbs, err := e.store.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, lb := range lbs {
		if n := ptr.Deref(lb.Name, ""); isUID(n) && lb.SKU != nil && ptr.Deref(lb.SKU.Name, "") == SKUService {
			st.lbs[strings.ToLower(n)] = lb
		}
	}
	pips, err := e.pips.List(ctx, e.rg)
	if err != nil && azure.Classify(err) != azure.ClassStale {
		return nil, fmt.Errorf("list public IPs in %s: %w", e.rg, err)
	}
	for _, p := range pips {
		if uid, ok := names.UIDOfServicePublicIP(ptr.Deref(p.Name, "")); ok {
			st.pips[uid] = p
			continue
		}
		if id, ok := identityOfPIP(ptr.Deref(p.Name, "")); ok && hasClusterTag(p.Tags, e.cfg.ClusterName) && ptr.Deref(p.Tags[TagEgressIdentity], "") == id {
			x := st.egressPIPs[id]
			if strings.HasSuffix(*p.Name, egressPIPSuffixV6) {
				x[1] = p
			} else {
				x[0] = p
			}
			st.egressPIPs[id] = x
		}
	}
	return st, nil
}

// load builds the engine's records from Azure and the informers: a
// restart of an unchanged cluster finds every Service in sync and writes
// nothing.
func (e *Controller) load(ctx context.Context) error {
	az, err := e.readAzure(ctx)
	if err != nil {
		return err
	}
	svcs, err := e.services.List(labels.Everything())
	if err != nil {
		return err
	}
	states := map[string]*svcState{}
	for _, svc := range svcs {
		if st := e.stateAtStart(svc, az); st != nil {
			states[st.uid] = st
		}
	}
	// What azlb made for Services that no longer exist.
	for uid := range az.registered {
		e.addOrphan(states, uid, az)
	}
	for uid, lb := range az.lbs {
		if hasClusterTag(lb.Tags, e.cfg.ClusterName) {
			e.addOrphan(states, uid, az)
		}
	}
	for uid, p := range az.pips {
		if hasClusterTag(p.Tags, e.cfg.ClusterName) {
			e.addOrphan(states, uid, az)
		}
	}
	// Endpoints of the Services that want a load balancer.
	wants := map[string]endpointSet{}
	for uid, st := range states {
		if st.ns == "" || st.deleting {
			continue
		}
		set, err := serviceEndpoints(st.ns, st.name, uidOf(uid), e.bySvc, e.nodes)
		if err != nil {
			return err
		}
		wants[uid] = set
	}
	found, err := e.readEgress(ctx, az)
	if err != nil {
		return err
	}
	seenPods, egressAddrs := e.egressPodsAtStart()
	e.mu.Lock()
	e.states = states
	e.byName = map[string]string{}
	e.tracker = newDiffTracker()
	skipped := e.tracker.LoadNRP(az.locations)
	identities := e.installEgressLocked(found, seenPods, egressAddrs)
	for uid, pools := range az.registered {
		e.tracker.SetRegistered(uid, pools)
	}
	for uid, st := range states {
		if st.ns != "" {
			e.byName[serviceKey(st.ns, st.name)] = uid
		}
		if set, ok := wants[uid]; ok {
			e.indexNodesLocked(serviceKey(st.ns, st.name), set.nodes)
			e.tracker.SetDesired(uid, set.addrs)
		}
		e.updateReadyLocked(uid)
	}
	for _, n := range e.nodeList() {
		e.nodeLocs[n.Name] = locationsOf(n)
	}
	e.mu.Unlock()
	if skipped > 0 {
		klog.FromContext(ctx).Info("Skipped address locations the service gateway listed that are not IP addresses", "count", skipped)
	}
	for uid := range states {
		e.svcQueue.Add(uid)
	}
	for _, id := range identities {
		e.egQueue.Add(id)
	}
	e.locQueue.Add(locationsKey)
	return nil
}

func (e *Controller) nodeList() []*v1.Node {
	ns, _ := e.nodes.List(labels.Everything())
	return ns
}

// stateAtStart is the record of a Service at start-up: a LoadBalancer
// Service of no other class wants its load balancer (one refused by
// admission keeps what it has, nothing more); a deleted one, or one that is
// no longer a LoadBalancer, with azlb's finalizer or resources in Azure is
// torn down.
func (e *Controller) stateAtStart(svc *v1.Service, az *azureState) *svcState {
	uid := uidKey(svc.UID)
	st := &svcState{uid: uid, ns: svc.Namespace, name: svc.Name, gen: 1}
	e.fillPresence(st, az)
	_, registered := az.registered[uid]
	inAzure := registered || st.lb == present || st.pip == present
	wanted := svc.DeletionTimestamp == nil && svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.LoadBalancerClass == nil
	if !wanted {
		if !inAzure && !slices.Contains(svc.Finalizers, Finalizer) {
			return nil
		}
		st.deleting = true
		return st
	}
	spec, rej := admit(svc)
	if rej != nil {
		e.recorder.Eventf(svc, v1.EventTypeWarning, rej.reason, "%s", rej.message)
		if !inAzure {
			return nil
		}
		// It keeps its load balancer; nothing is applied, and with a
		// source restriction its addresses are not sent.
		st.withheld = rej.reason == ReasonUnsupportedAccessControl
		return st
	}
	st.desired = spec
	if lb := az.lbs[uid]; lb != nil && st.pip == present && lbMatches(lb, e.desiredLB(uid, spec, st.pipID)) &&
		hasClusterTag(lb.Tags, e.cfg.ClusterName) {
		st.applied = spec
	}
	return st
}

// fillPresence records which of the Service's Azure resources exist.
func (e *Controller) fillPresence(st *svcState, az *azureState) {
	st.lb, st.pip = absent, absent
	if az.lbs[st.uid] != nil {
		st.lb = present
	}
	if p := az.pips[st.uid]; p != nil && p.ID != nil {
		st.pip, st.pipID = present, *p.ID
		st.pipFamily = v1.IPv4Protocol
		if p.Properties != nil {
			st.pipIP = ptr.Deref(p.Properties.IPAddress, "")
			if ptr.Deref(p.Properties.PublicIPAddressVersion, "") == armnetwork.IPVersionIPv6 {
				st.pipFamily = v1.IPv6Protocol
			}
		}
	}
}

// addOrphan records resources of a UID no Service has (any more) for
// removal.
func (e *Controller) addOrphan(states map[string]*svcState, uid string, az *azureState) {
	if _, known := states[uid]; known {
		return
	}
	st := &svcState{uid: uid, deleting: true, gen: 1}
	e.fillPresence(st, az)
	states[uid] = st
}
