package azure

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/emulator"
)

// seedScaleSet creates a virtual network and a Uniform scale set of two
// VMs whose NIC lists the seeded load balancer's pool.
func (env *emuEnv) seedScaleSet(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	vnets, err := armnetwork.NewVirtualNetworksClient(emuSub, env.c.Credential(), env.c.ARMClientOptions("vnet"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := vnets.BeginCreateOrUpdate(ctx, emuRG, "vnet", armnetwork.VirtualNetwork{
		Location: to.Ptr(emuLoc),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctx, nil); err != nil {
		t.Fatal(err)
	}
	subnet := "/subscriptions/" + emuSub + "/resourceGroups/" + emuRG + "/providers/Microsoft.Network/virtualNetworks/vnet/subnets/nodes"
	pool := "/subscriptions/" + emuSub + "/resourceGroups/" + emuRG + "/providers/Microsoft.Network/loadBalancers/" + emuLB + "/backendAddressPools/pool"
	_, err = env.c.ScaleSet.CreateOrUpdate(ctx, emuRG, "pool1", armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(emuLoc),
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Capacity: to.Ptr[int64](2)},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr("nic"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary: to.Ptr(true),
							IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
								Name: to.Ptr("ipconfig1"),
								Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
									Subnet:                          &armcompute.APIEntityReference{ID: to.Ptr(subnet)},
									LoadBalancerBackendAddressPools: []*armcompute.SubResource{{ID: to.Ptr(pool)}},
								},
							}},
						},
					}},
				},
			},
		},
	}, "")
	if err != nil {
		t.Fatalf("create scale set: %v", err)
	}
}

func TestComputeClientsAgainstEmulator(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "test", nil)
	env.seed(t)
	env.seedScaleSet(t)
	ctx := context.Background()

	vmss, err := env.c.ScaleSet.Get(ctx, emuRG, "pool1")
	if err != nil || *vmss.Etag != `"1"` {
		t.Fatalf("scale set get: %v %v", vmss, err)
	}
	if all, err := env.c.ScaleSet.List(ctx, emuRG); err != nil || len(all) != 1 {
		t.Fatalf("scale set list: %d %v", len(all), err)
	}
	vms, err := env.c.ScaleSetVM.List(ctx, emuRG, "pool1")
	if err != nil || len(vms) != 2 {
		t.Fatalf("scale set VM list: %d %v", len(vms), err)
	}
	if vms[0].Properties.InstanceView == nil || len(vms[0].Properties.InstanceView.Statuses) != 2 {
		t.Fatalf("the list has no instance views: %+v", vms[0].Properties.InstanceView)
	}

	// A VM update with a stale etag is a conflict; with the current one it
	// is written and the etag moves.
	vm := vms[1]
	cfg := vm.Properties.NetworkProfileConfiguration
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = nil
	body := armcompute.VirtualMachineScaleSetVM{Location: vm.Location, Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg}}
	_, err = env.c.ScaleSetVM.Update(ctx, emuRG, "pool1", "1", body, `"9"`)
	if Classify(err) != ClassConflict || StatusCode(err) != 412 {
		t.Fatalf("stale etag: %v (class %v)", err, Classify(err))
	}
	out, err := env.c.ScaleSetVM.Update(ctx, emuRG, "pool1", "1", body, *vm.Etag)
	if err != nil || *out.Etag != `"2"` {
		t.Fatalf("update: %v %v", out, err)
	}
	got, err := env.c.ScaleSetVM.Get(ctx, emuRG, "pool1", "1")
	if err != nil || got.Properties.InstanceView == nil {
		t.Fatalf("get with instance view: %v %v", got, err)
	}

	nics, err := env.c.Interface.ListScaleSetNICs(ctx, emuRG, "pool1")
	if err != nil || len(nics) != 2 {
		t.Fatalf("scale set NICs: %d %v", len(nics), err)
	}
	if p := nics[0].Properties.IPConfigurations[0].Properties; *p.PrivateIPAddress == "" || len(p.LoadBalancerBackendAddressPools) != 1 {
		t.Fatalf("instance 0 NIC: %+v", p)
	}
	if list, err := env.c.VM.List(ctx, emuRG); err != nil || len(list) != 0 {
		t.Fatalf("VM list: %v %v", list, err)
	}
	_, err = env.c.VM.Get(ctx, emuRG, "missing")
	if Classify(err) != ClassStale || !strings.Contains(err.Error(), "azure virtualMachine get") {
		t.Fatalf("missing VM: %v", err)
	}
	var requests []string
	for _, r := range env.armRequests() {
		if strings.Contains(r.Path, "Microsoft.Compute") && r.Method == "PUT" {
			requests = append(requests, r.Path)
		}
	}
	if len(requests) != 3 { // scale set create, the 412, the update
		t.Fatalf("Compute writes: %v", requests)
	}
}
