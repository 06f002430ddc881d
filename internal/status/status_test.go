package status

import (
	"bytes"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"maps"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/lbclass"
)

func TestRenderShowsServicesRulesAndAdminState(t *testing.T) {
	lbID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	pipID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/pip"
	lb := &armnetwork.LoadBalancer{
		Name: to.Ptr("kubernetes"),
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
				Name:       to.Ptr("aabc"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID)}},
			}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{
				Name: to.Ptr("aabc-TCP-80"),
				Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr[int32](80), BackendPort: to.Ptr[int32](80),
					FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/aabc")},
				},
			}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{
				Name: to.Ptr("kubernetes"),
				Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
					{Name: to.Ptr("n1"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0.1")}},
					{Name: to.Ptr("n2"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0.2"), AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)}},
				}},
			}},
		},
	}
	snap := &Snapshot{
		LoadBalancers: []*armnetwork.LoadBalancer{lb},
		PublicIPs:     map[string]string{strings.ToLower(pipID): "20.40.0.7"},
		Services:      map[string]string{"aabc": "demo/web"},
		Nodes: map[string]*v1.Node{"n2": {ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: "node.kubernetes.io/out-of-service", Effect: v1.TaintEffectNoExecute},
		}}}},
	}
	var buf bytes.Buffer
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"LOAD BALANCER kubernetes", "20.40.0.7", "demo/web", "TCP/80->80", "POOL kubernetes", "2 backends"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var n1, n2 string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "n1" {
			n1 = line
		}
		if len(f) > 0 && f[0] == "n2" {
			n2 = line
		}
	}
	if !strings.Contains(n1, "None") || !strings.Contains(n2, "Down") || !strings.Contains(n2, "node.kubernetes.io/out-of-service") {
		t.Errorf("backend lines: n1=%q n2=%q", n1, n2)
	}
}

func TestRenderEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, &Snapshot{}); err != nil || !strings.Contains(buf.String(), "No load balancers") {
		t.Fatalf("got %q, %v", buf.String(), err)
	}
}

// TestRenderShowsNICMembersByNode: NIC-derived entries are shown under the
// name of the node whose VM owns them (when known), with the node's address
// and the NIC ip configuration; an entry whose owner is unknown keeps its
// ARM name.
func TestRenderShowsNICMembersByNode(t *testing.T) {
	vm := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/virtualMachines/3"
	nic := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/as-0-nic"
	entry := func(name, cfg string, st armnetwork.LoadBalancerBackendAddressAdminState) *armnetwork.LoadBalancerBackendAddress {
		return &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
			NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(cfg)}, AdminState: to.Ptr(st)}}
	}
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
				entry("rg_pool1_3_nicipconfig1", vm+"/networkInterfaces/nic/ipConfigurations/ipconfig1", armnetwork.LoadBalancerBackendAddressAdminStateDown),
				entry("rg_as-0-nicipconfig1", nic+"/ipConfigurations/ipconfig1", armnetwork.LoadBalancerBackendAddressAdminStateNone),
				entry("rg_stray-nicipconfig1", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/stray-nic/ipConfigurations/ipconfig1", armnetwork.LoadBalancerBackendAddressAdminStateNone),
			}}}}}}
	node := func(name, ip string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	}
	snap := &Snapshot{LoadBalancers: []*armnetwork.LoadBalancer{lb},
		Nodes:  map[string]*v1.Node{"vmss-3": node("vmss-3", "10.240.0.7"), "as-0": node("as-0", "10.240.1.4")},
		Owners: map[string]string{strings.ToLower(vm): "vmss-3", strings.ToLower(nic): "as-0"}}
	var buf bytes.Buffer
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "NIC-based") {
		t.Errorf("pool line does not say it is NIC-based:\n%s", out)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 5 {
			rows[f[0]] = f
		}
	}
	for name, want := range map[string][]string{
		"vmss-3":                {"vmss-3", "10.240.0.7", "Down", "-", "nic:nic/ipconfig1"},
		"as-0":                  {"as-0", "10.240.1.4", "None", "-", "nic:as-0-nic/ipconfig1"},
		"rg_stray-nicipconfig1": {"rg_stray-nicipconfig1", "-", "None", "-", "nic:stray-nic/ipconfig1"},
	} {
		if strings.Join(rows[name], " ") != strings.Join(want, " ") {
			t.Errorf("row %s = %v, want %v\n%s", name, rows[name], want, out)
		}
	}
}

// Pod-based load balancing: the per-Service load balancer names its
// Service, and the gateway's pods are listed per node location.
func TestRenderServiceGateway(t *testing.T) {
	const uid = "6f9619ff-8b86-d011-b42d-00c04fc964ff"
	pipID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/" + uid + "-pip"
	snap := &Snapshot{
		LoadBalancers: []*armnetwork.LoadBalancer{{Name: to.Ptr(uid), Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("frontend"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID)}}}},
		}}},
		PublicIPs: map[string]string{strings.ToLower(pipID): "20.40.0.9"},
		Services:  map[string]string{uid: "demo/web"},
		Nodes: map[string]*v1.Node{"aks-n1": {ObjectMeta: metav1.ObjectMeta{Name: "aks-n1"},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.240.0.4"}}}}},
		Gateway: &Gateway{Name: "servicegateway",
			Services: []*armnetwork.ServiceGatewayService{
				{Name: to.Ptr(uid), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: to.Ptr(armnetwork.ServiceTypeInbound),
					LoadBalancerBackendPools: []*armnetwork.BackendAddressPool{{}}}},
				{Name: to.Ptr("default-natgw"), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: to.Ptr(armnetwork.ServiceTypeOutbound)}},
			},
			Locations: []*armnetwork.ServiceGatewayAddressLocationResponse{{AddressLocation: to.Ptr("10.240.0.4"),
				Addresses: []*armnetwork.ServiceGatewayAddress{{Address: to.Ptr("10.244.0.10"), Services: []*string{to.Ptr(uid), to.Ptr("default-natgw")}}}}},
		},
	}
	var buf bytes.Buffer
	var out string
	snap.Gateway.Services = append(snap.Gateway.Services, &armnetwork.ServiceGatewayService{Name: to.Ptr("team-a"),
		Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{ServiceType: to.Ptr(armnetwork.ServiceTypeOutbound)}})
	snap.Gateway.Locations[0].Addresses = append(snap.Gateway.Locations[0].Addresses,
		&armnetwork.ServiceGatewayAddress{Address: to.Ptr("10.244.0.11"), Services: []*string{to.Ptr("team-a")}})
	snap.Gateway.Egress = []EgressIdentity{{Name: "team-a", NAT: "team-a", Attached: true, PublicIPs: []string{"20.40.0.12"}}}
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	out = buf.String()
	for _, want := range []string{"LOAD BALANCER " + uid + " (demo/web)", "20.40.0.9", "SERVICE GATEWAY servicegateway", "3 services, 1 locations, 2 addresses",
		"Inbound", "Outbound", "LOCATION 10.240.0.4", "node aks-n1", "10.244.0.10", "default-natgw,demo/web", "EGRESS IDENTITY", "20.40.0.12"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Each Service's frontend shows who azlb's rules in the NSG let in, read
// from the rules that hold its destinations; rules not azlb's do not count.
func TestRenderShowsSources(t *testing.T) {
	const pipPrefix = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/"
	svc := func(base string, kv ...string) *v1.Service {
		s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: base, Annotations: map[string]string{}},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Port: 80, NodePort: 30080}}}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
		return s
	}
	public := func(name string) *armnetwork.FrontendIPConfiguration {
		return &armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipPrefix + name)}}}
	}
	private := func(name, ip string) *armnetwork.FrontendIPConfiguration {
		return &armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			PrivateIPAddress: to.Ptr(ip)}}
	}
	rule := func(name string, prio int32, access string, srcs, dsts []string, ports ...string) *armnetwork.SecurityRule {
		p := &armnetwork.SecurityRulePropertiesFormat{Priority: to.Ptr(prio), Access: to.Ptr(armnetwork.SecurityRuleAccess(access)),
			Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound)}
		for _, s := range srcs {
			p.SourceAddressPrefixes = append(p.SourceAddressPrefixes, to.Ptr(s))
		}
		for _, d := range dsts {
			p.DestinationAddressPrefixes = append(p.DestinationAddressPrefixes, to.Ptr(d))
		}
		for _, x := range ports {
			p.DestinationPortRanges = append(p.DestinationPortRanges, to.Ptr(x))
		}
		return &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: p}
	}
	l := func(s ...string) []string { return s }
	snap := &Snapshot{
		LoadBalancers: []*armnetwork.LoadBalancer{{Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{
				public("aweb"), public("aranges"), public("afd"), private("ainternal", "10.0.0.10"), public("aoff"),
				public("adisabled"), private("adeny", "10.0.0.11"), public("afresh"),
			}}}},
		PublicIPs: map[string]string{strings.ToLower(pipPrefix + "aweb"): "20.0.0.1", strings.ToLower(pipPrefix + "aranges"): "20.0.0.2",
			strings.ToLower(pipPrefix + "afd"): "20.0.0.3", strings.ToLower(pipPrefix + "aoff"): "20.0.0.4",
			strings.ToLower(pipPrefix + "adisabled"): "20.0.0.5", strings.ToLower(pipPrefix + "afresh"): "20.0.0.6"},
		Nodes: map[string]*v1.Node{"n1": {ObjectMeta: metav1.ObjectMeta{Name: "n1"},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}}},
		Objects: map[string]*v1.Service{
			"aweb": svc("web"), "aranges": svc("ranges"), "afd": svc("fd"),
			"ainternal": svc("internal", "service.beta.kubernetes.io/azure-load-balancer-internal", "true"),
			"aoff":      svc("off", "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip", "true"),
			"adisabled": svc("disabled", "service.beta.kubernetes.io/azure-disable-load-balancer-nsg-rule", "true"),
			"adeny":     svc("deny", "service.beta.kubernetes.io/azure-load-balancer-internal", "true"),
			"afresh":    svc("fresh"),
		},
		SecurityGroupName: "nsg",
		SecurityGroup: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{
			rule("k8s-azure-lb_allow_IPv4_1", 500, "Allow", l("Internet"), l("20.0.0.1"), "80"),
			rule("k8s-azure-lb_allow_IPv4_2", 501, "Allow", l("10.0.0.0/24", "192.168.0.0/16"), l("20.0.0.2"), "80"),
			rule("k8s-azure-lb_allow_IPv4_3", 502, "Allow", l("AzureFrontDoor.Backend"), l("20.0.0.3"), "80"),
			rule("k8s-azure-lb_allow_IPv4_4", 503, "Allow", l("Internet"), l("10.0.0.1"), "30080"),
			rule("k8s-azure-lb_allow_IPv4_5", 504, "Allow", l("10.1.0.0/16"), l("10.0.0.11"), "80"),
			rule("k8s-azure-lb_deny-all_IPv4", 4095, "Deny", l("*"), l("10.0.0.11"), "*"),
			// Not azlb's: another name, a priority outside 500-4096, another port.
			rule("mine", 100, "Allow", l("1.2.3.4/32"), l("20.0.0.1"), "80"),
			rule("k8s-azure-lb_allow_IPv4_6", 4097, "Allow", l("1.2.3.4/32"), l("20.0.0.2"), "80"),
			rule("k8s-azure-lb_allow_IPv4_7", 505, "Allow", l("5.6.7.8/32"), l("20.0.0.3"), "443"),
		}}},
	}
	want := map[string]string{
		"aweb": "Internet", "aranges": "10.0.0.0/24, 192.168.0.0/16", "afd": "AzureFrontDoor.Backend",
		"ainternal": "virtual network only", "aoff": "Internet", "adisabled": "none (nsg rule disabled)", "adeny": "10.1.0.0/16",
		"afresh": "none",
	}
	rows := func() map[string]string {
		var buf bytes.Buffer
		if err := Render(&buf, snap); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, line := range strings.Split(buf.String(), "\n") {
			f := strings.Fields(line)
			if len(f) >= 5 && want[f[0]] != "" {
				// FRONTEND ADDRESS SERVICE RULES SOURCES...
				got[f[0]] = strings.Join(f[4:], " ")
			}
		}
		if !strings.Contains(buf.String(), "SOURCES") {
			t.Errorf("no SOURCES column:\n%s", buf.String())
		}
		return got
	}
	got := rows()
	for fe, w := range want {
		if got[fe] != w {
			t.Errorf("%s: sources %q, want %q", fe, got[fe], w)
		}
	}
	snap.SecurityGroupName, snap.SecurityGroup = "", nil
	if got := rows(); got["aweb"] != "NSG not configured" {
		t.Errorf("without an NSG: %q", got["aweb"])
	}
	snap.SecurityGroupName = "nsg"
	if got := rows(); got["aweb"] != "NSG nsg not found" {
		t.Errorf("NSG missing: %q", got["aweb"])
	}
}

// With a load-balancer class, a frontend of another implementation's
// Service (on AKS, a class-less one on AKS's load balancer) is marked so
// and shows no sources: the rules holding its address are not azlb's.
// Without a class, the classed Services are the others.
func TestRenderMarksAnotherImplementationsServices(t *testing.T) {
	const pipPrefix = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/"
	svc := func(name string, class *string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, LoadBalancerClass: class, Ports: []v1.ServicePort{{Port: 80}}}}
	}
	fe := func(name string) *armnetwork.FrontendIPConfiguration {
		return &armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipPrefix + name)}}}
	}
	class := "example.com/azlb"
	snap := &Snapshot{
		LoadBalancers: []*armnetwork.LoadBalancer{
			{Name: to.Ptr("azlb"), Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{fe("aweb")}}},
			{Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{fe("aaks")}}},
		},
		PublicIPs:         map[string]string{strings.ToLower(pipPrefix + "aweb"): "20.0.0.1", strings.ToLower(pipPrefix + "aaks"): "20.0.0.2"},
		Services:          map[string]string{"aweb": "demo/web", "aaks": "demo/aks"},
		Objects:           map[string]*v1.Service{"aweb": svc("web", &class), "aaks": svc("aks", nil)},
		Class:             lbclass.Class(class),
		SecurityGroupName: "nsg",
		SecurityGroup: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{{
			Name: to.Ptr("k8s-azure-lb_allow_IPv4_1"), Properties: &armnetwork.SecurityRulePropertiesFormat{Priority: to.Ptr[int32](500),
				Access: to.Ptr(armnetwork.SecurityRuleAccessAllow), Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound),
				SourceAddressPrefix: to.Ptr("Internet"), DestinationAddressPrefixes: []*string{to.Ptr("20.0.0.1"), to.Ptr("20.0.0.2")},
				DestinationPortRanges: []*string{to.Ptr("80")}}}}}},
	}
	rows := func() map[string]string {
		var buf bytes.Buffer
		if err := Render(&buf, snap); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, line := range strings.Split(buf.String(), "\n") {
			// FRONTEND ADDRESS SERVICE... RULES SOURCES
			if f := strings.Fields(line); len(f) >= 5 && (f[0] == "aweb" || f[0] == "aaks") {
				got[f[0]] = strings.Join(f[2:len(f)-2], " ") + " | " + f[len(f)-1]
			}
		}
		return got
	}
	want := map[string]string{"aweb": "demo/web | Internet", "aaks": "demo/aks (not azlb's) | -"}
	if got := rows(); !maps.Equal(got, want) {
		t.Errorf("with class %s: %v, want %v", class, got, want)
	}
	snap.Class = ""
	want = map[string]string{"aweb": "demo/web (not azlb's) | -", "aaks": "demo/aks | Internet"}
	if got := rows(); !maps.Equal(got, want) {
		t.Errorf("without a class: %v, want %v", got, want)
	}
}

// The REASONS column follows the configured loadBalancerAdminStateTaints,
// not only the default list.
func TestReasonsFollowTheConfiguredTaints(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{
		{Key: "example.com/maintenance", Effect: v1.TaintEffectNoSchedule},
	}}}
	cfg := &config.Config{LoadBalancerAdminStateTaints: &[]string{"example.com/maintenance"}}
	snap := &Snapshot{Nodes: map[string]*v1.Node{"n1": node}}
	if got := snap.reasons("n1"); got != "-" {
		t.Fatalf("default taints: %q, want -", got)
	}
	snap.Policy = backendpool.PolicyFromConfig(cfg)
	if got := snap.reasons("n1"); !strings.Contains(got, "example.com/maintenance") {
		t.Fatalf("configured taints: %q, want example.com/maintenance", got)
	}
}

func TestRenderShowsServicesSharingAFrontend(t *testing.T) {
	lbID := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"
	web, dns := "a1111111000000000000000000000000", "a2222222000000000000000000000000"
	rule := func(base, proto string, port int32) *armnetwork.LoadBalancingRule {
		return &armnetwork.LoadBalancingRule{Name: to.Ptr(base + "-" + proto + "-" + strings.TrimSpace(string(rune('0'+port%10)))),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				Protocol: to.Ptr(armnetwork.TransportProtocol(proto)), FrontendPort: to.Ptr(port), BackendPort: to.Ptr(port),
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(lbID + "/frontendIPConfigurations/" + web)},
			}}
	}
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr(web),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PrivateIPAddress: to.Ptr("10.0.0.9")}}},
		LoadBalancingRules: []*armnetwork.LoadBalancingRule{rule(web, "Tcp", 80), rule(dns, "Udp", 53)},
	}}
	snap := &Snapshot{LoadBalancers: []*armnetwork.LoadBalancer{lb}, Services: map[string]string{web: "demo/web", dns: "demo/dns"}}
	var buf bytes.Buffer
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "demo/web+demo/dns (shared)") {
		t.Fatalf("output does not show the sharing:\n%s", buf.String())
	}
	// The Service the frontend is named after is gone: the others remain.
	delete(snap.Services, web)
	buf.Reset()
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), " demo/dns (shared)") {
		t.Fatalf("output after the owner left:\n%s", buf.String())
	}
}

// A pool's drain period shows on its POOL line; none shows nothing.
func TestRenderShowsThePoolsDrainPeriod(t *testing.T) {
	pool := func(name string, drain *int32) *armnetwork.BackendAddressPool {
		return &armnetwork.BackendAddressPool{Name: to.Ptr(name), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{DrainPeriodInSeconds: drain,
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("n1"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0.1")}}}}}
	}
	snap := &Snapshot{LoadBalancers: []*armnetwork.LoadBalancer{{Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{pool("kubernetes", to.Ptr[int32](20)), pool("other", nil), pool("zero", to.Ptr[int32](0))}}}}}
	var buf bytes.Buffer
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(buf.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "POOL" {
			continue
		}
		if has := strings.Contains(line, "drain 20s"); has != (f[1] == "kubernetes") || (f[1] != "kubernetes" && strings.Contains(line, "drain")) {
			t.Errorf("pool line %q", line)
		}
	}
	if !strings.Contains(buf.String(), "1 backends, drain 20s") {
		t.Errorf("no drain period shown:\n%s", buf.String())
	}
}
