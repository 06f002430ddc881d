package emulator

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	clocktesting "k8s.io/utils/clock/testing"
)

// imdsGet asks the emulated IMDS as the VM vmName of rg.
func imdsGet(t *testing.T, ce *computeEnv, vmName, rest string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	if hdr == nil {
		hdr = map[string]string{"Metadata": "true"}
	}
	resp, b := ce.raw(t, http.MethodGet, IMDSPath(testSub, "rg", vmName)+rest, "", hdr)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func TestIMDSScaleSetVMAndVM(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ce := newComputeEnv(t, Options{Clock: clk})
	ctx := ctxT(t)
	seedSubnetAt(t, ce, clk)
	m := scaleSet("rg", 2)
	m.Zones = []*string{to.Ptr("1"), to.Ptr("2")}
	ce.putScaleSet(t, "rg", "pool1", m, "")
	vm1, err := ce.vmssVM.Get(ctx, "rg", "pool1", "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	nics, err := ce.nics.NewListVirtualMachineScaleSetVMNetworkInterfacesPager("rg", "pool1", "1", nil).NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantIP := *nics.Value[0].Properties.IPConfigurations[0].Properties.PrivateIPAddress

	ce.emu.ResetRequests()
	status, doc := imdsGet(t, ce, "pool1_1", "/metadata/instance?api-version=2021-02-01", nil)
	if status != http.StatusOK {
		t.Fatalf("IMDS answered %d %v", status, doc)
	}
	c := doc["compute"].(map[string]any)
	want := map[string]string{
		"name": "pool1_1", "resourceId": *vm1.ID, "vmId": *vm1.Properties.VMID, "location": "eastus", "zone": "2",
		"vmSize": "Standard_D2s_v3", "vmScaleSetName": "pool1", "subscriptionId": testSub, "resourceGroupName": "rg",
		"platformFaultDomain": "0", "provider": "Microsoft.Compute",
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("compute.%s = %v, want %s", k, c[k], v)
		}
	}
	if cn := c["osProfile"].(map[string]any)["computerName"]; cn != *vm1.Properties.OSProfile.ComputerName {
		t.Errorf("computerName %v", cn)
	}
	iface := doc["network"].(map[string]any)["interface"].([]any)[0].(map[string]any)
	v4 := iface["ipv4"].(map[string]any)
	if got := v4["ipAddress"].([]any)[0].(map[string]any)["privateIpAddress"]; got != wantIP {
		t.Errorf("privateIpAddress %v, want %s", got, wantIP)
	}
	if sn := v4["subnet"].([]any)[0].(map[string]any); sn["address"] != "10.0.0.0" || sn["prefix"] != "24" {
		t.Errorf("subnet %v", sn)
	}
	// The sub-endpoints and leaves.
	if status, net := imdsGet(t, ce, "pool1_1", "/metadata/instance/network?api-version=2021-02-01", nil); status != 200 || net["interface"] == nil {
		t.Errorf("network: %d %v", status, net)
	}
	resp, b := ce.raw(t, http.MethodGet, IMDSPath(testSub, "rg", "pool1_1")+"/metadata/instance/compute/vmSize?api-version=2021-02-01&format=text", "",
		map[string]string{"Metadata": "true"})
	if resp.StatusCode != 200 || string(b) != "Standard_D2s_v3" {
		t.Errorf("text leaf: %d %q", resp.StatusCode, b)
	}
	for _, r := range ce.emu.Requests() {
		if r.Kind != "imds" {
			t.Errorf("IMDS request logged as %q: %s", r.Kind, r.Path)
		}
	}

	// A standalone VM with its own NIC; a NIC change reaches IMDS.
	np, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", "vm1-nic", armnetwork.Interface{Location: to.Ptr("eastus"),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnetRef("rg"))},
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: to.Ptr("10.0.0.50")}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nic, err := np.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	vmp, err := ce.vms.BeginCreateOrUpdate(ctx, "rg", "vm1", armcompute.VirtualMachine{Location: to.Ptr("eastus"),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD4SV3)},
			NetworkProfile:  &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}},
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vmp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	addr := func() any {
		_, d := imdsGet(t, ce, "vm1", "/metadata/instance?api-version=2023-07-01", nil)
		if d["compute"].(map[string]any)["vmSize"] != "Standard_D4s_v3" || d["compute"].(map[string]any)["zone"] != "" {
			t.Errorf("VM compute %v", d["compute"])
		}
		return d["network"].(map[string]any)["interface"].([]any)[0].(map[string]any)["ipv4"].(map[string]any)["ipAddress"].([]any)[0].(map[string]any)["privateIpAddress"]
	}
	if got := addr(); got != "10.0.0.50" {
		t.Fatalf("VM address %v", got)
	}
	nic.Properties.IPConfigurations[0].Properties.PrivateIPAddress = to.Ptr("10.0.0.51")
	up, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", "vm1-nic", nic.Interface, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	if got := addr(); got != "10.0.0.51" {
		t.Fatalf("VM address after the NIC changed: %v", got)
	}

	// A Flexible scale set's VM is a VM that names its scale set.
	flex := ce.putScaleSet(t, "rg", "flex", armcompute.VirtualMachineScaleSet{Location: to.Ptr("eastus"), SKU: &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Capacity: to.Ptr[int64](0)},
		Properties: &armcompute.VirtualMachineScaleSetProperties{OrchestrationMode: to.Ptr(armcompute.OrchestrationModeFlexible),
			PlatformFaultDomainCount: to.Ptr[int32](1)}}, "")
	np2, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", "flex-vm-nic", armnetwork.Interface{Location: to.Ptr("eastus"),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnetRef("rg"))}}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nic2, err := np2.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := ce.vms.BeginCreateOrUpdate(ctx, "rg", "flex-vm", armcompute.VirtualMachine{Location: to.Ptr("eastus"),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile:        &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
			NetworkProfile:         &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic2.ID}}},
			VirtualMachineScaleSet: &armcompute.SubResource{ID: flex.ID},
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	fvm, err := fp.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	_, d := imdsGet(t, ce, "flex-vm", "/metadata/instance/compute?api-version=2021-02-01", nil)
	if d["vmScaleSetName"] != "flex" || d["resourceId"] != *fvm.ID || d["name"] != "flex-vm" {
		t.Fatalf("Flexible scale set VM: %v", d)
	}
}

func TestIMDSRequestRules(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ce := newComputeEnv(t, Options{Clock: clk})
	seedSubnetAt(t, ce, clk)
	ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 1), "")
	md := map[string]string{"Metadata": "true"}
	cases := []struct {
		name, vm, rest string
		hdr            map[string]string
		status         int
		errPrefix      string
		newest         bool
	}{
		{"no Metadata header", "pool1_0", "/metadata/instance?api-version=2021-02-01", map[string]string{"X-Other": "1"}, 400, "Bad request. Required metadata header", false},
		{"Metadata: false", "pool1_0", "/metadata/instance?api-version=2021-02-01", map[string]string{"Metadata": "false"}, 400, "Bad request. Required metadata header", false},
		{"X-Forwarded-For", "pool1_0", "/metadata/instance?api-version=2021-02-01", map[string]string{"Metadata": "true", "X-Forwarded-For": "1.2.3.4"}, 400, "Bad request.", false},
		{"no api-version", "pool1_0", "/metadata/instance", md, 400, "Bad request. api-version was not specified", true},
		{"unknown api-version", "pool1_0", "/metadata/instance?api-version=2099-01-01", md, 400, "Bad request. api-version is invalid", true},
		{"unknown path", "pool1_0", "/metadata/other?api-version=2021-02-01", md, 404, "Not found", false},
		{"unknown member", "pool1_0", "/metadata/instance/compute/nope?api-version=2021-02-01", md, 404, "Not found", false},
		{"unknown VM", "pool1_9", "/metadata/instance?api-version=2021-02-01", md, 404, "Not found", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := imdsGet(t, ce, tc.vm, tc.rest, tc.hdr)
			if status != tc.status || !strings.HasPrefix(body["error"].(string), tc.errPrefix) {
				t.Fatalf("%d %v, want %d %q", status, body, tc.status, tc.errPrefix)
			}
			if nv, _ := body["newest-versions"].([]any); tc.newest != (len(nv) == 3) {
				t.Fatalf("newest-versions %v", body["newest-versions"])
			}
		})
	}
	resp, _ := ce.raw(t, http.MethodPost, IMDSPath(testSub, "rg", "pool1_0")+"/metadata/instance?api-version=2021-02-01", "", md)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST answered %d", resp.StatusCode)
	}

	// A deallocated VM runs no guest: the request gets no answer.
	p, err := ce.vmssVM.BeginDeallocate(ctxT(t), "rg", "pool1", "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(ctxT(t), pollOpts); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, IMDSPath(testSub, "rg", "pool1_0")+"/metadata/instance?api-version=2021-02-01", nil)
	req.Header.Set("Metadata", "true")
	defer func() {
		if r := recover(); r == nil || !errors.Is(r.(error), http.ErrAbortHandler) {
			t.Fatalf("a deallocated VM's IMDS request: %v", r)
		}
	}()
	ce.emu.ServeHTTP(httptest.NewRecorder(), req)
}
