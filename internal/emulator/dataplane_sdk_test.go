package emulator_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

// A load balancer written through the SDK carries traffic: members probed
// up take new flows, a pool PUT with AdminState Down takes a member out for
// new flows at once, the control API shows the counters, and deleting the
// load balancer stops the listener.
func TestDataPlaneFollowsTheLoadBalancer(t *testing.T) {
	ctx := context.Background()
	lo := testutil.LoopbackNet(t)
	env := testutil.StartEmulator(t, emulator.Options{DataPlane: true, PublicIPv4CIDR: lo.String()}, nil)
	clients := testutil.Clients(t, env, azure.ClientOptions{Source: "dataplane-test"})
	nodes := testutil.LoopbackNet(t)
	port := testutil.FreePort(t, testutil.Nth(nodes, 1))
	testutil.StartBackend(t, "node-1", netip.AddrPortFrom(testutil.Nth(nodes, 1), port))
	testutil.StartBackend(t, "node-2", netip.AddrPortFrom(testutil.Nth(nodes, 2), port))

	pips, err := armnetwork.NewPublicIPAddressesClient(devenv.SubscriptionID, clients.Credential(), clients.ARMClientOptions("pip"))
	if err != nil {
		t.Fatal(err)
	}
	pp, err := pips.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, "pip", armnetwork.PublicIPAddress{
		Location: to.Ptr(devenv.Location), SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pip, err := pp.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr(*pip.Properties.IPAddress)
	if !lo.Contains(ip) {
		t.Fatalf("public IP %s is not from the configured loopback range %s", ip, lo)
	}
	fe := netip.AddrPortFrom(ip, testutil.FreePort(t, ip))

	lbID := "/subscriptions/" + devenv.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup + "/providers/Microsoft.Network/loadBalancers/lb"
	// A Standard load balancer is closed by default: the nodes' subnet gets
	// a security group that lets clients reach the backend port.
	vnetID := secureNodes(t, clients, "lo", nodes, allowRule("allow-web", 100, "Internet", nodes.String(), strconv.Itoa(int(port))))
	entries := func(down string) []*armnetwork.LoadBalancerBackendAddress {
		var out []*armnetwork.LoadBalancerBackendAddress
		for i, name := range []string{"node-1", "node-2"} {
			st := armnetwork.LoadBalancerBackendAddressAdminStateNone
			if name == down {
				st = armnetwork.LoadBalancerBackendAddressAdminStateDown
			}
			out = append(out, &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress: to.Ptr(testutil.Nth(nodes, i+1).String()), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)}, AdminState: to.Ptr(st)}})
		}
		return out
	}
	_, err = clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "lb", armnetwork.LoadBalancer{
		Location: to.Ptr(devenv.Location), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
				PublicIPAddress: &armnetwork.PublicIPAddress{ID: pip.ID}}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
				LoadBalancerBackendAddresses: entries("")}}},
			Probes: []*armnetwork.Probe{{Name: to.Ptr("probe"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr(int32(port)), IntervalInSeconds: to.Ptr[int32](5), ProbeThreshold: to.Ptr[int32](1)}}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("rule"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr(int32(fe.Port())), BackendPort: to.Ptr(int32(port)),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/fe")},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID + "/backendAddressPools/pool")},
				Probe:                   &armnetwork.SubResource{ID: to.Ptr(lbID + "/probes/probe")},
				EnableTCPReset:          to.Ptr(true)}}},
		},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	status := func() dataplane.RuleStatus {
		st, ok := env.Emulator().DataPlaneStatus()
		if !ok || len(st.Rules) != 1 {
			t.Fatalf("data plane status %+v (on: %v)", st, ok)
		}
		return st.Rules[0]
	}
	testutil.Poll(t, 10*time.Second, "both members eligible", func() bool {
		st := status()
		return st.Served && len(st.Members) == 2 && st.Members[0].Eligible && st.Members[1].Eligible
	})
	if r := status(); r.Frontend != fe.String() || r.BackendPort != int(port) || !r.TCPReset || r.IdleTimeout != "4m0s" ||
		r.Probe == nil || r.Probe.Interval != "5s" || r.Probe.Threshold != 1 {
		t.Fatalf("rule as served: %+v", r)
	}
	seen := map[string]bool{}
	for i := 0; i < 40 && len(seen) < 2; i++ {
		name, err := testutil.Hello(fe, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seen[name] = true
	}
	if len(seen) != 2 {
		t.Fatalf("new flows reached %v", seen)
	}

	if _, err := clients.BackendPool.CreateOrUpdate(ctx, devenv.ResourceGroup, "lb", "pool", armnetwork.BackendAddressPool{
		Name: to.Ptr("pool"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: entries("node-1")}}, ""); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "node-1 Down in the data plane", func() bool { return !status().Members[0].Eligible })
	for range 20 {
		if name, err := testutil.Hello(fe, 2*time.Second); err != nil || name != "node-2" {
			t.Fatalf("a new flow after node-1 went Down: %q, %v", name, err)
		}
	}

	resp, err := env.HTTPClient().Get(env.URL + "/_emulator/dataplane")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body dataplane.Status
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("control API: %s, %v", resp.Status, err)
	}
	if len(body.Rules) != 1 || body.Rules[0].Counters.NewFlows < 22 || !strings.HasSuffix(body.Rules[0].ID, "/loadBalancingRules/rule") ||
		body.Rules[0].Members[0].AdminState != "Down" {
		t.Fatalf("control API rules %+v", body.Rules)
	}

	if err := clients.LoadBalancer.Delete(ctx, devenv.ResourceGroup, "lb"); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "no rule served", func() bool {
		st, _ := env.Emulator().DataPlaneStatus()
		return len(st.Rules) == 0
	})
	if c, err := net.DialTimeout("tcp4", fe.String(), time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the frontend of a deleted load balancer accepts connections")
	}
}

func TestDataPlaneOptions(t *testing.T) {
	if _, err := emulator.Start(emulator.Options{DataPlane: true, PublicIPv4CIDR: "20.40.0.0/16"}, "", true); err == nil ||
		!strings.Contains(err.Error(), "127.0.0.0/8") {
		t.Fatalf("a data plane on a public range: %v", err)
	}
	srv, err := emulator.Start(emulator.Options{}, "", true)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Get(srv.URL() + "/_emulator/dataplane")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the data plane endpoint without a data plane: %s", resp.Status)
	}
	if _, ok := srv.Emulator().DataPlaneStatus(); ok {
		t.Fatal("a data plane runs though none was asked for")
	}
}
