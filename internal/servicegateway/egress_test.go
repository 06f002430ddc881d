package servicegateway

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// egressPod creates a running pod on node with the egress label (identity
// "" for none) and IPs.
func (h *harness) egressPod(name, identity, node string, ips ...string) *v1.Pod {
	h.t.Helper()
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uuid.NewUUID(), Labels: map[string]string{}},
		Spec:       v1.PodSpec{NodeName: node},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	if identity != "" {
		p.Labels[EgressLabel] = identity
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, v1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	created, err := h.cs.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return created
}

func (h *harness) getPod(name string) *v1.Pod {
	p, err := h.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// deletePod marks a pod deleted as the API server does with finalizers.
func (h *harness) deletePod(name string) {
	h.t.Helper()
	p := h.getPod(name)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	if _, err := h.cs.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) natExists(id string) bool {
	_, err := h.clients.NatGateway.Get(context.Background(), devenv.ResourceGroup, id)
	return err == nil
}

func (h *harness) pipExists(name string) bool {
	_, err := h.clients.PublicIP.Get(context.Background(), devenv.ResourceGroup, name)
	return err == nil
}

func (h *harness) gatewayServices() []string {
	h.t.Helper()
	svcs, err := h.clients.ServiceGateway.GetServices(context.Background(), devenv.ResourceGroup, names.ServiceGateway)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, s := range svcs {
		out = append(out, *s.Name+":"+string(*s.Properties.ServiceType))
	}
	slices.Sort(out)
	return out
}

// An egress identity end to end against the emulator: the first pod
// creates the public IP, the NAT gateway (attached) and the Outbound
// service and registers its address; a pod backing an inbound Service too
// is one address with both; a restart writes nothing; a pod leaving has its
// address removed before its finalizer; the last one tears everything down
// in the gateway's order before its finalizer goes; default-natgw stays.
func TestEgressAgainstTheEmulator(t *testing.T) {
	h, env := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	h.start()
	h.node("n1", "10.240.0.4")
	h.node("n2", "10.240.0.5")
	web := h.service("default", "web")
	h.egressPod("p1", "team-a", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "p1 registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=team-a"})
	})
	if !h.natExists("team-a") || !h.pipExists("team-a-pip") || h.pipExists("team-a-pip-v6") {
		t.Fatalf("NAT gateway %v, public IP %v, IPv6 public IP %v", h.natExists("team-a"), h.pipExists("team-a-pip"), h.pipExists("team-a-pip-v6"))
	}
	if p := h.getPod("p1"); !slices.Contains(p.Finalizers, PodFinalizer) {
		t.Fatalf("p1 finalizers %v", p.Finalizers)
	}
	if got := h.gatewayServices(); !slices.Equal(got, []string{"default-natgw:Outbound", "team-a:Outbound"}) {
		t.Fatalf("gateway services %v", got)
	}

	// p2 egresses and backs web.
	h.egressPod("p2", "team-a", "n2", "10.244.1.10")
	h.slice(web, "a", discoveryv1.AddressTypeIPv4, readyOn("n2", "10.244.1.10"))
	if err := h.ensure(web); err != nil {
		t.Fatal(err)
	}
	both := strings.Join(slices.Sorted(slices.Values([]string{"team-a", uid(web)})), ",")
	want := []string{"10.240.0.4: 10.244.0.10=team-a", "10.240.0.5: 10.244.1.10=" + both}
	h.stepUntil(time.Second, "p2 registered with web", func() bool { return slices.Equal(gatewayAddresses(t, h.clients), want) })

	// Invalid and reserved identities get events and nothing in Azure.
	h.egressPod("bad", "Team_B!", "n1", "10.244.0.20")
	h.egressPod("reserved", "default-natgw", "n1", "10.244.0.21")
	testutil.Poll(t, waitFor, "egress label events", func() bool {
		return h.events.Count(EventInvalidEgressLabel) > 0 && h.events.Count(EventReservedEgressLabel) > 0
	})

	// A restart of the unchanged cluster writes nothing.
	h.idle()
	env.Emulator().ResetRequests()
	h.restart()
	h.idle()
	if w := armWrites(env.Emulator()); len(w) != 0 {
		t.Fatalf("the restart wrote %v", w)
	}

	// p1 leaves: its address goes, then its finalizer.
	h.deletePod("p1")
	h.stepUntil(time.Second, "p1 gone", func() bool { return h.getPod("p1") == nil })
	if got := gatewayAddresses(t, h.clients); !slices.Equal(got, want[1:]) {
		t.Fatalf("addresses after p1 left: %v", got)
	}

	// The last pod leaves: the identity is torn down in order, web stays.
	env.Emulator().ResetRequests()
	h.deletePod("p2")
	h.stepUntil(time.Second, "p2 gone", func() bool { return h.getPod("p2") == nil })
	if got := gatewayAddresses(t, h.clients); !slices.Equal(got, []string{"10.240.0.5: 10.244.1.10=" + uid(web)}) {
		t.Fatalf("addresses after the identity left: %v", got)
	}
	if h.natExists("team-a") || h.pipExists("team-a-pip") {
		t.Fatal("the NAT gateway or its public IP is left")
	}
	if got := h.gatewayServices(); !slices.Equal(got, slices.Sorted(slices.Values([]string{"default-natgw:Outbound", uid(web) + ":Inbound"}))) {
		t.Fatalf("gateway services %v", got)
	}
	var order []string
	for _, w := range armWrites(env.Emulator()) {
		switch {
		case strings.Contains(w, "updateAddressLocations"):
			order = append(order, "addresses")
		case strings.HasPrefix(w, http.MethodPut) && strings.Contains(w, "/natGateways/"):
			order = append(order, "detach")
		case strings.Contains(w, "updateServices"):
			order = append(order, "unregister")
		case strings.HasPrefix(w, http.MethodDelete) && strings.Contains(w, "/natGateways/"):
			order = append(order, "delete nat")
		case strings.HasPrefix(w, http.MethodDelete) && strings.Contains(w, "/publicIPAddresses/"):
			order = append(order, "delete pip")
		}
	}
	if !slices.Equal(order, []string{"addresses", "detach", "unregister", "delete nat", "delete pip"}) {
		t.Errorf("teardown order %v", order)
	}
}

// IPv6 nodes give the identity an IPv6 public IP too; a dual-stack pod is
// registered under both of its node's locations.
func TestEgressDualStack(t *testing.T) {
	h, _ := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	h.start()
	h.node("n1", "10.240.0.4", "fd00:10::4")
	h.egressPod("p1", "ds", "n1", "10.244.0.10", "fd00:244::10")
	h.stepUntil(time.Second, "dual-stack pod registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=ds", "fd00:10::4: fd00:244::10=ds"})
	})
	if !h.pipExists("ds-pip") || !h.pipExists("ds-pip-v6") {
		t.Fatal("missing IPv4 or IPv6 public IP")
	}
	h.deletePod("p1")
	h.stepUntil(time.Second, "identity gone", func() bool { return h.getPod("p1") == nil })
	if h.pipExists("ds-pip") || h.pipExists("ds-pip-v6") || h.natExists("ds") {
		t.Fatal("resources left")
	}
}

// Resources of an identity whose pods are gone while azlb was down are
// removed at start; the RP's default-natgw is left alone.
func TestEgressOrphansAtStart(t *testing.T) {
	h, _ := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	h.start()
	h.node("n1", "10.240.0.4")
	p := h.egressPod("p1", "gone", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=gone"})
	})
	h.idle()
	h.shutdown()
	// The pod disappears while azlb is down (force-deleted).
	if err := h.cs.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name); err != nil {
		t.Fatal(err)
	}
	h.lb = NewBalancer()
	h.start()
	h.stepUntil(time.Second, "orphan removed", func() bool {
		return !h.natExists("gone") && !h.pipExists("gone-pip") && len(gatewayAddresses(t, h.clients)) == 0
	})
	if got := h.gatewayServices(); !slices.Equal(got, []string{"default-natgw:Outbound"}) {
		t.Fatalf("gateway services %v", got)
	}
}

// The data plane: once its pod is registered, a pod's outbound flow leaves
// from its identity's public IP, as a loopback server sees it; after the
// identity is gone the pod has no route.
func TestEgressDataPlane(t *testing.T) {
	lo := testutil.LoopbackNet(t)
	h, env := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK, DataPlane: true, PublicIPv4CIDR: lo.String()})
	h.start()
	h.node("n1", "10.240.0.4")
	h.egressPod("p1", "dp", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "p1 registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=dp"})
	})
	pip, err := h.clients.PublicIP.Get(context.Background(), devenv.ResourceGroup, "dp-pip")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	seen := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		seen <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		_ = c.Close()
	}()
	pod := netip.MustParseAddr("10.244.0.10")
	c, err := env.Emulator().DialEgress(context.Background(), pod, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if got := <-seen; got != *pip.Properties.IPAddress {
		t.Fatalf("the server saw %s, want the identity's public IP %s", got, *pip.Properties.IPAddress)
	}
	h.deletePod("p1")
	h.stepUntil(time.Second, "identity gone", func() bool { return h.getPod("p1") == nil })
	if _, _, ok := env.Emulator().EgressSource(pod); ok {
		t.Error("the pod still has an outbound route")
	}
}

// A pod relabelled to another identity moves to it (the first identity,
// left without pods, is torn down) and keeps its finalizer; a pod whose
// label is removed leaves: its address goes, then its finalizer, and its
// last identity is torn down.
func TestEgressRelabel(t *testing.T) {
	h, env := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	h.start()
	h.node("n1", "10.240.0.4")
	h.egressPod("p1", "team-a", "n1", "10.244.0.10")
	h.stepUntil(time.Second, "p1 under team-a", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=team-a"})
	})
	relabel := func(value string) {
		p := h.getPod("p1")
		if value == "" {
			delete(p.Labels, EgressLabel)
		} else {
			p.Labels[EgressLabel] = value
		}
		if _, err := h.cs.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	relabel("team-b")
	h.stepUntil(time.Second, "p1 under team-b, team-a gone", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=team-b"}) && !h.natExists("team-a") && !h.pipExists("team-a-pip")
	})
	if p := h.getPod("p1"); !slices.Contains(p.Finalizers, PodFinalizer) {
		t.Fatalf("p1 lost its finalizer: %v", p.Finalizers)
	}
	// The address never named both identities (Azure refuses that:
	// MultipleOutboundServicesForAddress): team-b took it once team-a let
	// it go.
	for _, r := range env.Emulator().Requests() {
		if strings.HasSuffix(r.Path, "updateAddressLocations") && r.Status == http.StatusBadRequest {
			t.Fatalf("an address update was refused during the move: %+v", r)
		}
	}
	relabel("")
	h.stepUntil(time.Second, "p1 released, team-b gone", func() bool {
		p := h.getPod("p1")
		return p != nil && !slices.Contains(p.Finalizers, PodFinalizer) && len(gatewayAddresses(t, h.clients)) == 0 && !h.natExists("team-b")
	})
}

// A pod IP that is not an IP, or whose family its node has no InternalIP
// of, gets its event and is not registered; the pod's other IP is. When
// the node gains an IPv6 InternalIP, the identity gets its IPv6 public IP
// and the waiting address is registered.
func TestEgressPodAddressEvents(t *testing.T) {
	h, _ := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	h.start()
	h.node("n1", "10.240.0.4")
	h.egressPod("p1", "ev", "n1", "10.244.0.10", "fd00:244::10")
	h.egressPod("p2", "ev", "n1", "not-an-ip")
	h.stepUntil(time.Second, "p1's IPv4 address registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=ev"})
	})
	testutil.Poll(t, waitFor, "events", func() bool {
		return h.events.Count(EventNoNodeLocation) == 1 && h.events.Count(EventInvalidPodIP) == 1
	})
	if h.pipExists("ev-pip-v6") {
		t.Fatal("an IPv6 public IP without an IPv6 node")
	}
	n, err := h.cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00:10::4"})
	if _, err := h.cs.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.stepUntil(time.Second, "IPv6 address registered", func() bool {
		return slices.Equal(gatewayAddresses(t, h.clients), []string{"10.240.0.4: 10.244.0.10=ev", "fd00:10::4: fd00:244::10=ev"}) && h.pipExists("ev-pip-v6")
	})
}

// A dual-stack identity survives a restart without a write.
func TestEgressDualStackRestartWritesNothing(t *testing.T) {
	h, env := emulatorHarness(t, emulator.Options{ServiceGatewayPOSTStatus: emulator.SGWPostOK})
	h.start()
	h.node("n1", "10.240.0.4", "fd00:10::4")
	h.egressPod("p1", "ds", "n1", "10.244.0.10", "fd00:244::10")
	h.stepUntil(time.Second, "registered", func() bool { return len(gatewayAddresses(t, h.clients)) == 2 })
	h.idle()
	env.Emulator().ResetRequests()
	h.restart()
	h.idle()
	if w := armWrites(env.Emulator()); len(w) != 0 {
		t.Fatalf("the restart wrote %v", w)
	}
}
