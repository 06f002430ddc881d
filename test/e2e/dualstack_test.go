package e2e

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// TestDualStack is a dual-stack internal Service end to end (issue 27):
// the dual-stack API server accepts it (ipFamilyPolicy RequireDualStack),
// azlb gives it an IPv4 and an IPv6 address from the nodes' subnet, and
// both answer an HTTP GET through the emulator's data plane, served by a
// node. Its IPv6 rule has floating IP off and targets the node port (Azure
// carries no floating IP on an internal IPv6 frontend). The network
// security group decides as Azure's would: a client in the virtual network
// gets in on both families (AllowVnetInBound), one outside does not; with
// source ranges and deny-all, azlb's IPv4 rules keep other hosts of the
// virtual network out while its IPv6 rules, as docs/security-groups.md
// says, neither open nor close anything.
//
// It needs devenv.LoopbackIPv6CIDR routed to the loopback device
// (hack/ipv6-loopback.sh, which make test-e2e runs): without it the test
// fails, saying so.
func TestDualStack(t *testing.T) {
	ctx := context.Background()
	nodes4, nodes6, public := testutil.LoopbackNet(t), testutil.LoopbackNet6(t), testutil.LoopbackNet(t)
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String()}, nil,
		devenv.WithNetwork(devenv.DualStackNodeNetwork(nodes4, nodes6)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	notThrottled(t, env)
	nodeNames := []string{"ds-n1", "ds-n2"}
	for i, name := range nodeNames {
		createDualStackNode(t, name, testutil.Nth(nodes4, i+1), testutil.Nth(nodes6, i+1))
	}
	ns := createNamespace(t)
	startController(t, "ds", writeConfigFor(t, env, nil), false)

	const port = 8080
	svc := loadBalancerService(ns, "web", port)
	svc.Annotations = map[string]string{annotations.KeyInternal: "true"}
	svc.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	created, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the API server refused a dual-stack Service (is it dual-stack? devenv.StartKube): %v", err)
	}
	t.Cleanup(func() { removeService(t, ns, "web") })
	if len(created.Spec.ClusterIPs) != 2 {
		t.Fatalf("cluster IPs %v, want one per family", created.Spec.ClusterIPs)
	}
	nodePort := uint16(created.Spec.Ports[0].NodePort)
	// Each node serves the Service port on its IPv4 address (floating IP
	// on), and the node port on both (the IPv6 rule's target, and the
	// probes').
	for i, n := range nodeNames {
		testutil.StartBackend(t, n, netip.AddrPortFrom(testutil.Nth(nodes4, i+1), port))
		testutil.StartBackend(t, n, netip.AddrPortFrom(testutil.Nth(nodes4, i+1), nodePort))
		testutil.StartBackendAny(t, n, netip.AddrPortFrom(testutil.Nth(nodes6, i+1), nodePort))
	}

	v4, v6 := dualStackIngress(t, ns, "web")
	if !nodes4.Contains(v4) || !nodes6.Contains(v6) {
		t.Fatalf("ingress %s and %s, want internal addresses of the subnet (%s, %s)", v4, v6, nodes4, nodes6)
	}
	fe4, fe6 := netip.AddrPortFrom(v4, port), netip.AddrPortFrom(v6, port)
	// Clients: two hosts of the virtual network, and one outside it (the
	// Internet for IPv4, ::1 for IPv6), per family.
	in4, other4, out4 := testutil.Nth(nodes4, 200), testutil.Nth(nodes4, 201), netip.MustParseAddr("127.0.0.1")
	in6, other6, out6 := testutil.Nth(nodes6, 200), testutil.Nth(nodes6, 201), netip.IPv6Loopback()
	reaches := func(src netip.Addr, to netip.AddrPort) bool {
		name, err := testutil.HelloFromAny(src, to, 2*time.Second)
		return err == nil && strings.HasPrefix(name, "ds-n")
	}
	eventuallyReach := func(what string, src netip.Addr, to netip.AddrPort) {
		t.Helper()
		eventually(t, 60*time.Second, what, func(context.Context) (bool, error) { return reaches(src, to), nil })
	}
	neverReaches := func(what string, src netip.Addr, to netip.AddrPort) {
		t.Helper()
		for range 5 {
			if reaches(src, to) {
				t.Fatalf("%s: %s reached %s", what, src, to)
			}
		}
	}

	// Both addresses answer a client of the virtual network.
	eventuallyReach("the IPv4 address answers", in4, fe4)
	eventuallyReach("the IPv6 address answers", in6, fe6)

	// The IPv6 rule: floating IP off, to the node port; served, its
	// members the nodes' IPv6 addresses, probed up.
	clients := armClients(t, env)
	lb, err := clients.LoadBalancer.Get(ctx, devenv.ResourceGroup, env.Config.DefaultLoadBalancerName()+names.InternalLBSuffix)
	if err != nil {
		t.Fatal(err)
	}
	var rule4, rule6 *armnetwork.LoadBalancingRule
	for _, r := range lb.Properties.LoadBalancingRules {
		if names.HasSuffixFold(*r.Name, names.IPv6Suffix) {
			rule6 = r
		} else {
			rule4 = r
		}
	}
	if rule4 == nil || rule6 == nil {
		t.Fatalf("rules %v, want one per family", lb.Properties.LoadBalancingRules)
	}
	if p := rule6.Properties; ptr.Deref(p.EnableFloatingIP, true) || ptr.Deref(p.BackendPort, 0) != int32(nodePort) {
		t.Errorf("IPv6 rule %s: floating IP %v, backend port %d; want off, the node port %d",
			*rule6.Name, ptr.Deref(p.EnableFloatingIP, true), ptr.Deref(p.BackendPort, 0), nodePort)
	}
	if p := rule4.Properties; !ptr.Deref(p.EnableFloatingIP, false) || ptr.Deref(p.BackendPort, 0) != port {
		t.Errorf("IPv4 rule %s: floating IP %v, backend port %d; want on, the Service port %d",
			*rule4.Name, ptr.Deref(p.EnableFloatingIP, false), ptr.Deref(p.BackendPort, 0), port)
	}
	st6 := dataPlaneRule(t, env, *rule6.ID)
	if !st6.Served || st6.FloatingIP || st6.Frontend != fe6.String() || st6.BackendPort != int(nodePort) || st6.Counters.NewFlows == 0 {
		t.Errorf("the IPv6 rule in the data plane: %+v", st6)
	}
	var members []string
	for _, m := range st6.Members {
		members = append(members, m.Address)
		if !m.Eligible || m.Health != "Up" {
			t.Errorf("IPv6 member %+v: want probed up (IPv6 probes pass AllowAzureLoadBalancerInBound)", m)
		}
	}
	slices.Sort(members)
	if want := []string{testutil.Nth(nodes6, 1).String(), testutil.Nth(nodes6, 2).String()}; !slices.Equal(members, want) {
		t.Errorf("IPv6 members %v, want the nodes' IPv6 addresses %v", members, want)
	}

	// Network security: an internal Service gets no rule of azlb's, the
	// virtual network is let in by AllowVnetInBound, anyone else is
	// denied (DenyAllInBound), on both families.
	if rules := azlbSecurityRules(t, clients); len(rules) != 0 {
		t.Errorf("security rules %v for an internal Service without sources, want none", rules)
	}
	neverReaches("from outside the virtual network (IPv4)", out4, fe4)
	neverReaches("from outside the virtual network (IPv6)", out6, fe6)
	if st := dataPlaneRule(t, env, *rule6.ID); st.Counters.Denied == 0 {
		t.Errorf("the IPv6 rule denied nothing from outside the virtual network: %+v", st.Counters)
	}

	// Source ranges with deny-all: both families get their allow and
	// deny-all rules. IPv4 (floating IP on): the NSG sees the frontend
	// address, so the rules decide: the listed client only. IPv6 (floating
	// IP off): the NSG sees the node's address and node port, which the
	// rules (the frontend's address) never match: the virtual network
	// stays in through AllowVnetInBound (docs/security-groups.md,
	// Destinations).
	cur, err := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.LoadBalancerSourceRanges = []string{netip.PrefixFrom(in4, 32).String(), netip.PrefixFrom(in6, 128).String()}
	cur.Annotations[annotations.KeyDenyAllExceptRanges] = "true"
	if _, err := suite.cs.CoreV1().Services(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "allow and deny-all rules for both addresses", func(context.Context) (bool, error) {
		var allow6, deny6, deny4 bool
		for _, r := range azlbSecurityRules(t, clients) {
			p := r.Properties
			dsts := []string{ptr.Deref(p.DestinationAddressPrefix, "")}
			for _, d := range p.DestinationAddressPrefixes {
				dsts = append(dsts, *d)
			}
			switch {
			case *p.Access == armnetwork.SecurityRuleAccessAllow && slices.Contains(dsts, v6.String()):
				allow6 = ptr.Deref(p.SourceAddressPrefix, "") == netip.PrefixFrom(in6, 128).String()
			case *r.Name == "k8s-azure-lb_deny-all_IPv6":
				deny6 = slices.Contains(dsts, v6.String())
			case *r.Name == "k8s-azure-lb_deny-all_IPv4":
				deny4 = slices.Contains(dsts, v4.String())
			}
		}
		return allow6 && deny6 && deny4, nil
	})
	eventually(t, 30*time.Second, "another host of the virtual network kept off the IPv4 address", func(context.Context) (bool, error) {
		return !reaches(other4, fe4), nil
	})
	neverReaches("another host of the virtual network, deny-all (IPv4)", other4, fe4)
	eventuallyReach("the listed IPv4 client", in4, fe4)
	eventuallyReach("the listed IPv6 client", in6, fe6)
	eventuallyReach("another host of the virtual network on the IPv6 address (AllowVnetInBound; deny-all cannot match)", other6, fe6)
	neverReaches("from outside the virtual network, with ranges (IPv6)", out6, fe6)
}

// createDualStackNode registers a Ready node with an IPv4 and an IPv6
// InternalIP (IPv4 first, as a dual-stack kubelet reports them).
func createDualStackNode(t *testing.T, name string, ip4, ip6 netip.Addr) {
	t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	n.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: ip4.String()}, {Type: v1.NodeInternalIP, Address: ip6.String()},
		{Type: v1.NodeHostName, Address: name}}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if _, err := suite.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// removeService deletes a Service and makes sure it is gone, so that it
// never joins another test's load balancer: its finalizer is dropped
// should no controller run any more.
func removeService(t *testing.T, ns, name string) {
	deleteService(t, ns, name)
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if s, err := suite.cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
		s.Finalizers = nil
		_, _ = suite.cs.CoreV1().Services(ns).Update(context.Background(), s, metav1.UpdateOptions{})
	}
}

// dualStackIngress waits until the Service reports an IPv4 and an IPv6
// ingress address.
func dualStackIngress(t *testing.T, ns, name string) (v4, v6 netip.Addr) {
	t.Helper()
	eventually(t, 60*time.Second, "an IPv4 and an IPv6 ingress address of "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		svc, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		v4, v6 = netip.Addr{}, netip.Addr{}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil && a.Is4() {
				v4 = a
			} else if err == nil {
				v6 = a
			}
		}
		return v4.IsValid() && v6.IsValid(), nil
	})
	return v4, v6
}

// armClients is an ARM client set for env, closed when the test ends.
func armClients(t *testing.T, env *devenv.Env) *azure.Clients {
	t.Helper()
	c, err := env.Clients(context.Background(), azure.ClientOptions{Source: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// dataPlaneRule is the data plane's status of one rule.
func dataPlaneRule(t *testing.T, env *devenv.Env, id string) dataplane.RuleStatus {
	t.Helper()
	st, _ := env.Emulator().DataPlaneStatus()
	for _, r := range st.Rules {
		if strings.EqualFold(r.ID, id) {
			return r
		}
	}
	t.Fatalf("the data plane has no rule %s", id)
	return dataplane.RuleStatus{}
}

// azlbSecurityRules are the rules azlb owns in the subnet's NSG.
func azlbSecurityRules(t *testing.T, clients *azure.Clients) []*armnetwork.SecurityRule {
	t.Helper()
	sg, err := clients.SecurityGroup.Get(context.Background(), devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	var out []*armnetwork.SecurityRule
	for _, r := range sg.Properties.SecurityRules {
		if strings.HasPrefix(*r.Name, "k8s-azure-lb") {
			out = append(out, r)
		}
	}
	return out
}
