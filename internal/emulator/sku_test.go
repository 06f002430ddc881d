package emulator

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// basicLBBody is a Basic load balancer with frontend fe on public IP pip
// and an empty pool "pool".
func basicLBBody(pip string) string {
	return fmt.Sprintf(`{"location":"eastus","sku":{"name":"Basic"},"properties":{
		"frontendIPConfigurations":[{"name":"fe","properties":{"publicIPAddress":{"id":%q}}}],
		"backendAddressPools":[{"name":"pool"}]}}`, netID("rg", "publicIPAddresses", pip))
}

func pipProps(t *testing.T, h *handlerEnv, name string) (map[string]any, map[string]any) {
	t.Helper()
	doc := h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", name), "")
	return doc, doc["properties"].(map[string]any)
}

// The public IP SKU rules: the upgrade Basic -> Standard keeps the address
// and needs a Static, unassociated public IP; a Dynamic one becomes
// Static first (it keeps its address while associated); Standard never
// goes back to Basic.
func TestPublicIPSkuUpgrade(t *testing.T) {
	h := seedHandler(t)
	// "basic" is Basic and Dynamic: it gets its address when the Basic
	// load balancer's frontend uses it.
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "blb"), basicLBBody("basic"))
	_, p := pipProps(t, h, "basic")
	addr, _ := p["ipAddress"].(string)
	if addr == "" || p["ipConfiguration"] == nil {
		t.Fatalf("an associated Dynamic public IP has no address: %v", p)
	}
	upgrade := `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"},"tags":{"k8s-azure-service":"ns/web"}}`
	rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "basic"), upgrade, nil)
	feID := netID("rg", "loadBalancers", "blb") + "/frontendIPConfigurations/fe"
	if rec.Code != 400 || errCodeOf(rec) != "PublicIPAddressInUseCannotUpdate" || !strings.Contains(rec.Body.String(), "is in use by ipconfig "+feID+" and cannot be updated") {
		t.Fatalf("upgrade while associated: %d %s", rec.Code, rec.Body)
	}
	// Dynamic -> Static while associated keeps the address.
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "publicIPAddresses", "basic"), `{"location":"eastus","properties":{"publicIPAllocationMethod":"Static"}}`)
	if _, p := pipProps(t, h, "basic"); p["ipAddress"] != addr || p["publicIPAllocationMethod"] != "Static" {
		t.Fatalf("made Static: %v, want address %s", p, addr)
	}
	before, _ := pipProps(t, h, "basic")
	// Deleting the load balancer disassociates it (a new etag); a Static
	// public IP keeps its address.
	h.mustDo(t, 202, http.MethodDelete, netPath("rg", "loadBalancers", "blb"), "")
	doc, p := pipProps(t, h, "basic")
	if p["ipConfiguration"] != nil || p["ipAddress"] != addr || doc["etag"] == before["etag"] {
		t.Fatalf("after the load balancer delete: %v (etag %v, was %v)", doc, doc["etag"], before["etag"])
	}
	up := h.mustDo(t, 200, http.MethodPut, netPath("rg", "publicIPAddresses", "basic"), upgrade)
	sku := up["sku"].(map[string]any)
	up = up["properties"].(map[string]any)
	if sku["name"] != "Standard" || sku["tier"] != "Regional" || up["ipAddress"] != addr || up["publicIPAllocationMethod"] != "Static" {
		t.Fatalf("upgraded: sku %v props %v, want Standard with address %s", sku, up, addr)
	}
	rec = h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "basic"), `{"location":"eastus","sku":{"name":"Basic"},"properties":{"publicIPAllocationMethod":"Static"}}`, nil)
	if rec.Code != 400 || errCodeOf(rec) != "PublicIPAddressSkuCannotBeDowngraded" {
		t.Fatalf("Standard -> Basic: %d %s", rec.Code, rec.Body)
	}
	rec = h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "basic"), `{"location":"eastus","sku":{"name":"StandardV2"}}`, nil)
	if rec.Code != 400 || errCodeOf(rec) != "PublicIPAddressSkuCannotBeChanged" {
		t.Fatalf("Standard -> StandardV2: %d %s", rec.Code, rec.Body)
	}

	// A Dynamic Basic public IP that is not associated has no address and
	// cannot be upgraded.
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "publicIPAddresses", "dyn"), `{"location":"eastus","sku":{"name":"Basic"}}`)
	rec = h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "dyn"), upgrade, nil)
	if rec.Code != 400 || errCodeOf(rec) != "DynamicPublicIPAddressCannotBeUpgraded" {
		t.Fatalf("upgrade of a Dynamic public IP: %d %s", rec.Code, rec.Body)
	}
	// Static -> Dynamic while not associated releases the address.
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "publicIPAddresses", "st"), `{"location":"eastus","properties":{"publicIPAllocationMethod":"Static"}}`)
	if _, p := pipProps(t, h, "st"); p["ipAddress"] == nil {
		t.Fatalf("a Static public IP has no address: %v", p)
	}
	h.mustDo(t, 200, http.MethodPut, netPath("rg", "publicIPAddresses", "st"), `{"location":"eastus","properties":{"publicIPAllocationMethod":"Dynamic"}}`)
	if _, p := pipProps(t, h, "st"); p["ipAddress"] != nil {
		t.Fatalf("an unassociated Dynamic public IP kept its address: %v", p)
	}
}

func TestLoadBalancerSkuCannotChange(t *testing.T) {
	h := seedHandler(t)
	h.mustDo(t, 201, http.MethodPut, netPath("rg", "loadBalancers", "blb"), basicLBBody("basic"))
	rec := h.do(t, http.MethodPut, netPath("rg", "loadBalancers", "blb"), strings.Replace(basicLBBody("pip2"), `"Basic"`, `"Standard"`, 1), nil)
	if rec.Code != 400 || errCodeOf(rec) != "LoadBalancerSkuCannotBeChanged" {
		t.Fatalf("Basic -> Standard by PUT: %d %s", rec.Code, rec.Body)
	}
}

// putLB creates or replaces a load balancer with pool "pool" of the SKU.
func (ce *computeEnv) putLB(t *testing.T, name string, sku armnetwork.LoadBalancerSKUName) {
	t.Helper()
	p, err := ce.lbs.BeginCreateOrUpdate(ctxT(t), "rg", name, armnetwork.LoadBalancer{
		Location: to.Ptr("eastus"), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(sku)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool")}}},
	}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctxT(t), pollOpts)
	}
	if err != nil {
		t.Fatalf("load balancer %s: %v", name, err)
	}
}

func (ce *computeEnv) putInstance(t *testing.T, vmss, i string, pools ...string) error {
	t.Helper()
	vm, err := ce.vmssVM.Get(ctxT(t), "rg", vmss, i, nil)
	if err != nil {
		t.Fatal(err)
	}
	var refs []*armcompute.SubResource
	for _, p := range pools {
		refs = append(refs, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	cfg := vm.Properties.NetworkProfileConfiguration
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = refs
	p, err := ce.vmssVM.BeginUpdate(ctxT(t), "rg", vmss, i, armcompute.VirtualMachineScaleSetVM{
		Location: vm.Location, Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg},
	}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctxT(t), pollOpts)
	}
	return err
}

// A scale set (its model and its VMs) or an availability set (its VMs'
// NICs) uses Basic or Standard load balancers, never both; a Basic load
// balancer takes its members from one VM set.
func TestSkuMixingWithinVMSets(t *testing.T) {
	ce := newComputeEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, ce.sdkEnv, "rg")
	ce.putLB(t, "basic", armnetwork.LoadBalancerSKUNameBasic)
	ce.putLB(t, "std", armnetwork.LoadBalancerSKUNameStandard)
	basicPool, stdPool := poolID("rg", "basic", "pool"), poolID("rg", "std", "pool")

	// The model and both VMs in the Basic pool.
	ce.putScaleSet(t, "rg", "ss", scaleSet("rg", 2, basicPool), "")
	// The model cannot take the Standard pool while the VMs use Basic.
	_, err := ce.vmss.BeginCreateOrUpdate(ctx, "rg", "ss", scaleSet("rg", 2, stdPool), nil)
	if !hasCode(err, "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed") {
		t.Fatalf("model to Standard while its VMs use Basic: %v", err)
	}
	// Decoupled (model, then VMs), the scale set may join Standard.
	ce.putScaleSet(t, "rg", "ss", scaleSet("rg", 2), "")
	if err := ce.putInstance(t, "ss", "0"); err != nil {
		t.Fatal(err)
	}
	if err := ce.putInstance(t, "ss", "0", stdPool); !hasCode(err, "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed") {
		t.Fatalf("a VM to Standard while another VM uses Basic: %v", err)
	}
	if err := ce.putInstance(t, "ss", "1"); err != nil {
		t.Fatal(err)
	}
	ce.putScaleSet(t, "rg", "ss", scaleSet("rg", 2, stdPool), "")
	if err := ce.putInstance(t, "ss", "0", stdPool); err != nil {
		t.Fatalf("a decoupled scale set joining Standard: %v", err)
	}

	// Availability set: two VMs; one NIC in Basic, the other cannot take
	// Standard.
	if _, err := ce.avsets.CreateOrUpdate(ctx, "rg", "as", armcompute.AvailabilitySet{Location: to.Ptr("eastus"), SKU: &armcompute.SKU{Name: to.Ptr("Aligned")}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"vm-a", "vm-b"} {
		np, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", name+"-nic", nicWithPool("rg"), nil)
		if err != nil {
			t.Fatal(err)
		}
		nic, err := np.PollUntilDone(ctx, pollOpts)
		if err != nil {
			t.Fatal(err)
		}
		vp, err := ce.vms.BeginCreateOrUpdate(ctx, "rg", name, armcompute.VirtualMachine{Location: to.Ptr("eastus"), Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
			OSProfile:       &armcompute.OSProfile{AdminUsername: to.Ptr("azureuser")},
			NetworkProfile:  &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}},
			AvailabilitySet: &armcompute.SubResource{ID: to.Ptr(computeID(testSub, "rg", typeAvSet, "as"))},
		}}, nil)
		if err == nil {
			_, err = vp.PollUntilDone(ctx, pollOpts)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	putNIC := func(name string, pools ...string) error {
		p, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", name, nicWithPool("rg", pools...), nil)
		if err == nil {
			_, err = p.PollUntilDone(ctx, pollOpts)
		}
		return err
	}
	// The Basic load balancer's members are the scale set's: a VM of the
	// availability set cannot join it.
	if err := ce.putInstance(t, "ss", "0", basicPool); !hasCode(err, "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed") {
		t.Fatalf("a scale set VM took Basic while the scale set uses Standard: %v", err)
	}
	if err := ce.putInstance(t, "ss", "0"); err != nil {
		t.Fatal(err)
	}
	if err := ce.putInstance(t, "ss", "1", basicPool); !hasCode(err, "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed") {
		t.Fatalf("a scale set VM took Basic while the model uses Standard: %v", err)
	}
	ce.putScaleSet(t, "rg", "ss", scaleSet("rg", 2), "")
	if err := ce.putInstance(t, "ss", "1", basicPool); err != nil {
		t.Fatal(err)
	}
	if err := putNIC("vm-a-nic", basicPool); !hasCode(err, "VmIsNotInSameAvailabilitySetAsLb") {
		t.Fatalf("an availability set VM joining a Basic load balancer of a scale set: %v", err)
	}
	if err := ce.putInstance(t, "ss", "1"); err != nil {
		t.Fatal(err)
	}
	if err := putNIC("vm-a-nic", basicPool); err != nil {
		t.Fatalf("the availability set's first VM in the Basic load balancer: %v", err)
	}
	if err := putNIC("vm-b-nic", stdPool); !hasCode(err, "DifferentSkuLoadBalancersAndPublicIPAddressNotAllowed") {
		t.Fatalf("the availability set's other VM joining Standard: %v", err)
	}
	if err := putNIC("vm-b-nic", basicPool); err != nil {
		t.Fatalf("the availability set's second VM in the Basic load balancer: %v", err)
	}
}

func hasCode(err error, code string) bool {
	c, status := errorCode(err)
	return status == http.StatusBadRequest && c == code
}
