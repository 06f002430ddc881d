package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	if err := Render(&buf, snap); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"LOAD BALANCER " + uid + " (demo/web)", "20.40.0.9", "SERVICE GATEWAY servicegateway", "2 services, 1 locations, 1 addresses",
		"Inbound", "Outbound", "LOCATION 10.240.0.4", "node aks-n1", "10.244.0.10", "default-natgw,demo/web"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
