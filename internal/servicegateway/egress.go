package servicegateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
)

// Egress: pods labelled EgressLabel=<identity> leave through a NAT gateway
// attached to the service gateway (see docs/container-load-balancer.md).
const (
	// EgressLabel names a pod's egress identity.
	EgressLabel = "kubernetes.azure.com/service-egress-gateway"
	// PodFinalizer keeps an egress pod until its address has left the
	// gateway (and, for the identity's last pod, until the identity's Azure
	// resources are gone).
	PodFinalizer = "servicegateway.azure.com/pod-cleanup"
	// TagEgressIdentity marks the NAT gateway and public IPs azlb made for
	// an identity (with the cluster's tag).
	TagEgressIdentity = "k8s-azure-service-egress-gateway"
	// maxIdentityLength keeps <identity>-pip-v6 within Azure's 80
	// characters.
	maxIdentityLength = 73
	egressQueueName   = "servicegateway_egress"
	egressPIPSuffixV6 = "-pip-v6"
)

// Warning events on egress pods.
const (
	EventInvalidEgressLabel  = "ServiceGatewayInvalidEgressLabel"
	EventReservedEgressLabel = "ServiceGatewayReservedEgressLabel"
	EventInvalidPodIP        = "ServiceGatewayInvalidPodIP"
	EventNoNodeLocation      = "ServiceGatewayNoNodeLocation"
	EventFinalizerAddFailed  = "ServiceGatewayFinalizerAddFailed"
)

// identityPattern: lower-case letters, digits, '-', '_' and '.', starting
// with a letter or digit and ending with one or '_' (Azure's rule for NAT
// gateway and public IP names; lower case because gateway service names
// compare without case).
var identityPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9_.-]*[a-z0-9_])?$`)

// checkIdentity returns the event reason and message refusing an identity,
// or "" when it is valid.
func checkIdentity(id string) (reason, msg string) {
	switch {
	case strings.EqualFold(id, names.DefaultOutboundService):
		return EventReservedEgressLabel, fmt.Sprintf("%s=%q is reserved for the gateway's default outbound service", EgressLabel, id)
	case isUID(id):
		return EventReservedEgressLabel, fmt.Sprintf("%s=%q has the form of a Service UID, which names inbound services", EgressLabel, id)
	case len(id) > maxIdentityLength || !identityPattern.MatchString(id):
		return EventInvalidEgressLabel, fmt.Sprintf("%s=%q is not a valid egress identity (1 to %d lower-case letters, digits, '-', '_' or '.', starting with a letter or digit, ending with one or '_')", EgressLabel, id, maxIdentityLength)
	}
	return "", ""
}

func egressPIPName(id string, v6 bool) string {
	if v6 {
		return id + egressPIPSuffixV6
	}
	return id + names.ServicePIPSuffix
}

// identityOfPIP returns the identity of an egress public IP name.
func identityOfPIP(name string) (string, bool) {
	if id, ok := strings.CutSuffix(name, egressPIPSuffixV6); ok {
		return id, true
	}
	return strings.CutSuffix(name, names.ServicePIPSuffix)
}

// egressKey is an identity's key in the registrar (Service UIDs are the
// others; no UID starts with "egress/").
func egressKey(id string) string { return "egress/" + id }

// identityOfKey returns the identity of a registrar key ("" for a UID).
func identityOfKey(k string) string {
	id, _ := strings.CutPrefix(k, "egress/")
	if id == k {
		return ""
	}
	return id
}

// egressRegisteredLocked records the registrar's success for an identity.
// Call with e.mu held.
func (e *Controller) egressRegisteredLocked(id string, registered bool) {
	if st := e.egress[id]; st != nil {
		st.registered, st.regUnsure = registered, false
	}
}

// Egress operations (metric label).
const (
	egressProvision = "provision"
	egressTeardown  = "teardown"
)

// egressState is what the engine knows of one egress identity.
type egressState struct {
	name    string
	pip     [2]presence // IPv4, IPv6 public IP
	pipID   [2]string
	nat     presence
	natPIPs []string // public IP ids the NAT gateway holds
	// attached: the NAT gateway's serviceGateway is the cluster's gateway.
	attached bool
	// registered: the gateway holds the Outbound service on this NAT gateway.
	// regUnsure: an updateServices entry of it failed, and ARM may have
	// applied it (set by recordRegistrations): a provision registers it
	// again and a teardown unregisters it again (both harmless when
	// already so).
	registered, regUnsure bool
	// draining: waiting for the address updater to take the identity's
	// addresses away (tearing down), or those of waitIPs (leaving pods);
	// queueDrained requeues it once they are gone.
	draining bool
	waitIPs  []netip.Addr
}

// egressPod is a pod the engine has seen with an identity.
type egressPod struct {
	ns, name string
	identity string
}

// hasEgress reports whether egress is on (a pod informer and a NAT
// gateway client were given).
func (e *Controller) hasEgress() bool { return e.pods != nil && e.nats != nil }

func (e *Controller) gatewayID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/serviceGateways/%s", e.cfg.NetworkSubscriptionID(), e.rg, names.ServiceGateway)
}

func (e *Controller) natID(id string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/natGateways/%s", e.cfg.NetworkSubscriptionID(), e.rg, id)
}

// onPod queues the identities a pod belongs to now and belonged to before.
func (e *Controller) onPod(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*v1.Pod)
	if !ok || p == nil {
		return
	}
	label, labelled := p.Labels[EgressLabel]
	valid := false
	if labelled {
		if reason, msg := checkIdentity(label); reason != "" {
			e.warnPod(p, reason, msg)
		} else {
			valid = true
		}
	}
	e.mu.Lock()
	prev, known := e.podIdentity[p.UID]
	if valid {
		e.podIdentity[p.UID] = egressPod{ns: p.Namespace, name: p.Name, identity: label}
	}
	e.mu.Unlock()
	if known {
		e.egQueue.Add(prev.identity)
	}
	if valid {
		e.egQueue.Add(label)
	}
}

// onPodDeleted forgets the events recorded for a deleted pod and queues its
// identity.
func (e *Controller) onPodDeleted(obj any) {
	p, ok := obj.(*v1.Pod)
	if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		p, ok = t.Obj.(*v1.Pod)
	}
	if ok && p != nil {
		e.mu.Lock()
		for _, r := range []string{EventInvalidEgressLabel, EventReservedEgressLabel, EventInvalidPodIP, EventNoNodeLocation, EventFinalizerAddFailed} {
			delete(e.podWarned, string(p.UID)+"/"+r)
		}
		e.mu.Unlock()
	}
	e.onPod(obj)
}

// warnPod records a Warning event on a pod, once per pod and reason.
func (e *Controller) warnPod(p *v1.Pod, reason, msg string) {
	e.mu.Lock()
	key := string(p.UID) + "/" + reason
	_, done := e.podWarned[key]
	if !done {
		e.podWarned[key] = struct{}{}
	}
	e.mu.Unlock()
	if !done {
		e.recorder.Eventf(p, v1.EventTypeWarning, reason, "%s", msg)
	}
}

// queueAllEgress queues every identity the engine knows (node locations
// changed; IPv6 nodes appeared).
func (e *Controller) queueAllEgress() {
	if !e.hasEgress() {
		return
	}
	e.mu.Lock()
	ids := map[string]struct{}{}
	for id := range e.egress {
		ids[id] = struct{}{}
	}
	for _, p := range e.podIdentity {
		ids[p.identity] = struct{}{}
	}
	e.mu.Unlock()
	for id := range ids {
		e.egQueue.Add(id)
	}
}

func (e *Controller) processNextEgress(ctx context.Context) bool {
	return e.registrantWork(e.egQueue, &e.egBusy, func(id string) {
		op, err := e.syncEgress(ctx, id)
		e.finishEgress(ctx, id, op, err)
	})
}

// finishEgress counts an identity's sync and queues it again as its
// outcome asks.
func (e *Controller) finishEgress(ctx context.Context, id, op string, err error) {
	switch {
	case err == nil:
		if op != "" {
			metrics.CountServiceGatewayEgressOperation(op, "")
		}
		e.egQueue.Forget(id)
	case errors.Is(err, errDraining), errors.Is(err, errQueued):
		e.egQueue.Forget(id) // the address updater or the registrar queues it again
	default:
		_, code := classify(opDelete, err)
		metrics.CountServiceGatewayEgressOperation(op, code)
		klog.FromContext(ctx).V(2).Info("Egress identity sync failed; retrying", "identity", id, "err", err, "attempt", e.egQueue.NumRequeues(id)+1)
		e.egQueue.AddRateLimited(id)
	}
}

// active reports whether a pod egresses: not being deleted, not finished,
// placed on a node, with an IP.
func active(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed && p.Spec.NodeName != "" &&
		(len(p.Status.PodIPs) > 0 || p.Status.PodIP != "")
}

// identityPods lists the pods labelled with the identity.
func (e *Controller) identityPods(id string) ([]*v1.Pod, error) {
	req, err := labels.NewRequirement(EgressLabel, selection.Equals, []string{id})
	if err != nil {
		return nil, err
	}
	return e.pods.List(labels.NewSelector().Add(*req))
}

// syncEgress brings one identity to what its pods want: with pods, its
// public IP(s), NAT gateway (attached to the gateway), Outbound service
// and their addresses; without, everything torn down in the order the
// gateway requires. Pod finalizers are released once a pod's address has
// left the gateway (the last pods' once the identity is gone).
func (e *Controller) syncEgress(ctx context.Context, id string) (op string, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Egress sync panicked", "identity", id, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	if reason, _ := checkIdentity(id); reason != "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.opTimeout)
	defer cancel()
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("egressIdentity", id))
	pods, err := e.identityPods(id)
	if err != nil {
		return "", err
	}
	var members []*v1.Pod
	for _, p := range pods {
		if active(p) {
			members = append(members, p)
		}
	}
	addrs := e.egressAddresses(members)
	leaving, err := e.leavingPods(ctx, id, members)
	if err != nil {
		return "", err
	}
	if len(members) == 0 {
		e.mu.Lock()
		known := e.egress[id] != nil
		e.mu.Unlock()
		if !known && len(leaving) == 0 {
			return "", nil
		}
		return egressTeardown, e.teardownEgress(ctx, id, leaving)
	}
	if err := e.provisionEgress(ctx, id, members, addrs); err != nil {
		return egressProvision, err
	}
	return egressProvision, e.releaseLeaving(ctx, id, leaving, false)
}

// egressAddresses files the members' pod IPs under their nodes' locations
// of the same family (warning about those it cannot place).
func (e *Controller) egressAddresses(members []*v1.Pod) map[addrKey]struct{} {
	out := map[addrKey]struct{}{}
	for _, p := range members {
		loc, err := nodeLocations(e.nodes, p.Spec.NodeName)
		if err != nil {
			continue
		}
		ips := p.Status.PodIPs
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = []v1.PodIP{{IP: p.Status.PodIP}}
		}
		for _, a := range ips {
			ip, ok := canonicalIP(a.IP)
			if !ok {
				e.warnPod(p, EventInvalidPodIP, fmt.Sprintf("pod IP %q is not an IP address; it is not registered for egress", a.IP))
				continue
			}
			fam := 0
			if ip.Is6() {
				fam = 1
			}
			if !loc[fam].IsValid() {
				e.warnPod(p, EventNoNodeLocation, fmt.Sprintf("node %q has no InternalIP of the family of pod IP %s; the address waits until it has one", p.Spec.NodeName, ip))
				continue
			}
			out[addrKey{loc: loc[fam], addr: ip}] = struct{}{}
		}
	}
	return out
}

// leavingPods finds the pods the engine saw with this identity that no
// longer egress through it but still carry the pod finalizer (deleted,
// finished, relabelled). Pods gone, or replaced under the same name, are
// forgotten.
func (e *Controller) leavingPods(ctx context.Context, id string, members []*v1.Pod) ([]*v1.Pod, error) {
	isMember := map[types.UID]bool{}
	for _, p := range members {
		isMember[p.UID] = true
	}
	e.mu.Lock()
	var seen []types.UID
	refs := map[types.UID]egressPod{}
	for uid, p := range e.podIdentity {
		if !isMember[uid] && (p.identity == id) {
			seen = append(seen, uid)
			refs[uid] = p
		}
	}
	e.mu.Unlock()
	var out []*v1.Pod
	for _, uid := range seen {
		ref := refs[uid]
		p, err := e.pods.Pods(ref.ns).Get(ref.name)
		if err != nil || p.UID != uid {
			// The filtered informer no longer shows it: read it.
			p, err = e.client.CoreV1().Pods(ref.ns).Get(ctx, ref.name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				p, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
		}
		if p == nil || p.UID != uid || !slices.Contains(p.Finalizers, PodFinalizer) {
			e.forgetPod(uid, id)
			continue
		}
		if active(p) && p.Labels[EgressLabel] != id {
			if reason, _ := checkIdentity(p.Labels[EgressLabel]); reason == "" && p.Labels[EgressLabel] != "" {
				continue // moved to another identity, which keeps the finalizer
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func (e *Controller) forgetPod(uid types.UID, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.podIdentity[uid]; ok && p.identity == id {
		delete(e.podIdentity, uid)
	}
	for _, r := range []string{EventInvalidEgressLabel, EventReservedEgressLabel, EventInvalidPodIP, EventNoNodeLocation, EventFinalizerAddFailed} {
		delete(e.podWarned, string(uid)+"/"+r)
	}
}

// stateOf returns (creating) an identity's record. Call with e.mu held.
func (e *Controller) egressStateLocked(id string) *egressState {
	st := e.egress[id]
	if st == nil {
		// Start-up read everything azlb owns: an identity new since has
		// nothing in Azure. A write that may have created something marks
		// it unknown first.
		st = &egressState{name: id, pip: [2]presence{absent, absent}, nat: absent}
		e.egress[id] = st
		e.tracker.SetOwned(id, true)
	}
	return st
}

func (e *Controller) egressSnapshot(id string) egressState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.egressStateLocked(id)
	cp := *st
	cp.natPIPs = slices.Clone(st.natPIPs)
	return cp
}

func (e *Controller) updateEgress(id string, fn func(*egressState)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if st := e.egress[id]; st != nil {
		fn(st)
	}
}

// clusterHasIPv6 reports whether any node has an IPv6 InternalIP.
func (e *Controller) clusterHasIPv6() bool {
	for _, n := range e.nodeList() {
		if locationsOf(n)[1].IsValid() {
			return true
		}
	}
	return false
}

// provisionEgress makes the identity's public IP(s), NAT gateway and
// Outbound service (each only when missing or different), puts the pod
// finalizer on the members and hands their addresses to the tracker.
func (e *Controller) provisionEgress(ctx context.Context, id string, members []*v1.Pod, addrs map[addrKey]struct{}) error {
	log := klog.FromContext(ctx)
	for _, p := range members {
		if err := e.addPodFinalizer(ctx, p); err != nil {
			e.recorder.Eventf(p, v1.EventTypeWarning, EventFinalizerAddFailed, "adding finalizer %s failed: %v", PodFinalizer, err)
			return fmt.Errorf("pod finalizer on %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	snap := e.egressSnapshot(id)
	families := []bool{false}
	if e.clusterHasIPv6() {
		families = append(families, true)
	}
	var pipIDs []string
	for _, v6 := range families {
		fam := 0
		if v6 {
			fam = 1
		}
		if snap.pip[fam] != present || snap.pipID[fam] == "" {
			e.updateEgress(id, func(st *egressState) { st.pip[fam] = unknown })
			pip, err := e.pips.CreateOrUpdate(ctx, e.rg, egressPIPName(id, v6), e.egressPublicIP(id, v6), "")
			if err != nil {
				return fmt.Errorf("egress public IP: %w", err)
			}
			if pip.ID == nil {
				return fmt.Errorf("egress public IP %s has no id", egressPIPName(id, v6))
			}
			snap.pip[fam], snap.pipID[fam] = present, *pip.ID
			e.updateEgress(id, func(st *egressState) { st.pip[fam], st.pipID[fam] = present, *pip.ID })
			log.V(2).Info("Ensured egress public IP", "name", egressPIPName(id, v6))
		}
		pipIDs = append(pipIDs, snap.pipID[fam])
	}
	if snap.nat != present || !snap.attached || !sameIDs(snap.natPIPs, pipIDs) {
		// Unknown until the PUT succeeds: one that fails may still have
		// been applied.
		e.updateEgress(id, func(st *egressState) { st.nat = unknown })
		if _, err := e.nats.CreateOrUpdate(ctx, e.rg, id, e.natGateway(id, pipIDs, true)); err != nil {
			return fmt.Errorf("egress NAT gateway: %w", err)
		}
		e.updateEgress(id, func(st *egressState) { st.nat, st.attached, st.natPIPs = present, true, slices.Clone(pipIDs) })
		log.V(2).Info("Ensured egress NAT gateway", "publicIPs", len(pipIDs))
	}
	if !snap.registered || snap.regUnsure {
		// Through the registrar, batched with other registrations; it
		// records a success and queues the identity again (a failure it
		// records has marked the identity unsure already).
		if err := e.updateService(egressKey(id), regRegister); !errors.Is(err, errQueued) {
			return fmt.Errorf("register the outbound service: %w", err)
		}
		return errQueued
	}
	e.mu.Lock()
	st := e.egressStateLocked(id)
	st.draining, st.waitIPs = false, nil // not tearing down; releaseLeaving waits again if it must
	held := e.tracker.HeldByOtherOutbound(id, addrs)
	for _, k := range held {
		delete(addrs, k) // a pod relabelled from another identity: that one lets it go first
	}
	changed := e.tracker.SetDesired(id, addrs)
	ready := e.tracker.SetReady(id, st.registered)
	e.mu.Unlock()
	if changed || ready {
		e.locQueue.Add(locationsKey)
	}
	if len(held) > 0 {
		klog.FromContext(ctx).V(2).Info("Egress addresses still named by another identity; retrying", "addresses", len(held))
		e.egQueue.AddRateLimited(id)
	}
	return nil
}

// sameIDs compares two sets of ARM ids (any order, any case).
func sameIDs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	norm := func(l []string) []string {
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = strings.ToLower(x)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}

// egressPublicIP is an identity's public IP: StandardV2, Static, tagged.
func (e *Controller) egressPublicIP(id string, v6 bool) armnetwork.PublicIPAddress {
	version := armnetwork.IPVersionIPv4
	if v6 {
		version = armnetwork.IPVersionIPv6
	}
	return armnetwork.PublicIPAddress{
		Location: to.Ptr(e.cfg.Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(publicIPSKU), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Tags:     e.egressTags(id),
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(version),
		},
	}
}

func (e *Controller) egressTags(id string) map[string]*string {
	return map[string]*string{names.TagClusterName: to.Ptr(e.cfg.ClusterName), TagEgressIdentity: to.Ptr(id)}
}

// natGateway is an identity's NAT gateway: StandardV2 on its public IPs,
// attached to the gateway, or detached (an explicit JSON null: an omitted
// serviceGateway leaves the attachment as it is).
func (e *Controller) natGateway(id string, pipIDs []string, attach bool) armnetwork.NatGateway {
	pips := make([]*armnetwork.SubResource, 0, len(pipIDs))
	for _, p := range pipIDs {
		pips = append(pips, &armnetwork.SubResource{ID: to.Ptr(p)})
	}
	gw := azcore.NullValue[*armnetwork.SubResource]()
	if attach {
		gw = &armnetwork.SubResource{ID: to.Ptr(e.gatewayID())}
	}
	return armnetwork.NatGateway{
		Location: to.Ptr(e.cfg.Location),
		SKU:      &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandardV2)},
		Tags:     e.egressTags(id),
		Properties: &armnetwork.NatGatewayPropertiesFormat{
			PublicIPAddresses: pips,
			ServiceGateway:    gw,
		},
	}
}

// outboundRequest is the identity's updateServices entry.
func (e *Controller) outboundRequest(id string, remove bool) *armnetwork.ServiceGatewayServiceRequest {
	if remove {
		return &armnetwork.ServiceGatewayServiceRequest{IsDelete: to.Ptr(true), Service: &armnetwork.ServiceGatewayService{Name: to.Ptr(id)}}
	}
	return &armnetwork.ServiceGatewayServiceRequest{
		IsDelete: to.Ptr(false),
		Service: &armnetwork.ServiceGatewayService{
			Name: to.Ptr(id),
			Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
				ServiceType:              to.Ptr(armnetwork.ServiceTypeOutbound),
				IsDefault:                to.Ptr(false),
				PublicNatGatewayID:       to.Ptr(e.natID(id)),
				LoadBalancerBackendPools: []*armnetwork.BackendAddressPool{},
			},
		},
	}
}

// teardownEgress removes an identity without pods: its addresses leave the
// gateway first; then the NAT gateway is detached (serviceGateway: null),
// the Outbound service removed, the NAT gateway deleted, the public IPs
// deleted, and only then the last pods' finalizers released. Something
// already gone counts as done; any other failure is retried from the first
// step not done.
func (e *Controller) teardownEgress(ctx context.Context, id string, leaving []*v1.Pod) error {
	e.mu.Lock()
	st := e.egress[id]
	if st == nil && len(leaving) == 0 {
		e.mu.Unlock()
		return nil
	}
	st = e.egressStateLocked(id)
	e.tracker.SetDesired(id, nil)
	e.tracker.SetReady(id, false)
	mapped := e.tracker.Mapped(id)
	if mapped {
		st.draining, st.waitIPs = true, nil
		e.tracker.MarkMapped(id)
	}
	snap := *st
	e.mu.Unlock()
	if mapped {
		e.locQueue.Add(locationsKey)
		return errDraining
	}
	if snap.nat == unknown {
		if err := e.readEgressNAT(ctx, id, &snap); err != nil {
			return err
		}
	}
	if snap.nat == present && snap.attached {
		if err := e.detachEgressNAT(ctx, id, snap); err != nil {
			return err
		}
	}
	if snap.registered || snap.regUnsure {
		if err := e.unregisterEgress(ctx, id); err != nil {
			return err
		}
	}
	if err := e.deleteEgressObjects(ctx, id); err != nil {
		return err
	}
	if err := e.releaseLeaving(ctx, id, leaving, true); err != nil {
		return err
	}
	e.mu.Lock()
	delete(e.egress, id)
	e.tracker.SetOwned(id, false)
	e.mu.Unlock()
	klog.FromContext(ctx).Info("Removed the egress identity")
	return nil
}

// readEgressNAT learns whether the identity's NAT gateway exists and is
// attached (never PUT a NAT gateway that may not exist: a PUT creates it).
func (e *Controller) readEgressNAT(ctx context.Context, id string, snap *egressState) error {
	nat, err := e.nats.Get(ctx, e.rg, id)
	switch {
	case azure.Classify(err) == azure.ClassStale || isNotFound(err):
		snap.nat, snap.attached = absent, false
	case err != nil:
		return fmt.Errorf("read the NAT gateway: %w", err)
	default:
		snap.nat, snap.attached = present, false
		if nat.Properties != nil {
			snap.natPIPs = nil
			for _, p := range nat.Properties.PublicIPAddresses {
				if p != nil && p.ID != nil {
					snap.natPIPs = append(snap.natPIPs, *p.ID)
				}
			}
			if r := nat.Properties.ServiceGateway; r != nil && strings.EqualFold(ptr.Deref(r.ID, ""), e.gatewayID()) {
				snap.attached = true
			}
		}
	}
	e.updateEgress(id, func(st *egressState) {
		st.nat, st.attached, st.natPIPs = snap.nat, snap.attached, slices.Clone(snap.natPIPs)
	})
	return nil
}

// detachEgressNAT detaches the NAT gateway from the service gateway
// (serviceGateway: null), keeping its public IPs.
func (e *Controller) detachEgressNAT(ctx context.Context, id string, snap egressState) error {
	pips := snap.natPIPs
	if pips == nil {
		for fam := range 2 {
			if snap.pip[fam] == present && snap.pipID[fam] != "" {
				pips = append(pips, snap.pipID[fam])
			}
		}
	}
	_, err := e.nats.CreateOrUpdate(ctx, e.rg, id, e.natGateway(id, pips, false))
	switch {
	case azure.Classify(err) == azure.ClassStale || isNotFound(err):
		e.updateEgress(id, func(st *egressState) { st.nat, st.attached = absent, false })
	case err != nil:
		// ARM may have applied it (a reset or a timeout after it took the
		// write): what the NAT gateway is now is unknown, so the next
		// teardown reads it and a provision PUTs it attached again.
		e.updateEgress(id, func(st *egressState) { st.nat = unknown })
		return fmt.Errorf("detach the NAT gateway: %w", err)
	default:
		e.updateEgress(id, func(st *egressState) { st.attached = false })
		klog.FromContext(ctx).V(2).Info("Detached the egress NAT gateway from the service gateway")
	}
	return nil
}

// unregisterEgress removes the identity's Outbound service.
func (e *Controller) unregisterEgress(ctx context.Context, id string) error {
	err := e.updateService(egressKey(id), regUnregister)
	switch {
	case errors.Is(err, errQueued):
		return err
	case isOverlayMappings(err):
		e.mu.Lock()
		e.refreshNRP = true
		if st := e.egress[id]; st != nil {
			st.draining = true
		}
		e.mu.Unlock()
		e.locQueue.Add(locationsKey)
		return fmt.Errorf("unregister the outbound service: %w", err)
	case err != nil && azure.Classify(err) != azure.ClassStale:
		// The registrar marked the identity unsure when it recorded the
		// failure: it may have been applied.
		return fmt.Errorf("unregister the outbound service: %w", err)
	}
	e.updateEgress(id, func(st *egressState) { st.registered, st.regUnsure = false, false })
	klog.FromContext(ctx).V(2).Info("Unregistered the outbound service")
	return nil
}

// deleteEgressObjects deletes the NAT gateway, then its public IPs.
func (e *Controller) deleteEgressObjects(ctx context.Context, id string) error {
	log := klog.FromContext(ctx)
	e.mu.Lock()
	snap := *e.egressStateLocked(id)
	e.mu.Unlock()
	// A delete that fails may still have been applied: what is in Azure is
	// unknown until it succeeds (a later provisioning writes it again).
	if snap.nat != absent {
		e.updateEgress(id, func(st *egressState) { st.nat = unknown })
		if err := e.nats.Delete(ctx, e.rg, id); err != nil && azure.Classify(err) != azure.ClassStale && !isNotFound(err) {
			return fmt.Errorf("delete the NAT gateway: %w", err)
		}
		e.updateEgress(id, func(st *egressState) { st.nat, st.attached, st.natPIPs = absent, false, nil })
		log.V(2).Info("Deleted the egress NAT gateway")
	}
	for fam, v6 := range []bool{false, true} {
		if snap.pip[fam] == absent {
			continue
		}
		e.updateEgress(id, func(st *egressState) { st.pip[fam] = unknown })
		if err := e.pips.Delete(ctx, e.rg, egressPIPName(id, v6)); err != nil && azure.Classify(err) != azure.ClassStale && !isNotFound(err) {
			return fmt.Errorf("delete egress public IP: %w", err)
		}
		e.updateEgress(id, func(st *egressState) { st.pip[fam], st.pipID[fam] = absent, "" })
	}
	return nil
}

func isNotFound(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re != nil && re.StatusCode == 404
}

// releaseLeaving removes the pod finalizer from leaving pods whose
// addresses the gateway no longer maps to the identity (all, once the
// identity is gone).
func (e *Controller) releaseLeaving(ctx context.Context, id string, leaving []*v1.Pod, all bool) error {
	var wait []netip.Addr
	for _, p := range leaving {
		if ips := e.stillMapped(id, p); !all && len(ips) > 0 {
			wait = append(wait, ips...)
			continue
		}
		if err := e.removePodFinalizer(ctx, p); err != nil {
			return fmt.Errorf("remove the finalizer of pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		e.forgetPod(p.UID, id)
	}
	if len(wait) > 0 {
		e.mu.Lock()
		if st := e.egress[id]; st != nil {
			st.draining, st.waitIPs = true, wait
		}
		e.tracker.MarkMapped(id)
		e.mu.Unlock()
		e.locQueue.Add(locationsKey)
	}
	return nil
}

// stillMapped returns the pod's IPs the gateway maps to the identity while
// no member of the identity wants them.
func (e *Controller) stillMapped(id string, p *v1.Pod) []netip.Addr {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []netip.Addr
	for _, a := range p.Status.PodIPs {
		if ip, ok := canonicalIP(a.IP); ok && e.leavingMappedLocked(id, ip) {
			out = append(out, ip)
		}
	}
	return out
}

func (e *Controller) leavingMappedLocked(id string, ip netip.Addr) bool {
	return e.tracker.MapsAddress(id, ip) && !e.tracker.WantsAddress(id, ip)
}

// addPodFinalizer puts PodFinalizer on a pod (fresh read, UID checked).
func (e *Controller) addPodFinalizer(ctx context.Context, p *v1.Pod) error {
	if slices.Contains(p.Finalizers, PodFinalizer) {
		return nil
	}
	return e.editPodFinalizer(ctx, p, true)
}

func (e *Controller) removePodFinalizer(ctx context.Context, p *v1.Pod) error {
	if !slices.Contains(p.Finalizers, PodFinalizer) {
		return nil
	}
	return e.editPodFinalizer(ctx, p, false)
}

// editPodFinalizer adds or removes the finalizer on the pod with this UID
// only (a same-name replacement is left alone), with the resourceVersion.
func (e *Controller) editPodFinalizer(ctx context.Context, p *v1.Pod, add bool) error {
	uid := p.UID
	first := true
	return retry.RetryOnConflict(finalizerBackoff, func() error {
		cur := p
		if !first {
			var err error
			cur, err = e.client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) && !add {
				return nil
			}
			if err != nil {
				return err
			}
		}
		first = false
		if cur.UID != uid {
			if add {
				return fmt.Errorf("pod %s/%s was replaced", p.Namespace, p.Name)
			}
			return nil
		}
		has := slices.Contains(cur.Finalizers, PodFinalizer)
		if has == add {
			return nil
		}
		cp := cur.DeepCopy()
		if add {
			cp.Finalizers = append(cp.Finalizers, PodFinalizer)
		} else {
			cp.Finalizers = slices.DeleteFunc(cp.Finalizers, func(f string) bool { return f == PodFinalizer })
		}
		_, err := e.client.CoreV1().Pods(cp.Namespace).Update(ctx, cp, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) && !add {
			return nil
		}
		return err
	})
}

// egressDeletionWaitsLocked reports whether an identity's teardown waits
// for the gateway to drop its addresses.
func (e *Controller) egressDeletionWaitsLocked() bool {
	for id, st := range e.egress {
		if st.draining && !e.egressDrainedLocked(id, st) {
			return true
		}
	}
	return false
}

// egressDrainedLocked reports whether what the identity waits for has left
// the gateway.
func (e *Controller) egressDrainedLocked(id string, st *egressState) bool {
	if st.waitIPs == nil {
		return !e.tracker.Mapped(id)
	}
	for _, ip := range st.waitIPs {
		if e.leavingMappedLocked(id, ip) {
			return false
		}
	}
	return true
}

// drainedEgressLocked returns the identities whose wait on the address
// updater is over (their sync goes on).
func (e *Controller) drainedEgressLocked() []string {
	var out []string
	for id, st := range e.egress {
		if st.draining && e.egressDrainedLocked(id, st) {
			st.draining, st.waitIPs = false, nil
			out = append(out, id)
		}
	}
	return out
}

// egressAtStart is what start-up found of an identity in Azure.
type egressAtStart struct {
	nat        *armnetwork.NatGateway
	pips       [2]*armnetwork.PublicIPAddress
	registered string // the Outbound service's NAT gateway id ("" when not registered)
}

// readEgress reads the NAT gateways azlb made for identities (cluster tag
// and TagEgressIdentity); pips and outbound come from readAzure.
func (e *Controller) readEgress(ctx context.Context, az *azureState) (map[string]*egressAtStart, error) {
	out := map[string]*egressAtStart{}
	if !e.hasEgress() {
		return out, nil
	}
	get := func(id string) *egressAtStart {
		if out[id] == nil {
			out[id] = &egressAtStart{}
		}
		return out[id]
	}
	nats, err := e.nats.List(ctx, e.rg)
	if err != nil && azure.Classify(err) != azure.ClassStale {
		return nil, fmt.Errorf("list NAT gateways in %s: %w", e.rg, err)
	}
	for _, n := range nats {
		name := ptr.Deref(n.Name, "")
		if !hasClusterTag(n.Tags, e.cfg.ClusterName) || ptr.Deref(n.Tags[TagEgressIdentity], "") != name {
			continue
		}
		get(name).nat = n
	}
	for id, ps := range az.egressPIPs {
		for fam := range 2 {
			if ps[fam] != nil {
				get(id).pips[fam] = ps[fam]
			}
		}
	}
	// Only registrations of identities azlb owns (tagged NAT gateway or
	// public IPs) are adopted; an outbound service of anyone else is left.
	for id, natID := range az.outbound {
		if x := out[id]; x != nil {
			x.registered = natID
		}
	}
	return out, nil
}

// egressPodsAtStart reads the egress pods at start-up: the identities they
// name, the pods seen, and the addresses of each identity's members.
func (e *Controller) egressPodsAtStart() (seen map[types.UID]egressPod, addrs map[string]map[addrKey]struct{}) {
	seen = map[types.UID]egressPod{}
	addrs = map[string]map[addrKey]struct{}{}
	if !e.hasEgress() {
		return seen, addrs
	}
	pods, _ := e.pods.List(labels.Everything())
	byID := map[string][]*v1.Pod{}
	for _, p := range pods {
		id, ok := p.Labels[EgressLabel]
		if !ok {
			continue
		}
		if reason, msg := checkIdentity(id); reason != "" {
			e.warnPod(p, reason, msg)
			continue
		}
		seen[p.UID] = egressPod{ns: p.Namespace, name: p.Name, identity: id}
		if active(p) {
			byID[id] = append(byID[id], p)
		} else if _, ok := byID[id]; !ok {
			byID[id] = nil
		}
	}
	for id, members := range byID {
		addrs[id] = e.egressAddresses(members)
	}
	return seen, addrs
}

// installEgressLocked builds the identities' records at start-up from
// what Azure holds and the pods, and returns the identities to sync. Call
// with e.mu held, after the tracker has been loaded.
func (e *Controller) installEgressLocked(found map[string]*egressAtStart, seen map[types.UID]egressPod, addrs map[string]map[addrKey]struct{}) []string {
	e.egress = map[string]*egressState{}
	e.podIdentity = seen
	if !e.hasEgress() {
		return nil
	}
	ids := map[string]struct{}{}
	for id, f := range found {
		ids[id] = struct{}{}
		st := &egressState{name: id, nat: absent, pip: [2]presence{absent, absent}}
		for fam := range 2 {
			if p := f.pips[fam]; p != nil && p.ID != nil {
				st.pip[fam], st.pipID[fam] = present, *p.ID
			}
		}
		if f.nat != nil {
			st.nat = present
			if f.nat.Properties != nil {
				for _, p := range f.nat.Properties.PublicIPAddresses {
					if p != nil && p.ID != nil {
						st.natPIPs = append(st.natPIPs, *p.ID)
					}
				}
				if r := f.nat.Properties.ServiceGateway; r != nil && strings.EqualFold(ptr.Deref(r.ID, ""), e.gatewayID()) {
					st.attached = true
				}
			}
			if f.registered != "" && strings.EqualFold(f.registered, ptr.Deref(f.nat.ID, "")) {
				st.registered = true
			}
		} else if f.registered != "" {
			st.registered = true // its NAT gateway is gone (listed: absent)
		}
		e.egress[id] = st
		e.tracker.SetOwned(id, true)
	}
	for id, want := range addrs {
		ids[id] = struct{}{}
		if len(want) == 0 {
			continue
		}
		st := e.egressStateLocked(id)
		e.tracker.SetDesired(id, want)
		e.tracker.SetReady(id, st.registered && st.attached)
	}
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	return out
}
