package emulator_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

const wait = 10 * time.Second

func networkID(typ, name string) string {
	return "/subscriptions/" + devenv.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup + "/providers/Microsoft.Network/" + typ + "/" + name
}

// securityRule is an inbound Tcp rule from src to dst on dport (source
// port "*").
func securityRule(name string, prio int32, access armnetwork.SecurityRuleAccess, src, dst, dport string) *armnetwork.SecurityRule {
	return &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: &armnetwork.SecurityRulePropertiesFormat{
		Priority: to.Ptr(prio), Access: to.Ptr(access), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound),
		Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP), SourceAddressPrefix: to.Ptr(src), SourcePortRange: to.Ptr("*"),
		DestinationAddressPrefix: to.Ptr(dst), DestinationPortRange: to.Ptr(dport)}}
}

func allowRule(name string, prio int32, src, dst, dport string) *armnetwork.SecurityRule {
	return securityRule(name, prio, armnetwork.SecurityRuleAccessAllow, src, dst, dport)
}

func denyRule(name string, prio int32, src, dst, dport string) *armnetwork.SecurityRule {
	return securityRule(name, prio, armnetwork.SecurityRuleAccessDeny, src, dst, dport)
}

// putNSG writes network security group name with rules and returns its id.
func putNSG(t *testing.T, clients *azure.Clients, name string, rules ...*armnetwork.SecurityRule) string {
	t.Helper()
	c, err := armnetwork.NewSecurityGroupsClient(devenv.SubscriptionID, clients.Credential(), clients.ARMClientOptions("nsg"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.BeginCreateOrUpdate(context.Background(), devenv.ResourceGroup, name, armnetwork.SecurityGroup{
		Location: to.Ptr(devenv.Location), Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: rules}}, nil)
	if err != nil {
		t.Fatalf("NSG %s: %v", name, err)
	}
	sg, err := p.PollUntilDone(context.Background(), nil)
	if err != nil {
		t.Fatalf("NSG %s: %v", name, err)
	}
	return *sg.ID
}

// putVNet writes virtual network name whose address space and only subnet
// "nodes" are prefix, with the security group nsg on the subnet (none when
// ""). It returns the virtual network's id.
func putVNet(t *testing.T, clients *azure.Clients, name string, prefix netip.Prefix, nsg string) string {
	t.Helper()
	c, err := armnetwork.NewVirtualNetworksClient(devenv.SubscriptionID, clients.Credential(), clients.ARMClientOptions("vnet"))
	if err != nil {
		t.Fatal(err)
	}
	sp := &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(prefix.String())}
	if nsg != "" {
		sp.NetworkSecurityGroup = &armnetwork.SecurityGroup{ID: to.Ptr(nsg)}
	}
	p, err := c.BeginCreateOrUpdate(context.Background(), devenv.ResourceGroup, name, armnetwork.VirtualNetwork{
		Location: to.Ptr(devenv.Location), Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(prefix.String())}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: sp}}}}, nil)
	if err != nil {
		t.Fatalf("vnet %s: %v", name, err)
	}
	v, err := p.PollUntilDone(context.Background(), nil)
	if err != nil {
		t.Fatalf("vnet %s: %v", name, err)
	}
	return *v.ID
}

// secureNodes puts the nodes' addresses in a virtual network of their own
// (<name>-vnet) whose subnet has the security group <name>-nsg with rules;
// it returns the virtual network's id.
func secureNodes(t *testing.T, clients *azure.Clients, name string, nodes netip.Prefix, rules ...*armnetwork.SecurityRule) string {
	t.Helper()
	return putVNet(t, clients, name+"-vnet", nodes, putNSG(t, clients, name+"-nsg", rules...))
}

// nsgRig is a Standard load balancer "lb" with one rule (TCP, floating IP
// off) to one member, the HTTP backend "node" at nodes.10 in the virtual
// network vnetID, probed by TCP on the backend port.
type nsgRig struct {
	t       *testing.T
	env     *devenv.Env
	clients *azure.Clients
	nodes   netip.Prefix
	member  netip.Addr
	port    uint16
	fe      netip.AddrPort
}

func newNSGRig(t *testing.T, o emulator.Options) *nsgRig {
	t.Helper()
	public := testutil.LoopbackNet(t)
	o.DataPlane, o.PublicIPv4CIDR = true, public.String()
	env := testutil.StartEmulator(t, o, nil)
	r := &nsgRig{t: t, env: env, clients: testutil.Clients(t, env, azure.ClientOptions{Source: "nsg-test"}), nodes: testutil.LoopbackNet(t)}
	r.member = testutil.Nth(r.nodes, 10)
	r.port = testutil.FreePort(t, r.member)
	testutil.StartBackend(t, "node", netip.AddrPortFrom(r.member, r.port))
	ip := testutil.Nth(public, 1) // the range's first address: the first public IP
	r.fe = netip.AddrPortFrom(ip, testutil.FreePort(t, ip))
	return r
}

// putLB writes the load balancer with its member in vnetID.
func (r *nsgRig) putLB(vnetID string) {
	r.t.Helper()
	ctx := context.Background()
	pips, err := armnetwork.NewPublicIPAddressesClient(devenv.SubscriptionID, r.clients.Credential(), r.clients.ARMClientOptions("pip"))
	if err != nil {
		r.t.Fatal(err)
	}
	pp, err := pips.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, "pip", armnetwork.PublicIPAddress{
		Location: to.Ptr(devenv.Location), SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	pip, err := pp.PollUntilDone(ctx, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	if *pip.Properties.IPAddress != r.fe.Addr().String() {
		r.t.Fatalf("public IP %s, want %s", *pip.Properties.IPAddress, r.fe.Addr())
	}
	lbID := networkID("loadBalancers", "lb")
	_, err = r.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "lb", armnetwork.LoadBalancer{
		Location: to.Ptr(devenv.Location), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
				PublicIPAddress: &armnetwork.PublicIPAddress{ID: pip.ID}}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
				LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("node"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress: to.Ptr(r.member.String()), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)}}}}}}},
			Probes: []*armnetwork.Probe{{Name: to.Ptr("probe"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr(int32(r.port)), IntervalInSeconds: to.Ptr[int32](5), ProbeThreshold: to.Ptr[int32](1)}}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{Name: to.Ptr("rule"), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr(int32(r.fe.Port())), BackendPort: to.Ptr(int32(r.port)),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/fe")},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(lbID + "/backendAddressPools/pool")},
				Probe:                   &armnetwork.SubResource{ID: to.Ptr(lbID + "/probes/probe")}}}},
		},
	}, "")
	if err != nil {
		r.t.Fatal(err)
	}
}

// status is the data plane's status as GET /_emulator/dataplane serves it.
func (r *nsgRig) status() dataplane.Status {
	r.t.Helper()
	resp, err := r.env.HTTPClient().Get(r.env.URL + "/_emulator/dataplane")
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st dataplane.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		r.t.Fatalf("GET /_emulator/dataplane: %s, %v", resp.Status, err)
	}
	return st
}

func (r *nsgRig) memberStatus() dataplane.MemberStatus {
	r.t.Helper()
	st := r.status()
	if len(st.Rules) != 1 || len(st.Rules[0].Members) != 1 {
		r.t.Fatalf("status %+v", st)
	}
	return st.Rules[0].Members[0]
}

// helloFrom sends GET / on a new connection from src ("" lets the system
// choose: 127.0.0.1).
func helloFrom(src netip.Addr, fe netip.AddrPort) (string, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	if src.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: tr}).Get("http://" + fe.String() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// readDenied connects to fe and reads: a denied connection is reset
// before a byte is relayed (the reset may already fail the connect).
func readDenied(fe netip.AddrPort) (int, error) {
	c, err := net.DialTimeout("tcp4", fe.String(), 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(wait))
	return c.Read(make([]byte, 1))
}

// A Standard load balancer's member without a security group gets
// nothing, probes included; a security group on its subnet lets probes in
// by default and clients as its rules say, evaluated on the client's
// address as the data plane sees it (a bound loopback address, a service
// tag, the Internet); rule changes apply to new flows at once.
func TestDataPlaneSecurityGroupsGuardTheMembers(t *testing.T) {
	frontDoor := netip.MustParsePrefix("127.1.2.0/24")
	clk := clocktesting.NewFakeClock(time.Now())
	r := newNSGRig(t, emulator.Options{Clock: clk, ServiceTags: map[string][]netip.Prefix{"AzureFrontDoor.Backend": {frontDoor}}})
	vnet := putVNet(t, r.clients, "lo-vnet", r.nodes, "")
	r.putLB(vnet)

	testutil.Poll(t, wait, "a probe denied", func() bool { return r.memberStatus().Probes >= 1 })
	if m := r.memberStatus(); m.Eligible || !strings.Contains(m.LastProbeError, dataplane.DeniedNoNSG) {
		t.Fatalf("a member without security group: %+v", m)
	}
	if d := r.status().Denials("", dataplane.DeniedNoNSG); d.Probes < 1 {
		t.Fatalf("no-NSG denials %+v", d)
	}

	// A security group on the subnet: the default rules let probes in and
	// keep clients out.
	nsg := putNSG(t, r.clients, "lo-nsg")
	putVNet(t, r.clients, "lo-vnet", r.nodes, nsg)
	testutil.Poll(t, wait, "the probe's ticker", clk.HasWaiters)
	clk.Step(5 * time.Second)
	testutil.Poll(t, wait, "the member probed up", func() bool { return r.memberStatus().Eligible })
	if m := r.memberStatus(); m.SubnetNSG != nsg || m.NICNSG != "" {
		t.Fatalf("member %+v", m)
	}
	if n, err := readDenied(r.fe); n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a client DenyAllInBound refuses: %d bytes, %v; want a reset", n, err)
	}
	if d := r.status().Denials(nsg, "DenyAllInBound"); d.Flows != 1 {
		t.Fatalf("DenyAllInBound denials %+v", r.status().Denied)
	}

	// Rules written one by one (the securityRules child) apply at once.
	rules, err := armnetwork.NewSecurityRulesClient(devenv.SubscriptionID, r.clients.Credential(), r.clients.ARMClientOptions("rules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range []*armnetwork.SecurityRule{
		allowRule("allow-web", 200, "Internet", r.member.String(), strconv.Itoa(int(r.port))),
		denyRule("deny-frontdoor", 100, "AzureFrontDoor.Backend", "*", "*"),
	} {
		p, err := rules.BeginCreateOrUpdate(context.Background(), devenv.ResourceGroup, "lo-nsg", *rule.Name, *rule, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// A plain client on the host (source 127.0.0.1) is the Internet.
	if name, err := helloFrom(netip.Addr{}, r.fe); err != nil || name != "node" {
		t.Fatalf("a client on the host: %q, %v", name, err)
	}
	// A client bound to a front door address is denied by the tag's rule.
	if _, err := helloFrom(netip.MustParseAddr("127.1.2.3"), r.fe); err == nil {
		t.Fatal("a front door client got through deny-frontdoor")
	}
	// A client inside the virtual network is not the Internet, but
	// AllowVnetInBound lets it in.
	if name, err := helloFrom(testutil.Nth(r.nodes, 200), r.fe); err != nil || name != "node" {
		t.Fatalf("a client in the virtual network: %q, %v", name, err)
	}
	st := r.status()
	if d := st.Denials(nsg, "deny-frontdoor"); d.Flows != 1 {
		t.Fatalf("deny-frontdoor denials %+v", st.Denied)
	}
	if rs := st.Rules[0]; rs.Counters.NewFlows != 2 || rs.Counters.Denied != 2 || rs.Members[0].Denied != 2 {
		t.Fatalf("rule counters %+v, member %+v", rs.Counters, rs.Members[0])
	}

	// Removing the allow rule: established flows continue, new ones fail.
	k, name, err := testutil.Dial(r.fe, 2*time.Second)
	if err != nil || name != "node" {
		t.Fatalf("dial: %q, %v", name, err)
	}
	defer k.Close()
	dp, err := rules.BeginDelete(context.Background(), devenv.ResourceGroup, "lo-nsg", "allow-web", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := helloFrom(netip.Addr{}, r.fe); err == nil {
		t.Fatal("a new flow got through after allow-web was deleted")
	}
	if got, err := k.Get(); err != nil || got != "node" {
		t.Fatalf("the established flow after allow-web was deleted: %q, %v", got, err)
	}
}

// A deny rule on the node's address below 65001 stops the health probes
// (they come from AzureLoadBalancer, 168.63.129.16); a security group on
// the member's NIC counts as well as one on its subnet.
func TestDataPlaneProbesPassTheNICSecurityGroup(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	r := newNSGRig(t, emulator.Options{Clock: clk})
	vnet := putVNet(t, r.clients, "lo-vnet", r.nodes, "")
	nsg := putNSG(t, r.clients, "nic-nsg",
		allowRule("allow-web", 100, "Internet", r.member.String(), strconv.Itoa(int(r.port))),
		denyRule("deny-node", 4000, "*", r.member.String(), "*"))
	nics, err := armnetwork.NewInterfacesClient(devenv.SubscriptionID, r.clients.Credential(), r.clients.ARMClientOptions("nic"))
	if err != nil {
		t.Fatal(err)
	}
	np, err := nics.BeginCreateOrUpdate(context.Background(), devenv.ResourceGroup, "node-nic", armnetwork.Interface{
		Location: to.Ptr(devenv.Location), Properties: &armnetwork.InterfacePropertiesFormat{
			NetworkSecurityGroup: &armnetwork.SecurityGroup{ID: to.Ptr(nsg)},
			IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: to.Ptr(vnet + "/subnets/nodes")}, PrivateIPAddress: to.Ptr(r.member.String()),
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := np.PollUntilDone(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	r.putLB(vnet)
	testutil.Poll(t, wait, "a probe", func() bool { return r.memberStatus().Probes >= 1 })
	if m := r.memberStatus(); m.Eligible || m.NICNSG != nsg || m.SubnetNSG != "" || !strings.Contains(m.LastProbeError, "deny-node") {
		t.Fatalf("member behind deny-node: %+v", m)
	}
	if d := r.status().Denials(nsg, "deny-node"); d.Probes != 1 || d.Flows != 0 {
		t.Fatalf("deny-node denials %+v", d)
	}

	// Without deny-node the default AllowAzureLoadBalancerInBound lets the
	// next probe in.
	putNSG(t, r.clients, "nic-nsg", allowRule("allow-web", 100, "Internet", r.member.String(), strconv.Itoa(int(r.port))))
	testutil.Poll(t, wait, "the probe's ticker", clk.HasWaiters)
	clk.Step(5 * time.Second)
	testutil.Poll(t, wait, "the member probed up", func() bool { return r.memberStatus().Eligible })
	if name, err := helloFrom(netip.Addr{}, r.fe); err != nil || name != "node" {
		t.Fatalf("a client: %q, %v", name, err)
	}
	if d := r.status().Denials(nsg, "deny-node"); d.Probes != 0 {
		t.Fatalf("the counter of a deleted rule lives on: %+v", r.status().Denied)
	}
}
