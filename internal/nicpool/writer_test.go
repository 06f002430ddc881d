package nicpool_test

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nicpool"
	"github.com/azlb/azlb/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	dev    *devenv.Env
	cmp    *devenv.Compute
	ac     *azure.Clients
	inv    *compute.Inventory
	w      *nicpool.Writer
	events *testutil.EventLog
	pool   string
}

func newEnv(t testing.TB, batch int) *env {
	t.Helper()
	ctx := context.Background()
	dev := testutil.StartEmulator(t, emulator.Options{}, nil)
	cmp, err := dev.Compute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cmp.Close)
	ac := testutil.Clients(t, dev, azure.ClientOptions{Source: "test"})
	inv := testutil.Inventory(t, compute.ClientsOf(ac), nil)
	events := &testutil.EventLog{}
	w, err := nicpool.New(nicpool.Options{Inventory: inv, ScaleSets: ac.ScaleSet, ScaleSetVMs: ac.ScaleSetVM, Interfaces: ac.Interface,
		ResourceGroup: devenv.ResourceGroup, BatchSize: batch, Recorder: events})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dev: dev, cmp: cmp, ac: ac, inv: inv, w: w, events: events}
	e.pool = e.standardLB(t, "kubernetes")
	return e
}

// standardLB creates a Standard load balancer with an empty pool
// "kubernetes" and returns the pool's id.
func (e *env) standardLB(t testing.TB, name string) string {
	t.Helper()
	_, err := e.ac.LoadBalancer.CreateOrUpdate(context.Background(), devenv.ResourceGroup, name, armnetwork.LoadBalancer{
		Location: to.Ptr(devenv.Location),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}},
		},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	return names.LoadBalancerRef{Subscription: devenv.SubscriptionID, ResourceGroup: devenv.ResourceGroup, Name: name}.Child("backendAddressPools", "kubernetes")
}

// members lists the pool's members (the owners of its ip configurations).
func (e *env) members(t testing.TB) []string {
	t.Helper()
	p, err := e.ac.BackendPool.Get(context.Background(), devenv.ResourceGroup, "kubernetes", "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range p.Properties.BackendIPConfigurations {
		out = append(out, names.IPConfigOwner(*c.ID))
	}
	sort.Strings(out)
	return out
}

// writes counts the Compute and NIC PUTs served.
func (e *env) writes() int {
	n := 0
	for _, r := range e.dev.Emulator().Requests() {
		if r.Method == http.MethodPut && (strings.Contains(r.Path, "Microsoft.Compute") || strings.Contains(r.Path, "networkInterfaces")) && r.Status < 300 {
			n++
		}
	}
	return n
}

func nodeOf(vm devenv.NodeVM) *v1.Node {
	n := testutil.Node(vm.Name, testutil.InternalIPs(vm.IPs...))
	n.Spec.ProviderID = vm.ProviderID
	return n
}

func owner(vm devenv.NodeVM) string {
	return strings.ToLower(strings.TrimPrefix(vm.ProviderID, names.ProviderIDPrefix))
}

func TestEnsureMembersThroughComputeAndNICs(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	vmss, err := e.cmp.CreateScaleSet(ctx, "pool1", 3, devenv.ScaleSetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmp.CreateAvailabilitySet(ctx, "as1"); err != nil {
		t.Fatal(err)
	}
	var vms []devenv.NodeVM
	for _, name := range []string{"as-0", "as-1", "as-2"} {
		vm, err := e.cmp.CreateVM(ctx, name, "as1")
		if err != nil {
			t.Fatal(err)
		}
		vms = append(vms, vm)
	}
	if err := e.cmp.PowerAction(ctx, vms[2].ProviderID, devenv.ActionDeallocate); err != nil {
		t.Fatal(err)
	}
	noID := testutil.Node("no-provider-id")
	foreign := testutil.Node("foreign")
	foreign.Spec.ProviderID = strings.Replace(vms[0].ProviderID, devenv.ResourceGroup, "other-rg", 1)
	nodes := []*v1.Node{nodeOf(vmss[0]), nodeOf(vmss[1]), nodeOf(vmss[2]), nodeOf(vms[0]), nodeOf(vms[1]), nodeOf(vms[2]), noID, foreign}
	e.dev.Emulator().ResetRequests()

	res, err := e.w.EnsureMembers(ctx, nicpool.Pool{ID: e.pool, Family: v1.IPv4Protocol}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	// One model, three scale set VMs, two NICs.
	if res.Writes != 6 || e.writes() != 6 {
		t.Fatalf("writes: result %d, emulator %d, want 6", res.Writes, e.writes())
	}
	nicOwner := func(name string) string {
		return strings.ToLower("/subscriptions/" + devenv.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup + "/providers/Microsoft.Network/networkInterfaces/" + name)
	}
	want := []string{owner(vmss[0]), owner(vmss[1]), owner(vmss[2]), nicOwner("as-0-nic"), nicOwner("as-1-nic")}
	sort.Strings(want)
	if got := e.members(t); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("members\n%v\nwant\n%v", got, want)
	}
	if len(res.Members) != 5 || len(res.Skipped) != 3 {
		t.Fatalf("result: members %v skipped %v", res.Members, res.Skipped)
	}
	if !strings.Contains(res.Skipped["as-2"], "not running") {
		t.Fatalf("deallocated VM: %q", res.Skipped["as-2"])
	}
	for _, n := range []string{"no-provider-id", "foreign"} {
		if len(e.events.Find(n, nicpool.EventReasonSkipped)) != 1 {
			t.Fatalf("no %s event for %s: %v", nicpool.EventReasonSkipped, n, e.events.All())
		}
	}
	if len(e.events.Find("as-2", nicpool.EventReasonSkipped)) != 0 {
		t.Fatal("a stopped VM is routine, not worth an event")
	}

	// Nothing changed: no writes.
	e.dev.Emulator().ResetRequests()
	res, err = e.w.EnsureMembers(ctx, nicpool.Pool{ID: e.pool, Family: v1.IPv4Protocol}, nodes)
	if err != nil || res.Writes != 0 || e.writes() != 0 {
		t.Fatalf("second pass: %d writes (%v)", e.writes(), err)
	}

	// Decouple takes everything out, models included, so the load balancer
	// can go.
	lb, err := e.ac.LoadBalancer.Get(ctx, devenv.ResourceGroup, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.ac.LoadBalancer.Delete(ctx, devenv.ResourceGroup, "kubernetes"); azure.Classify(err) != azure.ClassOther || !strings.Contains(err.Error(), "LoadBalancerInUseByVirtualMachineScaleSet") {
		t.Fatalf("delete before decoupling: %v", err)
	}
	n, err := e.w.Decouple(ctx, lb, "")
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 {
		t.Fatalf("decouple wrote %d times, want 6", n)
	}
	if got := e.members(t); len(got) != 0 {
		t.Fatalf("members after decoupling: %v", got)
	}
	if err := e.ac.LoadBalancer.Delete(ctx, devenv.ResourceGroup, "kubernetes"); err != nil {
		t.Fatalf("delete after decoupling: %v", err)
	}
}

func TestEnsureMembersRetriesAStaleEtagAndBatches(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	vmss, err := e.cmp.CreateScaleSet(ctx, "pool1", 5, devenv.ScaleSetOptions{Tags: map[string]string{nicpool.CoordinationTag: ""}})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*v1.Node
	for _, vm := range vmss {
		nodes = append(nodes, nodeOf(vm))
	}
	// The first PUT of VM 2 meets a concurrent writer (412): the writer
	// reads it again and writes once more. So does the first model PUT
	// (the join of the other load balancer's pool, for example).
	for _, re := range []string{"/virtualMachines/2$", "/virtualMachineScaleSets/pool1$"} {
		if _, err := e.dev.Emulator().AddFault(emulator.Fault{Method: http.MethodPut, PathRegex: re, Status: 412, Code: "PreconditionFailed", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	e.dev.Emulator().ResetRequests()
	res, err := e.w.EnsureMembers(ctx, nicpool.Pool{ID: e.pool, Family: v1.IPv4Protocol}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	// One model and five VMs; the 412 is not a write.
	if res.Writes != 6 || e.writes() != 6 || len(e.members(t)) != 5 {
		t.Fatalf("writes %d (emulator %d), members %v", res.Writes, e.writes(), e.members(t))
	}
	reads := map[string]int{}
	for _, r := range e.dev.Emulator().Requests() {
		if r.Method == http.MethodGet && strings.Contains(r.Path, "/virtualMachines/") {
			reads[r.Path[strings.LastIndexByte(r.Path, '/')+1:]]++
		}
	}
	// Every VM is read once when its operation ends; VM 2 once more after
	// its 412.
	if reads["2"] != reads["1"]+1 {
		t.Fatalf("reads per VM %v: VM 2 was not read again after its 412", reads)
	}
	for _, f := range e.dev.Emulator().Faults() {
		if f.Fired != 1 {
			t.Fatalf("fault %s fired %d times, want once", f.Fault.PathRegex, f.Fired)
		}
	}
}

// deletingScaleSets reports every scale set as being deleted, as ARM shows
// one for the duration of its DELETE.
type deletingScaleSets struct{ azure.ScaleSetClient }

func markDeleting(s *armcompute.VirtualMachineScaleSet) {
	if s.Properties == nil {
		s.Properties = &armcompute.VirtualMachineScaleSetProperties{}
	}
	s.Properties.ProvisioningState = to.Ptr("Deleting")
}

func (d deletingScaleSets) Get(ctx context.Context, rg, name string) (*armcompute.VirtualMachineScaleSet, error) {
	s, err := d.ScaleSetClient.Get(ctx, rg, name)
	if err == nil {
		markDeleting(s)
	}
	return s, err
}

func (d deletingScaleSets) List(ctx context.Context, rg string) ([]*armcompute.VirtualMachineScaleSet, error) {
	sets, err := d.ScaleSetClient.List(ctx, rg)
	for _, s := range sets {
		markDeleting(s)
	}
	return sets, err
}

// TestEnsureMembersSkipsADeletingScaleSet: the VMs of a scale set being
// deleted are skipped, each with an event; nothing is written.
func TestEnsureMembersSkipsADeletingScaleSet(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	vmss, err := e.cmp.CreateScaleSet(ctx, "pool1", 2, devenv.ScaleSetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sets := deletingScaleSets{e.ac.ScaleSet}
	inv := testutil.Inventory(t, compute.Clients{ScaleSets: sets, ScaleSetVMs: e.ac.ScaleSetVM, VMs: e.ac.VM, Interfaces: e.ac.Interface}, nil)
	events := &testutil.EventLog{}
	w, err := nicpool.New(nicpool.Options{Inventory: inv, ScaleSets: sets, ScaleSetVMs: e.ac.ScaleSetVM, Interfaces: e.ac.Interface,
		ResourceGroup: devenv.ResourceGroup, Recorder: events})
	if err != nil {
		t.Fatal(err)
	}
	e.dev.Emulator().ResetRequests()
	res, err := w.EnsureMembers(ctx, nicpool.Pool{ID: e.pool, Family: v1.IPv4Protocol}, []*v1.Node{nodeOf(vmss[0]), nodeOf(vmss[1])})
	if err != nil {
		t.Fatal(err)
	}
	if res.Writes != 0 || e.writes() != 0 || len(res.Members) != 0 || len(e.members(t)) != 0 {
		t.Fatalf("writes %d/%d, members %v / %v: want none", res.Writes, e.writes(), res.Members, e.members(t))
	}
	for _, vm := range vmss {
		if !strings.Contains(res.Skipped[vm.Name], "being deleted") || len(e.events.Find(vm.Name, nicpool.EventReasonSkipped)) != 0 ||
			len(events.Find(vm.Name, nicpool.EventReasonSkipped)) != 1 {
			t.Fatalf("%s: skipped %q, events %v", vm.Name, res.Skipped[vm.Name], events.All())
		}
	}
}

// Two load balancers' pools (a public one and its internal twin) joined at
// once over one scale set: the writes of the scale set are made one caller
// at a time, so neither meets the other's write (no 412) and every VM ends
// in both pools.
func TestEnsureMembersOfTwoPoolsAtOnceDoNotConflict(t *testing.T) {
	e := newEnv(t, 1)
	ctx := context.Background()
	ilbPool := e.standardLB(t, "kubernetes-internal")
	vmss, err := e.cmp.CreateScaleSet(ctx, "pool1", 3, devenv.ScaleSetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*v1.Node
	for _, vm := range vmss {
		nodes = append(nodes, nodeOf(vm))
	}
	e.dev.Emulator().SetLatency(20 * time.Millisecond)
	e.dev.Emulator().ResetRequests()
	var wg sync.WaitGroup
	results := make([]nicpool.Result, 2)
	errs := make([]error, 2)
	for i, pool := range []string{e.pool, ilbPool} {
		wg.Go(func() {
			results[i], errs[i] = e.w.EnsureMembers(ctx, nicpool.Pool{ID: pool, Family: v1.IPv4Protocol}, nodes)
		})
	}
	wg.Wait()
	e.dev.Emulator().SetLatency(0)
	for i := range results {
		if errs[i] != nil || len(results[i].Members) != 3 {
			t.Fatalf("pool %d: %+v, %v", i, results[i], errs[i])
		}
	}
	for _, r := range e.dev.Emulator().Requests() {
		if r.Status == http.StatusPreconditionFailed {
			t.Errorf("%s %s met a concurrent write (412)", r.Method, r.Path)
		}
	}
	// The model and three VMs, per pool.
	if n := e.writes(); n != 8 {
		t.Errorf("%d writes, want 8", n)
	}
	if got := e.members(t); len(got) != 3 {
		t.Errorf("public pool members %v", got)
	}
	p, err := e.ac.BackendPool.Get(ctx, devenv.ResourceGroup, "kubernetes-internal", "kubernetes")
	if err != nil || len(p.Properties.BackendIPConfigurations) != 3 {
		t.Fatalf("internal pool %+v, %v", p, err)
	}
}
