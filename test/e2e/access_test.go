package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/accesscontrol"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// TestAccessControl is docs/security-groups.md end to end, with real TCP
// through the emulator's data plane, which like Azure lets a flow reach a
// node only when the NSG on its subnet allows it: a public Service is
// unreachable while no controller writes its rule and reachable once one
// does; loadBalancerSourceRanges lets in exactly its sources; an invalid
// range fails closed with its event; a deleted Service's rules go.
func TestAccessControl(t *testing.T) {
	ctx := context.Background()
	public, nodes := testutil.LoopbackNet(t), testutil.LoopbackNet(t)
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String()}, nil, devenv.WithNetwork(devenv.NodeNetwork(nodes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	notThrottled(t, env)
	names := []string{"acl-n1", "acl-n2"}
	for i, name := range names {
		createNode(t, name, testutil.Nth(nodes, i+1).String(), nil)
	}
	ns := createNamespace(t)
	internet, allowed, other := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")

	// A Service on port P: its nodes serve P (floating IP: the flow reaches
	// the node at the Service port) and answer the probe on its node port.
	serve := func(name string, ranges []string, ann map[string]string) (netip.AddrPort, string) {
		t.Helper()
		ingress := testutil.Nth(public, len(name)) // a distinct address per Service name length
		svc := loadBalancerService(ns, name, int32(testutil.FreePort(t, ingress)))
		svc.Spec.LoadBalancerSourceRanges = ranges
		svc.Annotations = ann
		created, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Gone whatever happened, so that it never joins another test's
		// load balancer: deleted, and its finalizer dropped should no
		// controller run any more.
		t.Cleanup(func() {
			deleteService(t, ns, name)
			_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
				_, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			if s, err := suite.cs.CoreV1().Services(ns).Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				s.Finalizers = nil
				_, _ = suite.cs.CoreV1().Services(ns).Update(context.Background(), s, metav1.UpdateOptions{})
			}
		})
		port := uint16(created.Spec.Ports[0].Port)
		for i, n := range names {
			testutil.StartBackend(t, n, netip.AddrPortFrom(testutil.Nth(nodes, i+1), port))
			testutil.StartBackend(t, n, netip.AddrPortFrom(testutil.Nth(nodes, i+1), uint16(created.Spec.Ports[0].NodePort)))
		}
		ip := ingressIP(t, ns, name)
		return netip.AddrPortFrom(netip.MustParseAddr(ip), port), ip
	}
	reaches := func(src netip.Addr, to netip.AddrPort) bool {
		name, err := testutil.HelloFrom(src, to, 2*time.Second)
		return err == nil && strings.HasPrefix(name, "acl-n")
	}
	// eventuallyReach waits until the data plane serves the frontend to
	// src (members probed up, rules written).
	eventuallyReach := func(what string, src netip.Addr, to netip.AddrPort) {
		t.Helper()
		eventually(t, 60*time.Second, what, func(context.Context) (bool, error) { return reaches(src, to), nil })
	}
	// neverReaches checks that src stays out while the data plane serves
	// the frontend to someone else (so the refusal is the NSG's).
	neverReaches := func(what string, src netip.Addr, to netip.AddrPort) {
		t.Helper()
		for range 5 {
			if reaches(src, to) {
				t.Fatalf("%s: %s reached %s", what, src, to)
			}
		}
	}
	hasEvent := func(name, reason, text string) func(context.Context) (bool, error) {
		return serviceEvent(ns, name, reason, text)
	}
	probedUp := func(context.Context) (bool, error) {
		st, _ := env.Emulator().DataPlaneStatus()
		for _, r := range st.Rules {
			for _, m := range r.Members {
				if !m.Eligible {
					return false, nil
				}
			}
		}
		return len(st.Rules) > 0, nil
	}

	// Before: a controller that writes no security rule (as azlb did
	// before issue 25). The Service gets its IP and healthy probes, and is
	// unreachable: Azure's DenyAllInBound.
	a := startController(t, "a", writeConfigFor(t, env, map[string]any{"securityGroupName": ""}), false)
	web, _ := serve("web", nil, nil)
	eventually(t, 60*time.Second, "web's nodes probed up", probedUp)
	eventually(t, 30*time.Second, "the SecurityGroupNotConfigured event", hasEvent("web", "SecurityGroupNotConfigured", "securityGroupName"))
	neverReaches("no rule", internet, web)
	a.stop()

	// After: the controller writes the rule; Internet gets in.
	startController(t, "b", writeConfigFor(t, env, nil), false)
	eventuallyReach("web reachable from Internet once its rule is written", internet, web)

	// Source ranges: exactly the listed source.
	restricted, _ := serve("restricted", []string{allowed.String() + "/32"}, nil)
	eventuallyReach("restricted reachable from its range", allowed, restricted)
	neverReaches("restricted", internet, restricted)
	neverReaches("restricted", other, restricted)

	// An invalid range fails closed: the valid one still gets in, nobody
	// else does, and the event names the value. (The API server refuses
	// such a value in spec.loadBalancerSourceRanges; the annotation is
	// azlb's to check.)
	typo, typoIP := serve("typo-range", nil, map[string]string{accesscontrol.KeyAllowedIPRanges: allowed.String() + "/32,127.0.0.1/24"})
	eventually(t, 30*time.Second, "the InvalidSourceRanges event", hasEvent("typo-range", "InvalidSourceRanges", `"127.0.0.1/24"`))
	eventuallyReach("typo-range reachable from its valid range", allowed, typo)
	neverReaches("typo-range", internet, typo)
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	sg, err := clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
	if err != nil {
		t.Fatal(err)
	}
	denied := false
	for _, r := range sg.Properties.SecurityRules {
		if *r.Name == "k8s-azure-lb_deny-all_IPv4" && r.Properties.DestinationAddressPrefix != nil && *r.Properties.DestinationAddressPrefix == typoIP {
			denied = true
		}
	}
	if !denied {
		t.Errorf("no deny-all rule for %s", typoIP)
	}
	if !reaches(internet, web) {
		t.Errorf("web is no longer reachable from Internet")
	}

	// Deleted Services leave no rule behind (while the controller runs:
	// it removes their finalizers).
	for _, name := range []string{"web", "restricted", "typo-range"} {
		deleteService(t, ns, name)
	}
	eventually(t, 60*time.Second, "every rule of the deleted Services gone", func(ctx context.Context) (bool, error) {
		sg, err := clients.SecurityGroup.Get(ctx, devenv.ResourceGroup, devenv.SecurityGroupName)
		if err != nil {
			return false, err
		}
		for _, r := range sg.Properties.SecurityRules {
			if strings.HasPrefix(*r.Name, "k8s-azure-lb") {
				return false, nil
			}
		}
		return true, nil
	})
}
