package provider

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// Issue 27 item 2: Azure's internal load balancer does not carry floating
// IP on its IPv6 frontend (ARM accepts the rule, the data path drops it),
// so an internal Service's IPv6 rules have floating IP off and send to the
// NodePort, as the Azure cloud provider writes them. IPv4 and public rules
// keep the Service's setting.

const ilbSubnet = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"

// dualStackService is default/<name> with TCP 80 (node port 30080) and UDP
// 53 (node port 30053), both families.
func dualStackService(name, uid string, ann map[string]string) *v1.Service {
	svc := testService(name, uid, ann, 80)
	svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053})
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	return svc
}

// rulesOfFamily builds the Service's rules of one family.
func rulesOfFamily(t *testing.T, svc *v1.Service, fam v1.IPFamily) []*armnetwork.LoadBalancingRule {
	t.Helper()
	spec := mustParse(t, svc)
	fe := frontendInput{family: fam, subnetID: ilbSubnet}
	if !spec.Internal {
		fe = frontendInput{family: fam, publicIPID: "pip-" + string(fam)}
	}
	st, err := buildServiceLBState(desiredInput{svc: svc, spec: spec, lb: testLB, frontend: fe, poolName: names.ClusterPool("kubernetes", fam)})
	if err != nil {
		t.Fatal(err)
	}
	return st.rules
}

// floatingAndBackend is "<rule name without the frontend>:<floating
// IP>/<backend port>" of every rule, in order.
func floatingAndBackend(svc *v1.Service, rules []*armnetwork.LoadBalancingRule) string {
	var out []string
	for _, r := range rules {
		p := r.Properties
		s := "on"
		if !ptr.Deref(p.EnableFloatingIP, false) {
			s = "off"
		}
		name := strings.TrimPrefix(ptr.Deref(r.Name, ""), names.FrontendBase(svc)+"-")
		out = append(out, name+":"+s+"/"+strconv.Itoa(int(ptr.Deref(p.BackendPort, -1))))
	}
	return strings.Join(out, " ")
}

func TestInternalIPv6RulesHaveFloatingIPOff(t *testing.T) {
	internal := map[string]string{annotations.KeyInternal: "true"}
	tests := []struct {
		name    string
		ann     map[string]string
		fam     v1.IPFamily
		want    string
		haPorts bool
		noFloat bool
	}{
		{name: "internal IPv6: floating IP off, NodePort", ann: internal, fam: v1.IPv6Protocol,
			want: "TCP-80-IPv6:off/30080 UDP-53-IPv6:off/30053"},
		{name: "internal IPv4: unchanged", ann: internal, fam: v1.IPv4Protocol,
			want: "TCP-80:on/80 UDP-53:on/53"},
		{name: "public IPv6: unchanged (Azure's documented exception)", fam: v1.IPv6Protocol,
			want: "TCP-80-IPv6:on/80 UDP-53-IPv6:on/53"},
		{name: "public IPv4: unchanged", fam: v1.IPv4Protocol,
			want: "TCP-80:on/80 UDP-53:on/53"},
		{name: "internal IPv6 with floating IP off asked for: the same", noFloat: true, ann: internal, fam: v1.IPv6Protocol,
			want: "TCP-80-IPv6:off/30080 UDP-53-IPv6:off/30053"},
		{name: "internal IPv4 with floating IP off asked for: NodePort", noFloat: true, ann: internal, fam: v1.IPv4Protocol,
			want: "TCP-80:off/30080 UDP-53:off/30053"},
		{name: "HA ports keep the Service's floating IP on IPv6 too", haPorts: true, ann: internal, fam: v1.IPv6Protocol,
			want: "HA-IPv6:on/0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			for k, v := range tc.ann {
				ann[k] = v
			}
			if tc.noFloat {
				ann[annotations.KeyDisableFloatingIP] = "true"
			}
			if tc.haPorts {
				ann[annotations.KeyHAPorts] = "true"
			}
			svc := dualStackService("db", "ffffffff-0000-0000-0000-000000000027", ann)
			if got := floatingAndBackend(svc, rulesOfFamily(t, svc, tc.fam)); got != tc.want {
				t.Errorf("rules %s, want %s", got, tc.want)
			}
		})
	}
}

// Against the emulator: a dual-stack internal Service gets its IPv6 rules
// with floating IP off and the NodePort, a resync writes nothing, and a
// rule an earlier release wrote with floating IP on is rewritten in place.
// The emulator's data plane (Azure's view) never holds azlb's IPv6 rule as
// one Azure would drop for floating IP.
func TestInternalDualStackServiceIPv6RuleAgainstEmulator(t *testing.T) {
	env := testutil.StartEmulator(t, emulator.Options{DataPlane: true}, nil)
	clients := testutil.Clients(t, env, azure.ClientOptions{})
	p := newProvider(t, env.Config, clients, record.NewFakeRecorder(100))
	ctx := context.Background()
	svc := dualStackService("db", "ffffffff-0000-0000-0000-000000000028", map[string]string{annotations.KeyInternal: "true"})
	node := testNode("n1", "10.240.0.4")
	node.Status.Addresses = append(node.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: "fd00:10::4"})
	nodes := []*v1.Node{node}
	if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	const want = "TCP-80:on/80 UDP-53:on/53 TCP-80-IPv6:off/30080 UDP-53-IPv6:off/30053"
	get := func() *armnetwork.LoadBalancer {
		t.Helper()
		lb, err := clients.LoadBalancer.Get(ctx, devenv.ResourceGroup, "kubernetes-internal")
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		return lb
	}
	lb := get()
	if got := floatingAndBackend(svc, lb.Properties.LoadBalancingRules); got != want {
		t.Fatalf("rules %s, want %s", got, want)
	}
	st, _ := env.Emulator().DataPlaneStatus()
	if len(st.Rules) != 4 {
		t.Fatalf("data plane rules %+v, want 4", st.Rules)
	}
	for _, r := range st.Rules {
		if r.Reason == dataplane.UnservedInternalIPv6FloatingIP {
			t.Errorf("rule %s is one Azure drops (%s)", r.ID, r.Reason)
		}
	}

	// A resync costs no write.
	env.Emulator().ResetRequests()
	if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("resync: %v", err)
	}
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != "GET" {
			t.Errorf("resync wrote %s %s", r.Method, r.Path)
		}
	}

	// The IPv6 rules as an earlier release wrote them: floating IP on, the
	// Service port. Azure drops them; a reconcile rewrites them in place.
	for _, r := range lb.Properties.LoadBalancingRules {
		if strings.HasSuffix(ptr.Deref(r.Name, ""), "-IPv6") {
			r.Properties.EnableFloatingIP = ptr.To(true)
			r.Properties.BackendPort = r.Properties.FrontendPort
		}
	}
	if _, err := clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes-internal", *lb, ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatalf("write the old rules: %v", err)
	}
	// The data plane applies a write asynchronously (listeners on a
	// loopback IPv6 route take a moment): wait for it.
	dropped := 0
	testutil.Poll(t, 10*time.Second, "the 2 IPv6 rules held as dropped for floating IP", func() bool {
		st, _ = env.Emulator().DataPlaneStatus()
		dropped = 0
		for _, r := range st.Rules {
			if r.Reason == dataplane.UnservedInternalIPv6FloatingIP {
				dropped++
			}
		}
		return dropped == 2
	})
	p = newProvider(t, env.Config, clients, record.NewFakeRecorder(100)) // a restarted controller: nothing cached
	if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer after the old rules: %v", err)
	}
	if got := floatingAndBackend(svc, get().Properties.LoadBalancingRules); got != want {
		t.Fatalf("rules %s, want %s", got, want)
	}
}
