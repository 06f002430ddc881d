package compute_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

type env struct {
	dev *devenv.Env
	c   *devenv.Compute
	clk *clocktesting.FakeClock
	inv *compute.Inventory
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dev := testutil.StartEmulator(t, emulator.Options{}, nil)
	c, err := dev.Compute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	clk := clocktesting.NewFakeClock(time.Now())
	ac := testutil.Clients(t, dev, azure.ClientOptions{Source: "test"})
	inv := testutil.Inventory(t, compute.ClientsOf(ac), clk)
	return &env{dev: dev, c: c, clk: clk, inv: inv}
}

// lists counts the listings of Compute VMs served so far.
func (e *env) lists() int {
	n := 0
	for _, r := range e.dev.Emulator().Requests() {
		if r.Method == http.MethodGet && (strings.HasSuffix(r.Path, "/virtualMachines") || strings.HasSuffix(r.Path, "/networkInterfaces")) {
			n++
		}
	}
	return n
}

func node(name, providerID string) *v1.Node {
	n := testutil.Node(name)
	n.Spec.ProviderID = providerID
	return n
}

func TestInventoryFindsEveryKindOfVM(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	vmss, err := e.c.CreateScaleSet(ctx, "pool1", 2, devenv.ScaleSetOptions{Prefix: "aks-pool1-"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.CreateAvailabilitySet(ctx, "as1"); err != nil {
		t.Fatal(err)
	}
	vm, err := e.c.CreateVM(ctx, "aks-as-0", "as1")
	if err != nil {
		t.Fatal(err)
	}

	inst, err := e.inv.ForNode(ctx, node(vmss[1].Name, vmss[1].ProviderID), 0)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Ref.Kind != names.ScaleSetVM || inst.ComputerName != "aks-pool1-000001" || inst.PowerState != compute.PowerRunning ||
		!inst.Running() || inst.Shutdown() || inst.VMSize != "Standard_D2s_v3" || len(inst.NICIDs) != 1 {
		t.Fatalf("scale set VM: %+v", inst)
	}
	if keys := inst.OwnerKeys(); len(keys) != 1 || keys[0] != strings.ToLower(strings.TrimPrefix(vmss[1].ProviderID, names.ProviderIDPrefix)) {
		t.Fatalf("owner keys %v", keys)
	}
	addrs, err := e.inv.Addresses(ctx, inst, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 2 || addrs[0].Address != vmss[1].IPs[0] || addrs[1] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "aks-pool1-000001"}) {
		t.Fatalf("addresses %v, want %s and the computer name", addrs, vmss[1].IPs[0])
	}

	// By name, for a node without a providerID.
	byName, err := e.inv.ForNode(ctx, node("aks-as-0", ""), 0)
	if err != nil {
		t.Fatal(err)
	}
	if byName.Ref.Kind != names.StandaloneVM || !strings.HasSuffix(byName.AvailabilitySetID, "/availabilitySets/as1") ||
		byName.Ref.ProviderID() != vm.ProviderID {
		t.Fatalf("standalone VM: %+v", byName)
	}
	if keys := byName.OwnerKeys(); len(keys) != 1 || !strings.HasSuffix(keys[0], "/networkinterfaces/aks-as-0-nic") {
		t.Fatalf("standalone VM owner keys %v", keys)
	}
	if got, err := e.inv.ForNode(ctx, node("aks-pool1-000000", ""), 0); err != nil || got.ID != strings.TrimPrefix(vmss[0].ProviderID, names.ProviderIDPrefix) {
		t.Fatalf("scale set VM by computer name: %v %v", got, err)
	}

	_, err = e.inv.ForNode(ctx, node("gone", strings.Replace(vmss[0].ProviderID, "/virtualMachines/0", "/virtualMachines/7", 1)), 0)
	if !errors.Is(err, compute.ErrNotFound) {
		t.Fatalf("missing instance: %v", err)
	}
	_, err = e.inv.ForNode(ctx, node("odd", "kind://docker/x"), 0)
	if err == nil || errors.Is(err, compute.ErrNotFound) || !strings.Contains(err.Error(), "not an Azure VM") {
		t.Fatalf("foreign providerID: %v", err)
	}
	_, err = e.inv.ForNode(ctx, node("nobody", ""), 0)
	if !errors.Is(err, compute.ErrNotFound) {
		t.Fatalf("unknown node name: %v", err)
	}
}

func TestInventoryListsEachScopeOncePerPeriod(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	vmss, err := e.c.CreateScaleSet(ctx, "pool1", 3, devenv.ScaleSetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.dev.Emulator().ResetRequests()
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Go(func() {
			inst, err := e.inv.ForNode(ctx, node("n", vmss[i%3].ProviderID), 0)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := e.inv.Addresses(ctx, inst, 0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.lists(); n != 2 {
		t.Fatalf("60 lookups listed %d times, want one VM and one NIC listing", n)
	}

	// Power state is only as fresh as the maxAge asked for.
	if err := e.c.PowerAction(ctx, vmss[0].ProviderID, devenv.ActionDeallocate); err != nil {
		t.Fatal(err)
	}
	ref, _ := names.ParseProviderID(vmss[0].ProviderID)
	if inst, _ := e.inv.Get(ctx, ref, 0); inst.PowerState != compute.PowerRunning {
		t.Fatalf("the cached listing was not used: %s", inst.PowerState)
	}
	e.clk.Step(6 * time.Second)
	inst, err := e.inv.Get(ctx, ref, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if inst.PowerState != compute.PowerDeallocated || !inst.Shutdown() || inst.Running() {
		t.Fatalf("after deallocate: %s shutdown=%v", inst.PowerState, inst.Shutdown())
	}

	// A miss lists again only when the listing is older than MissRefresh.
	e.dev.Emulator().ResetRequests()
	missing := ref
	missing.Instance = "9"
	for i := 0; i < 3; i++ {
		if _, err := e.inv.Get(ctx, missing, 0); !errors.Is(err, compute.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if n := e.lists(); n != 0 {
		t.Fatalf("misses on a fresh listing listed %d times", n)
	}
	e.clk.Step(compute.DefaultMissRefresh)
	for i := 0; i < 3; i++ {
		_, _ = e.inv.Get(ctx, missing, 0)
	}
	if n := e.lists(); n != 1 {
		t.Fatalf("misses on an old listing listed %d times, want 1", n)
	}

	// Invalidate makes the next lookup list again.
	e.inv.Invalidate(ref)
	if _, err := e.inv.Get(ctx, ref, 0); err != nil {
		t.Fatal(err)
	}
	if n := e.lists(); n != 2 {
		t.Fatalf("after Invalidate: %d listings, want 2", n)
	}
}
