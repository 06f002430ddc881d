package verify

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
)

// Egress through the service gateway (docs/container-load-balancer.md,
// Egress). The names are the documentation's.
const (
	egressDoc       = "container-load-balancer.md#egress"
	egressLabel     = "kubernetes.azure.com/service-egress-gateway"
	egressFinalizer = "servicegateway.azure.com/pod-cleanup"
	egressTag       = "k8s-azure-service-egress-gateway"
)

// egressIdentity is the documented rule for an identity: 1 to 73 lower-case
// letters, digits, '-', '_' or '.', starting with a letter or digit and
// ending with one or '_'; not default-natgw; not shaped like a UID.
var egressIdentity = regexp.MustCompile(`^[a-z0-9]([a-z0-9_.-]*[a-z0-9_])?$`)

func validEgressIdentity(id string) bool {
	return len(id) <= 73 && egressIdentity.MatchString(id) && !strings.EqualFold(id, names.DefaultOutboundService) && !names.IsUID(id)
}

// collectEgress reads the labelled pods and the NAT gateways of the
// resource group.
func collectEgress(ctx context.Context, cfg *config.Config, clients *azure.Clients, kube kubernetes.Interface, g *Gateway) error {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: egressLabel})
	if err != nil {
		return fmt.Errorf("list egress pods: %w", err)
	}
	for i := range pods.Items {
		g.EgressPods = append(g.EgressPods, &pods.Items[i])
	}
	if clients.NatGateway != nil {
		nats, err := clients.NatGateway.List(ctx, cfg.ResourceGroup)
		if err != nil && azure.Classify(err) != azure.ClassStale {
			return fmt.Errorf("list NAT gateways in %s: %w", cfg.ResourceGroup, err)
		}
		g.NatGateways = nats
	}
	return nil
}

func egressActive(p *v1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed && p.Spec.NodeName != ""
}

// checkEgress judges the egress identities: each with a running pod has its
// public IP(s) (IPv6 too when a node has an IPv6 InternalIP), its NAT
// gateway (StandardV2, attached to the gateway, on those public IPs), its
// Outbound service on that NAT gateway, the pod finalizer on its pods and
// their addresses; identities without pods have nothing left that azlb
// made (the cluster's and the identity's tags); default-natgw is not
// judged.
func (m *podMode) checkEgress() {
	g := m.s.Gateway
	if g == nil {
		return
	}
	members := m.egressMembers()
	v6 := false
	nodes := map[string]*v1.Node{}
	for _, n := range m.s.Nodes {
		nodes[n.Name] = n
		if smallestInternalIP(n, false) != "" {
			v6 = true
		}
	}
	outbound := map[string]string{} // identity -> NAT gateway id
	for _, s := range g.Services {
		if s.Properties != nil && ptr.Deref(s.Properties.ServiceType, "") == armnetwork.ServiceTypeOutbound {
			outbound[ptr.Deref(s.Name, "")] = ptr.Deref(s.Properties.PublicNatGatewayID, "")
		}
	}
	nats, owned := m.egressOwned()
	gw := "service gateway " + names.ServiceGateway
	for _, id := range sortedKeys(members) {
		m.checkEgressNAT(id, nats[id], m.egressPIPs(id, v6))
		if natID, ok := outbound[id]; !ok {
			m.r.add(gw, egressDoc, "has no Outbound service %s for egress identity %s", id, id)
		} else if !strings.HasSuffix(lower(natID), "/natgateways/"+id) {
			m.r.add(gw, egressDoc, "Outbound service %s is on NAT gateway %s, want %s", id, orNone(natID), id)
		}
	}
	m.checkEgressAddresses(members, owned, nodes)
	// Leftovers of identities without pods.
	for _, id := range sortedKeys(owned) {
		if members[id] != nil {
			continue
		}
		if nats[id] != nil {
			m.r.add("NAT gateway "+id, egressDoc, "belongs to egress identity %s, which has no pod: it should have been deleted", id)
		}
		for _, pn := range []string{id + "-pip", id + "-pip-v6"} {
			if m.pips[pn] != nil {
				m.r.add("public IP "+pn, egressDoc, "belongs to egress identity %s, which has no pod: it should have been deleted", id)
			}
		}
		if _, ok := outbound[id]; ok {
			m.r.add(gw, egressDoc, "holds Outbound service %s of an egress identity without pods: it should have been removed", id)
		}
	}
}

// egressMembers are the running pods of each valid identity; each must
// carry the finalizer.
func (m *podMode) egressMembers() map[string][]*v1.Pod {
	members := map[string][]*v1.Pod{}
	for _, p := range m.s.Gateway.EgressPods {
		id := p.Labels[egressLabel]
		if !validEgressIdentity(id) || !egressActive(p) {
			continue
		}
		members[id] = append(members[id], p)
		if !slices.Contains(p.Finalizers, egressFinalizer) {
			m.r.add("pod "+p.Namespace+"/"+p.Name, egressDoc, "has no finalizer %s", egressFinalizer)
		}
	}
	return members
}

// egressOwned are the NAT gateways by name and the identities with
// resources azlb made (the cluster's and the identity's tags).
func (m *podMode) egressOwned() (map[string]*armnetwork.NatGateway, map[string]bool) {
	nats := map[string]*armnetwork.NatGateway{}
	owned := map[string]bool{}
	for _, n := range m.s.Gateway.NatGateways {
		name := ptr.Deref(n.Name, "")
		nats[name] = n
		c, _ := tagValue(n.Tags, names.TagClusterName)
		if id, _ := tagValue(n.Tags, egressTag); id == name && strings.EqualFold(c, m.cluster) {
			owned[name] = true
		}
	}
	for name, pip := range m.pips {
		c, _ := tagValue(pip.Tags, names.TagClusterName)
		if id, ok := tagValue(pip.Tags, egressTag); ok && strings.EqualFold(c, m.cluster) && (name == id+"-pip" || name == id+"-pip-v6") {
			owned[id] = true
		}
	}
	return nats, owned
}

// egressPIPs checks the identity's public IPs and returns their ids.
func (m *podMode) egressPIPs(id string, v6 bool) []string {
	want := []string{id + "-pip"}
	if v6 {
		want = append(want, id+"-pip-v6")
	}
	var ids []string
	for _, pn := range want {
		pip := m.pips[pn]
		if pip == nil {
			m.r.add("public IP "+pn, egressDoc, "is missing for egress identity %s", id)
			continue
		}
		if sku := string(ptr.Deref(ptr.Deref(pip.SKU, armnetwork.PublicIPAddressSKU{}).Name, "")); sku != "StandardV2" {
			m.r.add("public IP "+pn, egressDoc, "has SKU %s, want StandardV2", orNone(sku))
		}
		ids = append(ids, lower(ptr.Deref(pip.ID, "")))
	}
	return ids
}

// checkEgressNAT checks the identity's NAT gateway: StandardV2, attached,
// on the identity's public IPs (wantIDs).
func (m *podMode) checkEgressNAT(id string, nat *armnetwork.NatGateway, wantIDs []string) {
	natObj := "NAT gateway " + id
	if nat == nil {
		m.r.add(natObj, egressDoc, "is missing for egress identity %s", id)
		return
	}
	if sku := string(ptr.Deref(ptr.Deref(nat.SKU, armnetwork.NatGatewaySKU{}).Name, "")); sku != "StandardV2" {
		m.r.add(natObj, egressDoc, "has SKU %s, want StandardV2", orNone(sku))
	}
	var got []string
	attached := false
	if nat.Properties != nil {
		for _, p := range nat.Properties.PublicIPAddresses {
			got = append(got, lower(ptr.Deref(p.ID, "")))
		}
		if r := nat.Properties.ServiceGateway; r != nil && strings.HasSuffix(lower(ptr.Deref(r.ID, "")), "/servicegateways/"+names.ServiceGateway) {
			attached = true
		}
	}
	if !attached {
		m.r.add(natObj, egressDoc, "is not attached to service gateway %s", names.ServiceGateway)
	}
	slices.Sort(got)
	slices.Sort(wantIDs)
	if !slices.Equal(got, wantIDs) {
		m.r.add(natObj, egressDoc, "holds public IPs %v, want %v", got, wantIDs)
	}
}

// checkEgressAddresses: each member's pod IP under its node's location
// names the identity; no address names an identity azlb owns that does
// not want it.
func (m *podMode) checkEgressAddresses(members map[string][]*v1.Pod, owned map[string]bool, nodes map[string]*v1.Node) {
	want := map[string]string{} // "loc addr" -> identity
	for id, ps := range members {
		for _, p := range ps {
			n := nodes[p.Spec.NodeName]
			if n == nil {
				continue
			}
			for _, a := range p.Status.PodIPs {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil {
					continue
				}
				if loc := smallestInternalIP(n, ip.Is4()); loc != "" {
					want[loc+" "+ip.String()] = id
				}
			}
		}
	}
	got := map[string][]string{} // "loc addr" -> outbound identities azlb owns or wants
	for _, l := range m.s.Gateway.Locations {
		loc := canonical(ptr.Deref(l.AddressLocation, ""))
		for _, a := range l.Addresses {
			if a == nil {
				continue
			}
			k := loc + " " + canonical(ptr.Deref(a.Address, ""))
			for _, s := range a.Services {
				if n := ptr.Deref(s, ""); owned[n] || members[n] != nil {
					got[k] = append(got[k], n)
				}
			}
		}
	}
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	for _, k := range sortedKeys(keys) {
		if w, g := want[k], strings.Join(got[k], ","); w != g {
			m.r.add("service gateway "+names.ServiceGateway, egressDoc, "address %s names egress identity %s, want %s", k, orNone(g), orNone(w))
		}
	}
}
