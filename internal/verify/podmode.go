package verify

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
)

// Pod-based load balancing (docs/container-load-balancer.md).

const (
	podDoc            = "container-load-balancer.md#what-a-service-gets"
	podIdleAnnotation = "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout"
	podInternal       = "service.beta.kubernetes.io/azure-load-balancer-internal"
	podMinIdle        = 4
	podMaxIdle        = 30
	podDefaultIdle    = 4
)

// podAccessAnnotations restrict a Service's sources (security-groups.md).
var podAccessAnnotations = []string{
	"service.beta.kubernetes.io/azure-allowed-ip-ranges",
	"service.beta.kubernetes.io/azure-allowed-service-tags",
	"service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges",
}

// podRefusal says why pod-based load balancing refuses the Service
// (container-load-balancer.md, Which Services are refused), or "".
func podRefusal(svc *v1.Service) string {
	if v, ok := svc.Annotations[podInternal]; ok && strings.EqualFold(strings.TrimSpace(v), "true") {
		return "internal load balancers are not supported"
	}
	if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
		return "sessionAffinity ClientIP is not supported"
	}
	if svc.Spec.LoadBalancerIP != "" {
		return "spec.loadBalancerIP is not supported"
	}
	// A source restriction: refused, and its pods must be out of the
	// gateway (fail closed), which checkAddresses judges: a refused
	// Service's addresses are not wanted.
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		return "spec.loadBalancerSourceRanges is not supported; its pods must not be in the gateway"
	}
	for _, k := range podAccessAnnotations {
		if _, ok := svc.Annotations[k]; ok {
			return k + " is not supported; its pods must not be in the gateway"
		}
	}
	if len(svc.Spec.IPFamilies) > 1 {
		return "dual-stack is not supported"
	}
	if v, ok := svc.Annotations[podIdleAnnotation]; ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < podMinIdle || n > podMaxIdle {
			return fmt.Sprintf("idle timeout %q is not a whole number from %d to %d", v, podMinIdle, podMaxIdle)
		}
	}
	seen := map[string]bool{}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.Type == intstr.String {
			return fmt.Sprintf("port %d has a named targetPort", p.Port)
		}
		if p.Protocol != v1.ProtocolTCP && p.Protocol != v1.ProtocolUDP && p.Protocol != "" {
			return fmt.Sprintf("port %d has protocol %s", p.Port, p.Protocol)
		}
		if p.Port == 65535 {
			return "port 65535 is not supported"
		}
		k := string(protoOf(p)) + "/" + strconv.Itoa(int(backendPort(p)))
		if seen[k] {
			return "two ports share protocol and target port " + k
		}
		seen[k] = true
	}
	return ""
}

func protoOf(p v1.ServicePort) v1.Protocol {
	if p.Protocol == "" {
		return v1.ProtocolTCP
	}
	return p.Protocol
}

// backendPort is targetPort, or port when it is unset.
func backendPort(p v1.ServicePort) int32 {
	if p.TargetPort.IntVal != 0 {
		return p.TargetPort.IntVal
	}
	return p.Port
}

type podMode struct {
	s *Snapshot
	r *Report

	cluster string
	lbs     map[string]*armnetwork.LoadBalancer    // lower-cased name
	pips    map[string]*armnetwork.PublicIPAddress // lower-cased name
	// uids of Services that may own pod-based resources (checked, refused).
	uids map[string]bool
	// served: uids of checked Services (their addresses are expected).
	served map[string]bool
	// keys maps uids to "namespace/name".
	keys map[string]string
}

func checkPodMode(s *Snapshot, r *Report) {
	m := &podMode{s: s, r: r, cluster: s.Config.ClusterName, lbs: map[string]*armnetwork.LoadBalancer{},
		pips: map[string]*armnetwork.PublicIPAddress{}, uids: map[string]bool{}, served: map[string]bool{}, keys: map[string]string{}}
	for _, lb := range s.LoadBalancers {
		m.lbs[lower(ptr.Deref(lb.Name, ""))] = lb
	}
	for _, p := range s.PublicIPs {
		m.pips[lower(ptr.Deref(p.Name, ""))] = p
	}
	gwServices := map[string]*armnetwork.ServiceGatewayService{}
	if s.Gateway != nil {
		for _, gs := range s.Gateway.Services {
			gwServices[lower(ptr.Deref(gs.Name, ""))] = gs
		}
	}
	for _, svc := range s.Services {
		if !wantsLoadBalancer(s.Class, svc) {
			continue
		}
		uid := names.ServiceUID(svc.UID)
		m.uids[uid] = true
		m.keys[uid] = svc.Namespace + "/" + svc.Name
		if why := podRefusal(svc); why != "" {
			r.skip(serviceObject(svc), "refused by pod-based load balancing (%s); what it had is kept", why)
			continue
		}
		m.served[uid] = true
		m.checkService(svc, gwServices[uid])
	}
	m.checkLeftovers(gwServices)
	m.checkAddresses()
	m.checkEgress()
}

func (m *podMode) checkService(svc *v1.Service, gs *armnetwork.ServiceGatewayService) {
	obj := serviceObject(svc)
	uid := names.ServiceUID(svc.UID)
	if !slices.Contains(svc.Finalizers, finalizerServiceGateway) {
		m.r.add(obj, podDoc, "lacks the finalizer %s", finalizerServiceGateway)
	}
	fam := families(svc)[0]
	pip := m.pips[lower(names.ServicePublicIP(svc.UID))]
	addr := ""
	if pip == nil {
		m.r.add(obj, podDoc, "has no public IP %s", names.ServicePublicIP(svc.UID))
	} else {
		addr = m.checkPIP(svc, pip, fam)
	}
	lb := m.lbs[uid]
	if lb == nil {
		m.r.add(obj, podDoc, "has no load balancer %s", uid)
	} else {
		m.checkLB(svc, lb, pip)
	}
	if gs == nil {
		m.r.add(obj, podDoc, "is not registered in service gateway %s (no service %s)", names.ServiceGateway, uid)
	} else {
		m.checkRegistration(svc, gs)
	}
	if addr != "" {
		found := false
		for _, in := range svc.Status.LoadBalancer.Ingress {
			ip, err := netip.ParseAddr(in.IP)
			if err != nil {
				continue
			}
			if ip.String() == addr {
				found = true
			} else if ip.Is4() == (fam == v1.IPv4Protocol) {
				m.r.add(obj, podDoc, "status.loadBalancer.ingress lists %s, which is not its public IP's address %s", in.IP, addr)
			}
		}
		if !found {
			m.r.add(obj, podDoc, "status.loadBalancer.ingress lacks its public IP's address %s", addr)
		}
	}
}

func (m *podMode) checkPIP(svc *v1.Service, pip *armnetwork.PublicIPAddress, fam v1.IPFamily) string {
	obj := serviceObject(svc)
	name := ptr.Deref(pip.Name, "")
	if pip.SKU == nil || !strings.EqualFold(string(ptr.Deref(pip.SKU.Name, "")), "StandardV2") {
		m.r.add(obj, podDoc, "public IP %s is not of SKU StandardV2", name)
	}
	if c, _ := tagValue(pip.Tags, names.TagClusterName); !strings.EqualFold(c, m.cluster) {
		m.r.add(obj, podDoc, "public IP %s is tagged %s=%q, want %q", name, names.TagClusterName, c, m.cluster)
	}
	if v, _ := tagValue(pip.Tags, names.TagServiceName); v != svc.Namespace+"/"+svc.Name {
		m.r.add(obj, podDoc, "public IP %s is tagged %s=%q, want %s/%s", name, names.TagServiceName, v, svc.Namespace, svc.Name)
	}
	if pip.Properties == nil {
		return ""
	}
	if a := ptr.Deref(pip.Properties.PublicIPAllocationMethod, ""); !strings.EqualFold(string(a), "Static") {
		m.r.add(obj, podDoc, "public IP %s is allocated %s, want Static", name, a)
	}
	if v := ptr.Deref(pip.Properties.PublicIPAddressVersion, armnetwork.IPVersionIPv4); !strings.EqualFold(string(v), ipVersion(fam)) {
		m.r.add(obj, podDoc, "public IP %s is %s, want %s", name, v, ipVersion(fam))
	}
	return canonical(ptr.Deref(pip.Properties.IPAddress, ""))
}

func (m *podMode) checkLB(svc *v1.Service, lb *armnetwork.LoadBalancer, pip *armnetwork.PublicIPAddress) {
	obj := serviceObject(svc)
	uid := names.ServiceUID(svc.UID)
	if lb.SKU == nil || string(ptr.Deref(lb.SKU.Name, "")) != "Service" {
		m.r.add(obj, podDoc, "load balancer %s is not of SKU Service", uid)
	}
	if c, _ := tagValue(lb.Tags, names.TagClusterName); !strings.EqualFold(c, m.cluster) {
		m.r.add(obj, podDoc, "load balancer %s is tagged %s=%q, want %q", uid, names.TagClusterName, c, m.cluster)
	}
	if lb.Properties != nil && !strings.EqualFold(string(ptr.Deref(lb.Properties.Scope, "")), "Public") {
		m.r.add(obj, podDoc, "load balancer %s has scope %q, want Public", uid, ptr.Deref(lb.Properties.Scope, ""))
	}
	fes := frontendsOf(lb)
	if len(fes) != 1 || !strings.EqualFold(ptr.Deref(fes[0].Name, ""), names.ServiceFrontend) {
		m.r.add(obj, podDoc, "load balancer %s has %d frontends, want exactly %q", uid, len(fes), names.ServiceFrontend)
	} else if pip != nil {
		p := fes[0].Properties
		if p == nil || p.PublicIPAddress == nil || !strings.EqualFold(ptr.Deref(p.PublicIPAddress.ID, ""), ptr.Deref(pip.ID, "")) {
			m.r.add(obj, podDoc, "frontend of load balancer %s does not use public IP %s", uid, ptr.Deref(pip.Name, ""))
		}
	}
	pools := poolsOf(lb)
	if len(pools) != 1 || !strings.EqualFold(ptr.Deref(pools[0].Name, ""), uid) {
		m.r.add(obj, podDoc, "load balancer %s has %d pools, want exactly one named %s", uid, len(pools), uid)
	} else {
		if n := len(entriesOf(pools[0])); n > 0 {
			m.r.add(obj, podDoc, "pool %s has %d addresses, want none (its members come from the service gateway)", uid, n)
		}
		m.checkDrainPeriod(obj, uid, pools[0])
	}
	if n := len(probesOf(lb)); n > 0 {
		m.r.add(obj, podDoc, "load balancer %s has %d probes, want none", uid, n)
	}
	idle := int32(podDefaultIdle)
	if v, ok := svc.Annotations[podIdleAnnotation]; ok {
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		idle = int32(n)
	}
	want := map[string]wantRule{}
	for _, p := range svc.Spec.Ports {
		proto := protoOf(p)
		w := wantRule{name: names.ServiceRule(proto, p.Port), protocol: string(proto), feport: p.Port, beport: backendPort(p),
			frontend: names.ServiceFrontend, pool: uid}
		if proto == v1.ProtocolTCP {
			w.tcpReset, w.idle = ptr.To(true), ptr.To(idle)
		}
		want[lower(w.name)] = w
	}
	compareRules(m.r, obj, uid, rulesOf(lb), want, nil, ruleDocs{extra: podDoc, diff: podDoc, caller: "port"})
}

// checkDrainPeriod: the Service's pool carries the configured drain
// period, as the pools of node mode do.
func (m *podMode) checkDrainPeriod(obj, uid string, p *armnetwork.BackendAddressPool) {
	if got, want, wrong := drainPeriodWrong(m.s.Config, p); wrong {
		m.r.add(obj, drainPeriodDoc,
			"pool %s has drainPeriodInSeconds %d, want %d (loadBalancerBackendPoolDrainPeriodInSeconds; 0: unset)", uid, got, want)
	}
}

func (m *podMode) checkRegistration(svc *v1.Service, gs *armnetwork.ServiceGatewayService) {
	obj := serviceObject(svc)
	uid := names.ServiceUID(svc.UID)
	p := gs.Properties
	if p == nil {
		m.r.add(obj, podDoc, "gateway service %s has no properties", uid)
		return
	}
	if t := ptr.Deref(p.ServiceType, ""); !strings.EqualFold(string(t), "Inbound") {
		m.r.add(obj, podDoc, "gateway service %s is %s, want Inbound", uid, t)
	}
	ok := len(p.LoadBalancerBackendPools) == 1 && p.LoadBalancerBackendPools[0] != nil
	if ok {
		id := ptr.Deref(p.LoadBalancerBackendPools[0].ID, "")
		ok = strings.EqualFold(names.ChildName(id), uid) && parentLB(id) == uid
	}
	if !ok {
		m.r.add(obj, podDoc, "gateway service %s does not point at exactly the pool %s of load balancer %s", uid, uid, uid)
	}
}

// checkLeftovers (container-load-balancer.md, Restarts and leftovers):
// gateway services named by a UID, and <uid> load balancers (SKU Service)
// and <uid>-pip public IPs with the cluster's tag, belong to a Service
// that wants a load balancer.
func (m *podMode) checkLeftovers(gwServices map[string]*armnetwork.ServiceGatewayService) {
	doc := "container-load-balancer.md#restarts-and-leftovers"
	for name := range gwServices {
		if names.IsUID(name) && !m.uids[name] {
			m.r.add("service gateway "+names.ServiceGateway, doc, "holds service %s of no LoadBalancer Service: it should have been removed", name)
		}
	}
	for name, lb := range m.lbs {
		c, _ := tagValue(lb.Tags, names.TagClusterName)
		if names.IsUID(name) && lb.SKU != nil && string(ptr.Deref(lb.SKU.Name, "")) == "Service" && strings.EqualFold(c, m.cluster) && !m.uids[name] {
			m.r.add(lbObject(name), doc, "belongs to no LoadBalancer Service: it should have been deleted")
		}
	}
	for name, pip := range m.pips {
		c, _ := tagValue(pip.Tags, names.TagClusterName)
		if uid, ok := names.UIDOfServicePublicIP(name); ok && strings.EqualFold(c, m.cluster) && !m.uids[uid] {
			m.r.add("public IP "+name, doc, "belongs to no LoadBalancer Service: it should have been deleted")
		}
	}
}

// addTo files uid under addr and loc.
func addTo(m map[string]map[string]map[string]bool, addr, loc, uid string) {
	if m[addr] == nil {
		m[addr] = map[string]map[string]bool{}
	}
	if m[addr][loc] == nil {
		m[addr][loc] = map[string]bool{}
	}
	m[addr][loc][uid] = true
}

// checkAddresses (container-load-balancer.md, Pods and nodes): each ready
// endpoint's pod IP, filed under its node's InternalIP of the same family
// (the smallest), names its Service, and nothing else names a Service azlb
// owns. An address wanted under two nodes is held back: not judged.
func (m *podMode) checkAddresses() {
	if m.s.Gateway == nil {
		return
	}
	nodes := map[string]*v1.Node{}
	for _, n := range m.s.Nodes {
		nodes[n.Name] = n
	}
	uidOf := map[string]string{} // ns/name -> uid of served Services
	for _, svc := range m.s.Services {
		if uid := names.ServiceUID(svc.UID); m.served[uid] {
			uidOf[svc.Namespace+"/"+svc.Name] = uid
		}
	}
	want := map[string]map[string]map[string]bool{} // addr -> location -> uids
	for _, sl := range m.s.Slices {
		uid := uidOf[sl.Namespace+"/"+sl.Labels[discoveryv1.LabelServiceName]]
		if uid == "" || sl.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			n := nodes[*ep.NodeName]
			if n == nil {
				continue // waits for its node
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				loc := smallestInternalIP(n, ip.Is4())
				if loc == "" {
					continue
				}
				addTo(want, ip.String(), loc, uid)
			}
		}
	}
	got := map[string]map[string]map[string]bool{} // addr -> location -> uids
	for _, l := range m.s.Gateway.Locations {
		loc := canonical(ptr.Deref(l.AddressLocation, ""))
		for _, a := range l.Addresses {
			if a == nil {
				continue
			}
			addr := canonical(ptr.Deref(a.Address, ""))
			for _, s := range a.Services {
				if s == nil || !names.IsUID(*s) {
					continue
				}
				addTo(got, addr, loc, lower(*s))
			}
		}
	}
	obj := "service gateway " + names.ServiceGateway
	doc := "container-load-balancer.md#pods-and-nodes"
	addrs := map[string]bool{}
	for a := range want {
		addrs[a] = true
	}
	for a := range got {
		addrs[a] = true
	}
	for _, a := range sortedKeys(addrs) {
		if len(want[a]) > 1 {
			continue // wanted under two nodes: held back
		}
		w, g := m.flatten(want[a]), m.flatten(got[a])
		if w != g {
			m.r.add(obj, doc, "address %s is %s, want %s", a, orNone(g), orNone(w))
		}
	}
}

// flatten renders location -> services as "services under location".
func (m *podMode) flatten(locs map[string]map[string]bool) string {
	var out []string
	for loc, uids := range locs {
		var u []string
		for id := range uids {
			if k := m.keys[id]; k != "" {
				id = k
			}
			u = append(u, id)
		}
		sort.Strings(u)
		out = append(out, fmt.Sprintf("%s under %s", strings.Join(u, ","), loc))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

func smallestInternalIP(n *v1.Node, v4 bool) string {
	var best netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != v1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil || ip.Is4() != v4 {
			continue
		}
		if !best.IsValid() || ip.Less(best) {
			best = ip
		}
	}
	if !best.IsValid() {
		return ""
	}
	return best.String()
}
