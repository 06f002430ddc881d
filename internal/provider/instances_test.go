package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

func TestInstancesV2FollowTheVMs(t *testing.T) {
	ctx := context.Background()
	dev := testutil.StartEmulator(t, emulator.Options{}, nil)
	cmp, err := dev.Compute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cmp.Close()
	vmss, err := cmp.CreateScaleSet(ctx, "pool1", 2, devenv.ScaleSetOptions{Prefix: "aks-pool1-"})
	if err != nil {
		t.Fatal(err)
	}
	vm, err := cmp.CreateVM(ctx, "aks-as-0", "")
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	ac := testutil.Clients(t, dev, azure.ClientOptions{Source: "test"})
	inv := testutil.Inventory(t, compute.ClientsOf(ac), clk)
	inst := NewInstances(inv, 0)
	withID := func(name, providerID string) *v1.Node {
		n := testutil.Node(name)
		n.Spec.ProviderID = providerID
		return n
	}
	n0 := withID(vmss[0].Name, vmss[0].ProviderID)

	md, err := inst.InstanceMetadata(ctx, n0)
	if err != nil {
		t.Fatal(err)
	}
	if md.ProviderID != vmss[0].ProviderID || md.InstanceType != "Standard_D2s_v3" || md.Region != devenv.Location || md.Zone != "0" ||
		len(md.NodeAddresses) != 2 || md.NodeAddresses[0].Address != vmss[0].IPs[0] {
		t.Fatalf("metadata %+v", md)
	}
	// A node without a providerID gets its VM's.
	md, err = inst.InstanceMetadata(ctx, testutil.Node("aks-as-0"))
	if err != nil || !strings.EqualFold(md.ProviderID, vm.ProviderID) {
		t.Fatalf("metadata by name: %+v %v", md, err)
	}
	_, err = inst.InstanceMetadata(ctx, testutil.Node("nobody"))
	if !errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Fatalf("unknown node: %v", err)
	}

	if ok, err := inst.InstanceExists(ctx, n0); !ok || err != nil {
		t.Fatalf("exists: %v %v", ok, err)
	}
	if down, err := inst.InstanceShutdown(ctx, n0); down || err != nil {
		t.Fatalf("running VM shut down: %v %v", down, err)
	}
	if err := cmp.PowerAction(ctx, vmss[0].ProviderID, devenv.ActionDeallocate); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultPowerStateMaxAge)
	if down, err := inst.InstanceShutdown(ctx, n0); !down || err != nil {
		t.Fatalf("deallocated VM not shut down: %v %v", down, err)
	}
	if err := cmp.PowerAction(ctx, vmss[0].ProviderID, devenv.ActionStart); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultPowerStateMaxAge)
	if down, err := inst.InstanceShutdown(ctx, n0); down || err != nil {
		t.Fatalf("started VM still shut down: %v %v", down, err)
	}

	gone := withID("gone", strings.Replace(vmss[0].ProviderID, "/virtualMachines/0", "/virtualMachines/9", 1))
	if ok, err := inst.InstanceExists(ctx, gone); ok || err != nil {
		t.Fatalf("missing VM exists: %v %v", ok, err)
	}
	// A providerID that is not ours is an error, never "gone" (the lifecycle
	// controller deletes nodes whose VM is gone).
	for _, pid := range []string{"kind://docker/n1", strings.Replace(vmss[0].ProviderID, devenv.SubscriptionID, "00000000-0000-0000-0000-000000000009", 1)} {
		if ok, err := inst.InstanceExists(ctx, withID("x", pid)); ok || err == nil {
			t.Fatalf("providerID %s: exists=%v err=%v", pid, ok, err)
		}
	}
}

// The controller refuses loadBalancerSku basic before it builds anything.
func TestNewCloudRefusesBasic(t *testing.T) {
	cfg := testutil.FakeConfig(t, func(c *config.Config) { c.LoadBalancerSKU = config.LoadBalancerSKUBasic })
	_, err := NewCloud(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "loadBalancerSku: Basic Load Balancer was retired by Azure on 2025-09-30") {
		t.Fatalf("NewCloud with a Basic SKU: %v", err)
	}
}
