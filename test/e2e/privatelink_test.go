package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/status"
	"github.com/azlb/azlb/internal/testutil"
)

const (
	plsPrefix       = annotations.Prefix + "azure-pls-"
	plsCreate       = plsPrefix + "create"
	plsIPCount      = plsPrefix + "ip-configuration-ip-address-count"
	plsIPAddress    = plsPrefix + "ip-configuration-ip-address"
	plsFQDNs        = plsPrefix + "fqdns"
	plsVisibility   = plsPrefix + "visibility"
	plsSecondLBName = "lb-two"
)

// TestPrivateLinkService publishes an internal Service through a Private
// Link Service, end to end through the real controller and the emulator's
// data plane: the PLS appears on the Service's frontend with the NAT ip
// configurations its annotations ask for (the NAT subnet's policy disabled
// first), and azlb status shows it; a private endpoint in a second
// virtual network (same subscription: approved at once) carries a TCP
// connection to a node, from the PLS's NAT address (the Service's
// loadBalancerSourceRanges admit only that address, so the consumer
// straight to the frontend is refused); a visibility change updates the
// PLS; deleting the Service with the approved connection deletes the
// connection, the PLS and the frontend; a Service moved to another load
// balancer (azure-load-balancer-configurations) gets its PLS moved, the old
// one deleted before the old frontend goes.
func TestPrivateLinkService(t *testing.T) {
	ctx := context.Background()
	public, nodeNet, linkNet := distinctLoopbackNets(t)
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String()}, nil, devenv.WithNetwork(devenv.NodeNetwork(nodeNet)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() }) // after the controller stops
	notThrottled(t, env)
	c := &dataPlaneCluster{env: env, public: public, addrs: map[string]netip.Addr{}}
	var agents []nodeagent.Node
	for i := range 2 {
		name, ip := fmt.Sprintf("pls-n%d", i+1), testutil.Nth(nodeNet, i+1)
		createNode(t, name, ip.String(), nil)
		c.nodes = append(c.nodes, name)
		c.addrs[name] = ip
		agents = append(agents, nodeagent.Node{Name: name, IPs: []string{ip.String()}})
	}
	runProxies(t, agents)
	startController(t, "a", writeConfigFor(t, env, map[string]any{
		"multipleStandardLoadBalancerConfigurations": []map[string]any{{"name": "kubernetes"}, {"name": plsSecondLBName}},
	}), false)
	c.ns = createNamespace(t)

	clients := armClients(t, env)
	opts := clients.ARMClientOptions("e2e-pls")
	plsc, err := armnetwork.NewPrivateLinkServicesClient(devenv.SubscriptionID, clients.Credential(), opts)
	if err != nil {
		t.Fatal(err)
	}
	pec, err := armnetwork.NewPrivateEndpointsClient(devenv.SubscriptionID, clients.Credential(), opts)
	if err != nil {
		t.Fatal(err)
	}
	consumerSubnet := consumerNetwork(t, clients, linkNet)
	getLB := func(t *testing.T, name string) *armnetwork.LoadBalancer {
		t.Helper()
		lb, err := clients.LoadBalancer.Get(context.Background(), devenv.ResourceGroup, name)
		if azure.Classify(err) == azure.ClassStale {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}

	nat := testutil.Nth(nodeNet, 200)
	port := int32(testutil.FreePort(t, testutil.Nth(linkNet, 1)))
	svc := loadBalancerService(c.ns, "api")
	svc.Spec.Ports = []v1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(port), Protocol: v1.ProtocolTCP}}
	svc.Spec.LoadBalancerSourceRanges = []string{nat.String() + "/32"}
	svc.Annotations = map[string]string{
		annotations.KeyInternal:                   "true",
		annotations.KeyLoadBalancerConfigurations: "kubernetes",
		plsCreate:    "true",
		plsIPCount:   "2",
		plsIPAddress: nat.String(),
		plsFQDNs:     "api.example.com",
	}
	c.createService(t, svc, c.nodes...)
	feAddr, err := netip.ParseAddr(ingressIP(t, c.ns, "api"))
	if err != nil {
		t.Fatal(err)
	}
	fe := netip.AddrPortFrom(feAddr, uint16(port))
	ilb := getLB(t, "kubernetes-internal")
	feID := frontendIDOf(t, ilb, feAddr)

	// The PLS on the frontend, with a static primary and a dynamic NAT ip
	// configuration in the cluster's subnet.
	pls := waitPLS(t, plsc, func(p *armnetwork.PrivateLinkService) bool { return plsFrontend(p) == strings.ToLower(feID) })
	name := *pls.Name
	if want := "pls-" + lastPathSegment(feID); name != want {
		t.Errorf("PLS %s: want the default name %s", name, want)
	}
	subnetID := strings.ToLower(ilbSubnetID())
	var gotCfgs []string
	for _, c := range pls.Properties.IPConfigurations {
		p := c.Properties
		gotCfgs = append(gotCfgs, fmt.Sprintf("%s primary=%v %s %q", *c.Name, *p.Primary, *p.PrivateIPAllocationMethod, deref(p.PrivateIPAddress)))
		if strings.ToLower(*p.Subnet.ID) != subnetID {
			t.Errorf("NAT ip configuration %s in subnet %s: want %s", *c.Name, *p.Subnet.ID, subnetID)
		}
	}
	slices.Sort(gotCfgs)
	wantCfgs := []string{
		fmt.Sprintf("%s-%s-dynamic-1 primary=false Dynamic \"\"", devenv.SubnetName, name),
		fmt.Sprintf("%s-%s-static-%s primary=true Static %q", devenv.SubnetName, name, nat, nat.String()),
	}
	if fmt.Sprint(gotCfgs) != fmt.Sprint(wantCfgs) {
		t.Errorf("NAT ip configurations %v: want %v", gotCfgs, wantCfgs)
	}
	// The NAT subnet's policy (Enabled in the seeded network, as in
	// Azure) was disabled first.
	snc, err := armnetwork.NewSubnetsClient(devenv.SubscriptionID, clients.Credential(), opts)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := snc.Get(ctx, devenv.ResourceGroup, devenv.VnetName, devenv.SubnetName, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pol := sn.Properties.PrivateLinkServiceNetworkPolicies; pol == nil || *pol != armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled {
		t.Errorf("subnet %s: privateLinkServiceNetworkPolicies %v, want Disabled", devenv.SubnetName, pol)
	}
	if tag := pls.Tags["k8s-azure-owner-service"]; tag == nil || *tag != c.ns+"/api" {
		t.Errorf("owner tag %v: want %s/api", tag, c.ns)
	}

	// A private endpoint in the consumer network: same subscription, so
	// its connection is approved at once.
	pe := createPrivateEndpoint(t, pec, "consumer-pe", consumerSubnet, *pls.ID)
	if len(pe.Properties.CustomDNSConfigs) != 1 || len(pe.Properties.CustomDNSConfigs[0].IPAddresses) != 1 {
		t.Fatalf("the endpoint's address is not in customDnsConfigs: %+v", pe.Properties.CustomDNSConfigs)
	}
	endpoint := netip.AddrPortFrom(netip.MustParseAddr(*pe.Properties.CustomDNSConfigs[0].IPAddresses[0]), uint16(port))
	waitPLS(t, plsc, func(p *armnetwork.PrivateLinkService) bool {
		return *p.Name == name && connectionStates(p) == "consumer-pe=Approved"
	})

	// azlb status shows the PLS, its NAT ip configurations and the
	// approved connection.
	snap, err := status.Collect(ctx, clients, devenv.ResourceGroup, devenv.ResourceGroup, suite.cs)
	if err != nil {
		t.Fatal(err)
	}
	if err := status.CollectPrivateLinks(ctx, clients, devenv.ResourceGroup, env.Config.ClusterName, snap); err != nil {
		t.Fatal(err)
	}
	var st strings.Builder
	if err := status.Render(&st, snap); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PRIVATE LINK SERVICE " + name + " (" + c.ns + "/api)", "frontend kubernetes-internal/" + lastPathSegment(feID),
		nat.String(), "(dynamic)", "api.example.com", "consumer-pe", "Approved"} {
		if !strings.Contains(st.String(), want) {
			t.Errorf("azlb status lacks %q:\n%s", want, st.String())
		}
	}
	t.Logf("azlb status:\n%s", st.String())

	// Through the endpoint: a node answers; the members see the NAT
	// address (the only source the Service admits). The client is outside
	// every virtual network (the emulator counts every virtual network's
	// space as VirtualNetwork, which the NSG's default rules let in), so
	// straight to the frontend it is refused.
	client := testutil.Nth(public, 250)
	if got := c.tcpAnswers(t, client, endpoint, 10); len(got) == 0 {
		t.Fatal("no answer through the private endpoint")
	}
	if name, err := testutil.HelloFrom(client, fe, time.Second); err == nil {
		t.Fatalf("the consumer reached the frontend %s straight (answered by %s): only the NAT address %s is admitted, so the endpoint's traffic was not translated", fe, name, nat)
	}

	// Visibility: the PLS follows the annotation.
	updateService(t, c.ns, "api", func(s *v1.Service) { s.Annotations[plsVisibility] = "*" })
	waitPLS(t, plsc, func(p *armnetwork.PrivateLinkService) bool {
		v := p.Properties.Visibility
		return *p.Name == name && v != nil && len(v.Subscriptions) == 1 && deref(v.Subscriptions[0]) == "*"
	})

	// A second Service, on "kubernetes", moved to lb-two: its PLS moves,
	// the old one deleted before its frontend leaves the load balancer.
	mv := loadBalancerService(c.ns, "mover")
	mv.Spec.Ports = []v1.ServicePort{{Name: "http", Port: port + 1, TargetPort: intstr.FromInt32(port + 1), Protocol: v1.ProtocolTCP}}
	mv.Annotations = map[string]string{
		annotations.KeyInternal:                   "true",
		annotations.KeyLoadBalancerConfigurations: "kubernetes",
		plsCreate: "true",
	}
	c.createService(t, mv, c.nodes...)
	ingressIP(t, c.ns, "mover")
	onLB := func(lb string) func(p *armnetwork.PrivateLinkService) bool {
		prefix := strings.ToLower("/loadBalancers/" + lb + "-internal/frontendIPConfigurations/")
		return func(p *armnetwork.PrivateLinkService) bool {
			return p.Tags["k8s-azure-owner-service"] != nil && *p.Tags["k8s-azure-owner-service"] == c.ns+"/mover" && strings.Contains(plsFrontend(p), prefix)
		}
	}
	oldPLS := waitPLS(t, plsc, onLB("kubernetes"))
	env.Emulator().ResetRequests()
	updateService(t, c.ns, "mover", func(s *v1.Service) {
		s.Annotations[annotations.KeyLoadBalancerConfigurations] = plsSecondLBName
	})
	newPLS := waitPLS(t, plsc, onLB(plsSecondLBName))
	eventually(t, 60*time.Second, "mover's frontend gone from kubernetes-internal", func(context.Context) (bool, error) {
		lb := getLB(t, "kubernetes-internal")
		return lb != nil && len(lb.Properties.FrontendIPConfigurations) == 1, nil
	})
	if n := countPLS(t, plsc, func(p *armnetwork.PrivateLinkService) bool {
		return p.Tags["k8s-azure-owner-service"] != nil && *p.Tags["k8s-azure-owner-service"] == c.ns+"/mover"
	}); n != 1 {
		t.Errorf("%d PLSs of mover after the move (new one %s): want 1, the old one deleted", n, *newPLS.ID)
	}
	assertDeletedBefore(t, env, *oldPLS.Name, "kubernetes-internal")

	// Deleting the Service with an approved connection: the connection,
	// the PLS and the frontend go.
	deleteService(t, c.ns, "api")
	eventually(t, 60*time.Second, "PLS "+name+" deleted", func(ctx context.Context) (bool, error) {
		_, err := plsc.Get(ctx, devenv.ResourceGroup, name, nil)
		return azure.Classify(err) == azure.ClassStale, nil
	})
	got, err := pec.Get(ctx, devenv.ResourceGroup, "consumer-pe", nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := endpointState(got); s != "Disconnected" {
		t.Errorf("the private endpoint's connection is %q after the Service went: want Disconnected", s)
	}
	eventually(t, 60*time.Second, "api's frontend gone", func(context.Context) (bool, error) {
		lb := getLB(t, "kubernetes-internal")
		if lb == nil {
			return true, nil
		}
		for _, f := range lb.Properties.FrontendIPConfigurations {
			if strings.EqualFold(*f.ID, feID) {
				return false, nil
			}
		}
		return true, nil
	})
	if _, err := testutil.HelloFrom(client, endpoint, time.Second); err == nil {
		t.Error("the private endpoint still carries traffic after its PLS was deleted")
	}
}

// distinctLoopbackNets is three different loopback /24s: the public IPs,
// the cluster's subnet, the consumer's virtual network.
func distinctLoopbackNets(t *testing.T) (a, b, c netip.Prefix) {
	t.Helper()
	a = testutil.LoopbackNet(t)
	for b = testutil.LoopbackNet(t); b == a; b = testutil.LoopbackNet(t) {
	}
	for c = testutil.LoopbackNet(t); c == a || c == b; c = testutil.LoopbackNet(t) {
	}
	return a, b, c
}

var plsPoll = &runtime.PollUntilDoneOptions{Frequency: 50 * time.Millisecond}

// consumerNetwork creates a second virtual network, of prefix p, with one
// subnet for private endpoints, and returns the subnet's id.
func consumerNetwork(t *testing.T, clients *azure.Clients, p netip.Prefix) string {
	t.Helper()
	ctx := context.Background()
	vnets, err := armnetwork.NewVirtualNetworksClient(devenv.SubscriptionID, clients.Credential(), clients.ARMClientOptions("e2e-pls"))
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vnets.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, "consumer-vnet", armnetwork.VirtualNetwork{Location: to.Ptr(devenv.Location),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(p.String())}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("endpoints"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(p.String())}}},
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vn, err := poller.PollUntilDone(ctx, plsPoll)
	if err != nil {
		t.Fatal(err)
	}
	return *vn.ID + "/subnets/endpoints"
}

// createPrivateEndpoint creates an endpoint in subnetID with an automatic
// connection to the PLS plsID.
func createPrivateEndpoint(t *testing.T, pec *armnetwork.PrivateEndpointsClient, name, subnetID, plsID string) *armnetwork.PrivateEndpoint {
	t.Helper()
	ctx := context.Background()
	poller, err := pec.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, name, armnetwork.PrivateEndpoint{Location: to.Ptr(devenv.Location),
		Properties: &armnetwork.PrivateEndpointProperties{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnetID)},
			PrivateLinkServiceConnections: []*armnetwork.PrivateLinkServiceConnection{{Name: to.Ptr(name),
				Properties: &armnetwork.PrivateLinkServiceConnectionProperties{PrivateLinkServiceID: to.Ptr(plsID)}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := poller.PollUntilDone(ctx, plsPoll)
	if err != nil {
		t.Fatal(err)
	}
	return &pe.PrivateEndpoint
}

// waitPLS waits for a PLS of the resource group that satisfies ok.
func waitPLS(t *testing.T, plsc *armnetwork.PrivateLinkServicesClient, ok func(*armnetwork.PrivateLinkService) bool) *armnetwork.PrivateLinkService {
	t.Helper()
	var found *armnetwork.PrivateLinkService
	var seen []string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		seen = seen[:0]
		pager := plsc.NewListPager(devenv.ResourceGroup, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return false, nil
			}
			for _, p := range page.Value {
				seen = append(seen, *p.Name+" on "+plsFrontend(p)+" "+connectionStates(p))
				if ok(p) {
					found = p
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Private Link Service as wanted in 60s; the resource group has %v", seen)
	}
	return found
}

// plsFrontend is the (lower-cased) id of the frontend a PLS serves.
func plsFrontend(p *armnetwork.PrivateLinkService) string {
	if p.Properties == nil || len(p.Properties.LoadBalancerFrontendIPConfigurations) == 0 || p.Properties.LoadBalancerFrontendIPConfigurations[0].ID == nil {
		return ""
	}
	return strings.ToLower(*p.Properties.LoadBalancerFrontendIPConfigurations[0].ID)
}

// connectionStates is "<endpoint>=<status>" for each of the PLS's
// connections, sorted and comma-separated.
func connectionStates(p *armnetwork.PrivateLinkService) string {
	var out []string
	for _, c := range p.Properties.PrivateEndpointConnections {
		pr := c.Properties
		if pr == nil || pr.PrivateEndpoint == nil || pr.PrivateEndpoint.ID == nil || pr.PrivateLinkServiceConnectionState == nil {
			continue
		}
		out = append(out, lastPathSegment(*pr.PrivateEndpoint.ID)+"="+deref(pr.PrivateLinkServiceConnectionState.Status))
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// endpointState is the status of a private endpoint's connection.
func endpointState(pe armnetwork.PrivateEndpointsClientGetResponse) string {
	for _, cs := range [][]*armnetwork.PrivateLinkServiceConnection{pe.Properties.PrivateLinkServiceConnections, pe.Properties.ManualPrivateLinkServiceConnections} {
		for _, c := range cs {
			if c.Properties != nil && c.Properties.PrivateLinkServiceConnectionState != nil && c.Properties.PrivateLinkServiceConnectionState.Status != nil {
				return *c.Properties.PrivateLinkServiceConnectionState.Status
			}
		}
	}
	return ""
}

// frontendIDOf is the id of lb's frontend with the private address addr.
func frontendIDOf(t *testing.T, lb *armnetwork.LoadBalancer, addr netip.Addr) string {
	t.Helper()
	if lb != nil {
		for _, f := range lb.Properties.FrontendIPConfigurations {
			if f.Properties != nil && f.Properties.PrivateIPAddress != nil && *f.Properties.PrivateIPAddress == addr.String() {
				return *f.ID
			}
		}
	}
	t.Fatalf("no frontend with address %s", addr)
	return ""
}

func ilbSubnetID() string {
	return "/subscriptions/" + devenv.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup +
		"/providers/Microsoft.Network/virtualNetworks/" + devenv.VnetName + "/subnets/" + devenv.SubnetName
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// countPLS counts the PLSs of the resource group that satisfy ok.
func countPLS(t *testing.T, plsc *armnetwork.PrivateLinkServicesClient, ok func(*armnetwork.PrivateLinkService) bool) int {
	t.Helper()
	n := 0
	pager := plsc.NewListPager(devenv.ResourceGroup, nil)
	for pager.More() {
		page, err := pager.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Value {
			if ok(p) {
				n++
			}
		}
	}
	return n
}

func lastPathSegment(id string) string { return id[strings.LastIndex(id, "/")+1:] }

// updateService applies edit to the Service, retrying on conflicts.
func updateService(t *testing.T, ns, name string, edit func(*v1.Service)) {
	t.Helper()
	eventually(t, 10*time.Second, "Service "+ns+"/"+name+" updated", func(ctx context.Context) (bool, error) {
		s, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		edit(s)
		_, err = suite.cs.CoreV1().Services(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err == nil, nil
	})
}

// assertDeletedBefore checks, in the emulator's request log, that the PLS
// named pls was deleted before the last successful write of load balancer
// lb (the one that removed its frontend).
func assertDeletedBefore(t *testing.T, env *devenv.Env, pls, lb string) {
	t.Helper()
	del, write := -1, -1
	for i, r := range env.Emulator().Requests() {
		p := strings.ToLower(r.Path)
		switch {
		case r.Method == http.MethodDelete && strings.HasSuffix(p, "/privatelinkservices/"+strings.ToLower(pls)) && r.Status < 300:
			del = i
		case r.Method == http.MethodPut && strings.HasSuffix(p, "/loadbalancers/"+strings.ToLower(lb)) && r.Status < 300:
			write = i
		}
	}
	if del < 0 || write < 0 || del > write {
		t.Errorf("request log: DELETE of PLS %s at %d, last write of %s at %d: want the PLS deleted first", pls, del, lb, write)
	}
}
