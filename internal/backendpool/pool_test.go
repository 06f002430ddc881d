package backendpool_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
)

const vnet = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v"

func node(name string, ips []string, mutate ...func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	for _, m := range mutate {
		m(n)
	}
	return n
}

func TestMembersEligibilityAndFamilies(t *testing.T) {
	now := metav1.Now()
	nodes := map[string]*v1.Node{
		"plain":    node("plain", []string{"10.0.0.1", "fd00::1"}),
		"v6only":   node("v6only", []string{"fd00::2"}),
		"external": node("external", []string{"10.0.0.3"}, func(n *v1.Node) { n.Status.Addresses[0].Type = v1.NodeExternalIP }),
		"excluded": node("excluded", []string{"10.0.0.4"}, func(n *v1.Node) { n.Labels[backendpool.LabelExcludeFromLB] = "true" }),
		"cp":       node("cp", []string{"10.0.0.5"}, func(n *v1.Node) { n.Labels[backendpool.LabelControlPlane] = "" }),
		"master":   node("master", []string{"10.0.0.6"}, func(n *v1.Node) { n.Labels[backendpool.LabelLegacyMasterRole] = "" }),
		"deleting": node("deleting", []string{"10.0.0.7"}, func(n *v1.Node) { n.DeletionTimestamp = &now }),
		"scaledown": node("scaledown", []string{"10.0.0.8"}, func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: backendpool.TaintToBeDeletedByClusterAutoscaler, Effect: v1.TaintEffectNoSchedule}}
		}),
		"shutdown": node("shutdown", []string{"10.0.0.9"}, func(n *v1.Node) {
			n.Spec.Taints = []v1.Taint{{Key: backendpool.TaintShutdown, Effect: v1.TaintEffectNoSchedule}}
		}),
		"badip":    node("badip", []string{"not-an-ip", "10.0.0.10"}),
		"included": node("included", []string{"10.0.0.11"}, func(n *v1.Node) { n.Labels[backendpool.LabelExcludeFromLB] = "false" }),
	}
	all := make([]*v1.Node, 0, len(nodes))
	for _, n := range nodes {
		all = append(all, n)
	}
	describe := func(ms []backendpool.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name+"="+m.IP+"/"+string(m.AdminState))
		}
		return out
	}
	cases := []struct {
		name      string
		family    v1.IPFamily
		includeCP bool // control-plane nodes stay in
		want      []string
	}{
		{"IPv4", v1.IPv4Protocol, false, []string{"badip=10.0.0.10/None", "included=10.0.0.11/None", "plain=10.0.0.1/None", "shutdown=10.0.0.9/Down"}},
		{"IPv6", v1.IPv6Protocol, false, []string{"plain=fd00::1/None", "v6only=fd00::2/None"}},
		{"IPv4 with control plane", v1.IPv4Protocol, true, []string{"badip=10.0.0.10/None", "cp=10.0.0.5/None", "included=10.0.0.11/None", "master=10.0.0.6/None", "plain=10.0.0.1/None", "shutdown=10.0.0.9/Down"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := backendpool.Policy{VNetID: vnet, ExcludeControlPlane: !tc.includeCP, AdminState: true}
			if got := describe(p.Members(all, tc.family)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("members = %v, want %v", got, tc.want)
			}
		})
	}
}

func entry(name, ip string, state armnetwork.LoadBalancerBackendAddressAdminState, vnetID string) *armnetwork.LoadBalancerBackendAddress {
	e := &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(ip)}}
	if state != "" {
		e.Properties.AdminState = to.Ptr(state)
	}
	if vnetID != "" {
		e.Properties.VirtualNetwork = &armnetwork.SubResource{ID: to.Ptr(vnetID)}
	}
	return e
}

func TestSync(t *testing.T) {
	none, down := armnetwork.LoadBalancerBackendAddressAdminStateNone, armnetwork.LoadBalancerBackendAddressAdminStateDown
	want := []backendpool.Member{{Name: "n1", IP: "10.0.0.1", AdminState: none}, {Name: "n2", IP: "10.0.0.2", AdminState: down}}
	cases := []struct {
		name string
		have []*armnetwork.LoadBalancerBackendAddress
		diff backendpool.Diff
	}{
		{"in sync (unset admin state is None, vnet id case-insensitive)", []*armnetwork.LoadBalancerBackendAddress{
			entry("n1", "10.0.0.1", "", vnet), entry("n2", "10.0.0.2", down, vnet),
		}, backendpool.Diff{Members: 2}},
		{"empty pool", nil, backendpool.Diff{Changed: true, Added: 2, Members: 2}},
		{"a node left, one joined", []*armnetwork.LoadBalancerBackendAddress{
			entry("n1", "10.0.0.1", none, vnet), entry("old", "10.0.0.9", none, vnet),
		}, backendpool.Diff{Changed: true, Added: 1, Removed: 1, Members: 2}},
		{"admin state differs", []*armnetwork.LoadBalancerBackendAddress{
			entry("n1", "10.0.0.1", none, vnet), entry("n2", "10.0.0.2", none, vnet),
		}, backendpool.Diff{Changed: true, Updated: 1, Members: 2}},
		{"name and vnet differ", []*armnetwork.LoadBalancerBackendAddress{
			entry("other", "10.0.0.1", none, vnet), entry("n2", "10.0.0.2", down, ""),
		}, backendpool.Diff{Changed: true, Updated: 2, Members: 2}},
		{"duplicate IP is rewritten", []*armnetwork.LoadBalancerBackendAddress{
			entry("n1", "10.0.0.1", none, vnet), entry("n1b", "10.0.0.1", none, vnet), entry("n2", "10.0.0.2", down, vnet),
		}, backendpool.Diff{Changed: true, Updated: 1, Members: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := &armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: tc.have}}
			if tc.name[:5] == "in sy" {
				pool.Properties.LoadBalancerBackendAddresses[0].Properties.VirtualNetwork.ID = to.Ptr("/SUBSCRIPTIONS/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v")
			}
			d := backendpool.Policy{VNetID: vnet}.Sync(pool, want)
			if d != tc.diff {
				t.Fatalf("diff = %+v, want %+v", d, tc.diff)
			}
			if !d.Changed {
				if len(pool.Properties.LoadBalancerBackendAddresses) != len(tc.have) {
					t.Fatal("an unchanged pool was modified")
				}
				return
			}
			// The provider's shape: name, ipAddress, virtualNetwork, adminState.
			got := pool.Properties.LoadBalancerBackendAddresses
			if len(got) != 2 {
				t.Fatalf("entries = %d", len(got))
			}
			for i, m := range want {
				e := got[i]
				if *e.Name != m.Name || *e.Properties.IPAddress != m.IP || *e.Properties.AdminState != m.AdminState ||
					*e.Properties.VirtualNetwork.ID != vnet {
					t.Errorf("entry %d = %+v", i, e.Properties)
				}
			}
		})
	}
	// A pool without properties gets them.
	p := &armnetwork.BackendAddressPool{}
	if d := (backendpool.Policy{VNetID: vnet}).Sync(p, nil); d.Changed || p.Properties == nil {
		t.Fatalf("empty desired on a property-less pool: %+v", d)
	}
}

func TestMembersWithoutAdminState(t *testing.T) {
	n := node("tainted", []string{"10.0.0.1"}, func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: backendpool.TaintOutOfService, Effect: v1.TaintEffectNoExecute}}
	})
	if got := (backendpool.Policy{AdminState: false}).Members([]*v1.Node{n}, v1.IPv4Protocol); len(got) != 1 || got[0].AdminState != armnetwork.LoadBalancerBackendAddressAdminStateNone {
		t.Fatalf("with admin state disabled: %+v, want one None entry", got)
	}
	if got := (backendpool.Policy{AdminState: true}).Members([]*v1.Node{n}, v1.IPv4Protocol); got[0].AdminState != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Fatalf("with admin state enabled: %+v, want Down", got)
	}
}

// TestPolicyFromConfig pins the one reading of the azure.json settings
// every pool writer shares (the control-plane rule had two readings once).
func TestPolicyFromConfig(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name      string
		exclude   *bool
		adminOn   *bool
		vnetRG    string
		wantCP    bool
		wantAdmin bool
		wantVNet  string
	}{
		{"defaults", nil, nil, "", true, true, "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vn"},
		{"control plane kept, admin state off", &no, &no, "", false, false, "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vn"},
		{"explicitly excluded, vnet elsewhere", &yes, &yes, "net-rg", true, true, "/subscriptions/sub/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/vn"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{SubscriptionID: "sub", ResourceGroup: "rg", VnetName: "vn", VnetResourceGroup: tc.vnetRG,
				ExcludeMasterFromStandardLB: tc.exclude, EnableLoadBalancerAdminState: tc.adminOn}
			p := backendpool.PolicyFromConfig(cfg)
			if p.ExcludeControlPlane != tc.wantCP || p.AdminState != tc.wantAdmin || p.VNetID != tc.wantVNet {
				t.Errorf("policy = %+v", p)
			}
			cp := node("cp", []string{"10.0.0.5"}, func(n *v1.Node) { n.Labels[backendpool.LabelControlPlane] = "" })
			if p.Eligible(cp) == tc.wantCP {
				t.Errorf("control-plane node eligible = %v with ExcludeControlPlane %v", p.Eligible(cp), tc.wantCP)
			}
		})
	}
	if p := backendpool.PolicyFromConfig(&config.Config{}); p.VNetID != "" {
		t.Errorf("without vnetName: VNetID %q, want empty", p.VNetID)
	}
}

func TestCanonicalIP(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.4": "10.0.0.4", " 10.0.0.4 ": "10.0.0.4", "::ffff:10.0.0.4": "10.0.0.4",
		"FD00:0::1": "fd00::1", "not-an-ip": "not-an-ip", "NAME": "name",
	} {
		if got := backendpool.CanonicalIP(in); got != want {
			t.Errorf("backendpool.CanonicalIP(%q) = %q, want %q", in, got, want)
		}
	}
}

func nicEntry(name, ipConfig string) *armnetwork.LoadBalancerBackendAddress {
	return &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
		NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(ipConfig)}}}
}

func TestNICDerivedEntries(t *testing.T) {
	vm := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/v/virtualMachines/0"
	nic := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n"
	a := nicEntry("rg_v_0_nicipconfig1", vm+"/networkInterfaces/nic/ipConfigurations/ipconfig1")
	b := nicEntry("rg_nipconfig1", nic+"/ipConfigurations/ipconfig1")
	pool := &armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{a, b}}}
	if !backendpool.IsNICEntry(a) || backendpool.EntryKey(a) != strings.ToLower(vm) || backendpool.EntryKey(b) != strings.ToLower(nic) {
		t.Fatalf("keys %q %q", backendpool.EntryKey(a), backendpool.EntryKey(b))
	}
	if got := backendpool.PoolKeys(pool); len(got) != 2 {
		t.Fatalf("pool keys %v", got)
	}
	changed := backendpool.SetNICStates(pool, map[string]armnetwork.LoadBalancerBackendAddressAdminState{strings.ToLower(nic): armnetwork.LoadBalancerBackendAddressAdminStateDown})
	if len(changed) != 1 || backendpool.AdminStateOf(b) != armnetwork.LoadBalancerBackendAddressAdminStateDown || a.Properties.AdminState != nil {
		t.Fatalf("backendpool.SetNICStates changed %v: a %v b %v", changed, a.Properties.AdminState, backendpool.AdminStateOf(b))
	}
	if again := backendpool.SetNICStates(pool, map[string]armnetwork.LoadBalancerBackendAddressAdminState{strings.ToLower(nic): armnetwork.LoadBalancerBackendAddressAdminStateDown}); len(again) != 0 {
		t.Fatalf("an unchanged state was written: %v", again)
	}

	// Sync of IP entries never touches NIC-derived ones.
	p := backendpool.Policy{VNetID: "/vnet"}
	d := p.Sync(pool, []backendpool.Member{{Name: "n1", IP: "10.0.0.1", AdminState: armnetwork.LoadBalancerBackendAddressAdminStateNone}})
	if !d.Changed || len(pool.Properties.LoadBalancerBackendAddresses) != 3 || pool.Properties.LoadBalancerBackendAddresses[0] != a {
		t.Fatalf("sync: %+v %d entries", d, len(pool.Properties.LoadBalancerBackendAddresses))
	}
	if d := p.Sync(pool, []backendpool.Member{{Name: "n1", IP: "10.0.0.1", AdminState: armnetwork.LoadBalancerBackendAddressAdminStateNone}}); d.Changed {
		t.Fatalf("a second sync changed the pool: %+v", d)
	}
	pool.Properties.VirtualNetwork = &armnetwork.SubResource{ID: to.Ptr("/vnet")}
	if !backendpool.DropIPEntries(pool) || len(pool.Properties.LoadBalancerBackendAddresses) != 2 || pool.Properties.VirtualNetwork != nil || backendpool.DropIPEntries(pool) {
		t.Fatalf("backendpool.DropIPEntries left %d entries", len(pool.Properties.LoadBalancerBackendAddresses))
	}
}
