package provider

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nicpool"
	"github.com/azlb/azlb/internal/testutil"
)

// nicHarness is a provider with NIC-based pools on a seeded emulator
// holding a scale set and availability-set VMs.
type nicHarness struct {
	*harness
	cmp   *devenv.Compute
	idx   cache.Indexer
	vmss  []devenv.NodeVM
	avset []devenv.NodeVM
}

func newNICHarness(t *testing.T, pool config.Config) *nicHarness {
	t.Helper()
	ctx := context.Background()
	env := testutil.StartEmulator(t, emulator.Options{}, func(c *config.Config) {
		c.LoadBalancerBackendPoolConfigurationType = pool.LoadBalancerBackendPoolConfigurationType
	})
	clients := testutil.Clients(t, env, azure.ClientOptions{})
	cmp, err := env.Compute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cmp.Close)
	h := &nicHarness{harness: &harness{env: env, clients: clients, recorder: record.NewFakeRecorder(1000)}, cmp: cmp,
		idx: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})}
	if h.vmss, err = cmp.CreateScaleSet(ctx, "pool1", 3, devenv.ScaleSetOptions{Prefix: "aks-pool1-"}); err != nil {
		t.Fatal(err)
	}
	if err := cmp.CreateAvailabilitySet(ctx, "as1"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"aks-as-0", "aks-as-1"} {
		vm, err := cmp.CreateVM(ctx, n, "as1")
		if err != nil {
			t.Fatal(err)
		}
		h.avset = append(h.avset, vm)
	}
	h.p = h.newProvider(t)
	env.Emulator().ResetRequests()
	return h
}

// newProvider builds a provider with its own store (with the NIC pool
// decoupler) and VM inventory, as NewCloud does.
func (h *nicHarness) newProvider(t *testing.T) *Provider {
	t.Helper()
	p := newComputeProvider(t, h.env.Config, h.clients, h.recorder)
	p.nodes = corelisters.NewNodeLister(h.idx)
	return p
}

// newComputeProvider builds a provider as NewCloud does: its own store
// (with the NIC pool decoupler) and VM inventory, so a new one is a
// restarted controller.
func newComputeProvider(t testing.TB, cfg *config.Config, clients *azure.Clients, rec record.EventRecorder) *Provider {
	t.Helper()
	inv, err := NewInventory(cfg, clients)
	if err != nil {
		t.Fatal(err)
	}
	dec := &storeDecoupler{}
	store := testutil.StartStore(t, lbstore.Options{Config: cfg, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool, Decoupler: dec})
	p, err := New(Options{Config: cfg, Clients: clients, Store: store, Recorder: rec, Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	dec.w = p.nicPools
	return p
}

func (h *nicHarness) node(t *testing.T, vm devenv.NodeVM, opts ...testutil.NodeOption) *v1.Node {
	t.Helper()
	n := testutil.Node(vm.Name, append([]testutil.NodeOption{testutil.InternalIPs(vm.IPs...)}, opts...)...)
	n.Spec.ProviderID = vm.ProviderID
	if err := h.idx.Add(n); err != nil {
		t.Fatal(err)
	}
	return n
}

// poolState returns, per member owner (lower-cased), the admin state of its
// NIC-derived entry in the cluster pool, and whether any IP entry is left.
func (h *nicHarness) poolState(t *testing.T) (map[string]string, bool) {
	t.Helper()
	p, err := h.clients.BackendPool.Get(context.Background(), devenv.ResourceGroup, "kubernetes", "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	ips := false
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		if backendpool.IsNICEntry(a) {
			out[backendpool.EntryKey(a)] = string(backendpool.AdminStateOf(a))
		} else {
			ips = true
		}
	}
	if len(out) != len(p.Properties.BackendIPConfigurations) {
		t.Fatalf("%d NIC-derived entries but %d backendIPConfigurations", len(out), len(p.Properties.BackendIPConfigurations))
	}
	return out, ips
}

func ownerOf(vm devenv.NodeVM) string {
	return strings.ToLower(strings.TrimPrefix(vm.ProviderID, names.ProviderIDPrefix))
}

func nicOwnerOf(vm devenv.NodeVM) string {
	return strings.ToLower("/subscriptions/" + devenv.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup +
		"/providers/Microsoft.Network/networkInterfaces/" + vm.Name + "-nic")
}

// computeWrites counts the Compute and NIC PUTs served.
func (h *nicHarness) computeWrites() int {
	n := 0
	for _, r := range h.env.Emulator().Requests() {
		if r.Method == http.MethodPut && (strings.Contains(r.Path, "Microsoft.Compute") || strings.Contains(r.Path, "/networkInterfaces/")) {
			n++
		}
	}
	return n
}

func TestNICPoolsFollowNodesAndTaints(t *testing.T) {
	h := newNICHarness(t, config.Config{LoadBalancerBackendPoolConfigurationType: config.BackendPoolNodeIPConfiguration})
	ctx := context.Background()
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80)
	tainted := testutil.Taints(testutil.Taint(backendpool.TaintShutdown, ""))
	nodes := []*v1.Node{h.node(t, h.vmss[0]), h.node(t, h.vmss[1], tainted), h.node(t, h.vmss[2]), h.node(t, h.avset[0]), h.node(t, h.avset[1])}

	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	got, ips := h.poolState(t)
	want := map[string]string{ownerOf(h.vmss[0]): "None", ownerOf(h.vmss[1]): "Down", ownerOf(h.vmss[2]): "None",
		nicOwnerOf(h.avset[0]): "None", nicOwnerOf(h.avset[1]): "None"}
	if ips || !equalMaps(got, want) {
		t.Fatalf("pool %v (IP entries %v), want %v", got, ips, want)
	}
	// One model, three VMs, two NICs.
	if n := h.computeWrites(); n != 6 {
		t.Fatalf("%d Compute and NIC writes, want 6", n)
	}

	// Steady state: nothing written.
	h.env.Emulator().ResetRequests()
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if n := h.writes(); n != 0 {
		t.Fatalf("an unchanged UpdateLoadBalancer wrote %d times", n)
	}

	// An excluded node leaves; the taint is lifted.
	h.node(t, h.avset[1], testutil.Labels(backendpool.LabelExcludeFromLB, "true"))
	untainted := h.node(t, h.vmss[1])
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{nodes[0], untainted, nodes[2], nodes[3]}); err != nil {
		t.Fatal(err)
	}
	got, _ = h.poolState(t)
	delete(want, nicOwnerOf(h.avset[1]))
	want[ownerOf(h.vmss[1])] = "None"
	if !equalMaps(got, want) {
		t.Fatalf("after exclusion and untaint: %v, want %v", got, want)
	}

	// The last Service leaves: the pools are decoupled and the load balancer
	// goes.
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	if lb := h.lb(t, "kubernetes"); lb != nil {
		t.Fatal("load balancer kept")
	}
	vms, err := h.clients.ScaleSetVM.List(ctx, devenv.ResourceGroup, "pool1")
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms {
		ic := vm.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0]
		if len(ic.Properties.LoadBalancerBackendAddressPools) != 0 {
			t.Fatalf("VM %s still lists %v", *vm.Name, ic.Properties.LoadBalancerBackendAddressPools)
		}
	}
}

func TestNICPoolsSwitchFromAndToIPPools(t *testing.T) {
	h := newNICHarness(t, config.Config{LoadBalancerBackendPoolConfigurationType: config.BackendPoolNodeIP})
	ctx := context.Background()
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80)
	nodes := []*v1.Node{h.node(t, h.vmss[0]), h.node(t, h.avset[0])}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if got, ips := h.poolState(t); len(got) != 0 || !ips {
		t.Fatalf("IP pool: NIC entries %v, IP entries %v", got, ips)
	}

	// nodeIP -> nodeIPConfiguration: IP entries go, NIC members come.
	h.env.Config.LoadBalancerBackendPoolConfigurationType = config.BackendPoolNodeIPConfiguration
	h.p = h.newProvider(t)
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	got, ips := h.poolState(t)
	if ips || len(got) != 2 {
		t.Fatalf("after the switch to NIC: %v, IP entries %v", got, ips)
	}
	lb := h.lb(t, "kubernetes")
	if p := findPool(lb, "kubernetes"); p.Properties.VirtualNetwork != nil {
		t.Fatal("the NIC-based pool kept its virtual network")
	}

	// nodeIPConfiguration -> nodeIP: the members leave (model included),
	// then the IP entries are written.
	h.env.Config.LoadBalancerBackendPoolConfigurationType = config.BackendPoolNodeIP
	h.p = h.newProvider(t)
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	got, ips = h.poolState(t)
	if len(got) != 0 || !ips {
		t.Fatalf("after the switch back: NIC entries %v, IP entries %v", got, ips)
	}
	vmss, err := h.clients.ScaleSet.Get(ctx, devenv.ResourceGroup, "pool1")
	if err != nil {
		t.Fatal(err)
	}
	ic := vmss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0]
	if len(ic.Properties.LoadBalancerBackendAddressPools) != 0 {
		t.Fatalf("the model still lists %v", ic.Properties.LoadBalancerBackendAddressPools)
	}
}

func TestNICPoolsSkipBadInputWithEvents(t *testing.T) {
	h := newNICHarness(t, config.Config{LoadBalancerBackendPoolConfigurationType: config.BackendPoolNodeIPConfiguration})
	ctx := context.Background()
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80)
	noID := testutil.Node("no-provider-id", testutil.InternalIPs("10.240.9.9"))
	foreign := h.node(t, devenv.NodeVM{Name: "foreign", IPs: []string{"10.240.9.8"},
		ProviderID: strings.Replace(h.avset[0].ProviderID, devenv.ResourceGroup, "other-rg", 1)})
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{noID, foreign, h.node(t, h.vmss[0])}); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.poolState(t); len(got) != 1 {
		t.Fatalf("members %v, want only the scale set VM", got)
	}
	var events []string
	for len(h.recorder.Events) > 0 {
		events = append(events, <-h.recorder.Events)
	}
	sort.Strings(events)
	skipped := 0
	for _, e := range events {
		if strings.Contains(e, nicpool.EventReasonSkipped) {
			skipped++
		}
	}
	if skipped != 2 {
		t.Fatalf("events %v, want a %s for each of the two nodes", events, nicpool.EventReasonSkipped)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A standalone VM deleted with its node: its NIC stays (delete option
// Detach) but its ip configuration leaves the pool (the audit: it stayed a
// member for ever; issue 32 item 3).
func TestNICPoolsDeletedVMsNICLeaves(t *testing.T) {
	h := newNICHarness(t, config.Config{LoadBalancerBackendPoolConfigurationType: config.BackendPoolNodeIPConfiguration})
	ctx := context.Background()
	svc := testService("web", "21111111-2222-3333-4444-555555555555", nil, 80)
	nodes := []*v1.Node{h.node(t, h.vmss[0]), h.node(t, h.avset[0]), h.node(t, h.avset[1])}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	if err := h.cmp.DeleteVM(ctx, h.avset[1].Name); err != nil {
		t.Fatal(err)
	}
	if err := h.idx.Delete(nodes[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := h.clients.Interface.Get(ctx, devenv.ResourceGroup, h.avset[1].Name+"-nic"); err != nil {
		t.Fatalf("the NIC of the deleted VM should stay: %v", err)
	}
	if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes[:2]); err != nil {
		t.Fatal(err)
	}
	got, _ := h.poolState(t)
	want := map[string]string{ownerOf(h.vmss[0]): "None", nicOwnerOf(h.avset[0]): "None"}
	if !equalMaps(got, want) {
		t.Fatalf("pool %v, want %v (the deleted VM's NIC must leave)", got, want)
	}
}
