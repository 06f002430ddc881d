package emulator

import (
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	clocktesting "k8s.io/utils/clock/testing"
)

// computeEnv adds Compute clients to an sdkEnv.
type computeEnv struct {
	*sdkEnv
	vmss   *armcompute.VirtualMachineScaleSetsClient
	vmssVM *armcompute.VirtualMachineScaleSetVMsClient
	vms    *armcompute.VirtualMachinesClient
	avsets *armcompute.AvailabilitySetsClient
	nics   *armnetwork.InterfacesClient
}

func newComputeEnv(t *testing.T, o Options) *computeEnv {
	t.Helper()
	env := newSDKEnv(t, o)
	ce := &computeEnv{sdkEnv: env}
	var err error
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	ce.vmss, err = armcompute.NewVirtualMachineScaleSetsClient(testSub, env.cred, env.opts)
	must(err)
	ce.vmssVM, err = armcompute.NewVirtualMachineScaleSetVMsClient(testSub, env.cred, env.opts)
	must(err)
	ce.vms, err = armcompute.NewVirtualMachinesClient(testSub, env.cred, env.opts)
	must(err)
	ce.avsets, err = armcompute.NewAvailabilitySetsClient(testSub, env.cred, env.opts)
	must(err)
	ce.nics, err = armnetwork.NewInterfacesClient(testSub, env.cred, env.opts)
	must(err)
	return ce
}

func poolID(rg, lb, pool string) string {
	return netID(rg, "loadBalancers", lb) + "/backendAddressPools/" + pool
}

func subnetRef(rg string) string { return netID(rg, "virtualNetworks", "vnet") + "/subnets/nodes" }

// scaleSet is a Uniform scale set model with one NIC whose ip
// configuration lists pools.
func scaleSet(rg string, capacity int64, pools ...string) armcompute.VirtualMachineScaleSet {
	var refs []*armcompute.SubResource
	for _, p := range pools {
		refs = append(refs, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	return armcompute.VirtualMachineScaleSet{
		Location: to.Ptr("eastus"),
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Capacity: to.Ptr(capacity)},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			UpgradePolicy: &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)},
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr("aks-pool1-"), AdminUsername: to.Ptr("azureuser")},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr("nic"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary: to.Ptr(true),
							IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{{
								Name: to.Ptr("ipconfig1"),
								Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
									Subnet:                          &armcompute.APIEntityReference{ID: to.Ptr(subnetRef(rg))},
									LoadBalancerBackendAddressPools: refs,
								},
							}},
						},
					}},
				},
			},
		},
	}
}

func (ce *computeEnv) putScaleSet(t *testing.T, rg, name string, m armcompute.VirtualMachineScaleSet, etag string) armcompute.VirtualMachineScaleSet {
	t.Helper()
	var opts *armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions
	if etag != "" {
		opts = &armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions{IfMatch: to.Ptr(etag)}
	}
	p, err := ce.vmss.BeginCreateOrUpdate(ctxT(t), rg, name, m, opts)
	if err != nil {
		t.Fatalf("scale set PUT: %v", err)
	}
	out, err := p.PollUntilDone(ctxT(t), pollOpts)
	if err != nil {
		t.Fatalf("scale set PUT poll: %v", err)
	}
	return out.VirtualMachineScaleSet
}

// poolView returns the pool's member ip configurations and its NIC-derived
// entries (entry name -> ip configuration).
func (ce *computeEnv) poolView(t *testing.T, rg, lb, pool string) ([]string, map[string]string, *armnetwork.BackendAddressPool) {
	t.Helper()
	p, err := ce.pools.Get(ctxT(t), rg, lb, pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for _, c := range p.Properties.BackendIPConfigurations {
		members = append(members, *c.ID)
	}
	entries := map[string]string{}
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		if a.Properties != nil && a.Properties.NetworkInterfaceIPConfiguration != nil {
			if a.Properties.IPAddress != nil {
				t.Fatalf("NIC-derived entry %s has an ipAddress", *a.Name)
			}
			entries[*a.Name] = *a.Properties.NetworkInterfaceIPConfiguration.ID
		}
	}
	return members, entries, &p.BackendAddressPool
}

func TestSDKScaleSetMembershipFollowsInstances(t *testing.T) {
	ce := newComputeEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, ce.sdkEnv, "rg")
	pool := poolID("rg", "kubernetes", "kubernetes")

	created := ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 2, pool), "")
	if *created.Etag != `"1"` || *created.Properties.ProvisioningState != "Succeeded" {
		t.Fatalf("created scale set: etag %s state %s", *created.Etag, *created.Properties.ProvisioningState)
	}
	members, entries, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes")
	vm0 := computeID(testSub, "rg", typeVMSS, "pool1") + "/virtualMachines/0/networkInterfaces/nic/ipConfigurations/ipconfig1"
	if len(members) != 2 || !strings.EqualFold(members[0], vm0) || len(entries) != 2 {
		t.Fatalf("pool members %v entries %v, want both instances", members, entries)
	}

	// A model PUT with the same content keeps the etag; instances follow
	// the model only on their own PUT.
	same := ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 2, pool), `"1"`)
	if *same.Etag != `"1"` {
		t.Fatalf("unchanged model PUT moved the etag to %s", *same.Etag)
	}
	_, err := ce.vmss.BeginCreateOrUpdate(ctx, "rg", "pool1", scaleSet("rg", 2, pool), &armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions{IfMatch: to.Ptr(`"7"`)})
	if code, status := errorCode(err); status != 412 || code != "PreconditionFailed" {
		t.Fatalf("stale If-Match: %d %s", status, code)
	}
	noPool := ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 2), `"1"`)
	if *noPool.Etag != `"2"` {
		t.Fatalf("changed model etag %s, want \"2\"", *noPool.Etag)
	}
	if members, _, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes"); len(members) != 2 {
		t.Fatalf("a model PUT changed the instances' membership: %v", members)
	}

	// Instance 1 leaves with its own PUT (If-Match its etag).
	vm, err := ce.vmssVM.Get(ctx, "rg", "pool1", "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *vm.Properties.OSProfile.ComputerName != "aks-pool1-000001" || *vm.Properties.LatestModelApplied {
		t.Fatalf("instance 1: computerName %s latestModelApplied %v", *vm.Properties.OSProfile.ComputerName, *vm.Properties.LatestModelApplied)
	}
	cfg := vm.Properties.NetworkProfileConfiguration
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = nil
	up, err := ce.vmssVM.BeginUpdate(ctx, "rg", "pool1", "1", armcompute.VirtualMachineScaleSetVM{
		Location:   vm.Location,
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg},
	}, &armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions{IfMatch: vm.Etag})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := up.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	if *updated.Etag != `"2"` || !*updated.Properties.LatestModelApplied {
		t.Fatalf("updated instance: etag %s latestModelApplied %v", *updated.Etag, *updated.Properties.LatestModelApplied)
	}
	members, entries, _ = ce.poolView(t, "rg", "kubernetes", "kubernetes")
	if len(members) != 1 || !strings.EqualFold(members[0], vm0) || len(entries) != 1 {
		t.Fatalf("after instance 1 left: members %v entries %v", members, entries)
	}
	_, err = ce.vmssVM.BeginUpdate(ctx, "rg", "pool1", "1", armcompute.VirtualMachineScaleSetVM{
		Location:   vm.Location,
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg},
	}, &armcompute.VirtualMachineScaleSetVMsClientBeginUpdateOptions{IfMatch: vm.Etag})
	if code, status := errorCode(err); status != 412 || code != "PreconditionFailed" {
		t.Fatalf("instance PUT with the old etag: %d %s", status, code)
	}

	// Scaling out creates instances from the model (now without the pool).
	ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 3), "")
	if members, _, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes"); len(members) != 1 {
		t.Fatalf("a new instance joined a pool its model does not list: %v", members)
	}

	// Deleting instance 0 drops it from the pool.
	dp, err := ce.vmssVM.BeginDelete(ctx, "rg", "pool1", "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	if members, entries, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes"); len(members) != 0 || len(entries) != 0 {
		t.Fatalf("deleted instance still a member: %v %v", members, entries)
	}
}

func TestSDKNICPoolEntriesChangeOnlyTheirAdminState(t *testing.T) {
	ce := newComputeEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, ce.sdkEnv, "rg")
	pool := poolID("rg", "kubernetes", "kubernetes")
	ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 2, pool), "")
	_, entries, p := ce.poolView(t, "rg", "kubernetes", "kubernetes")
	if len(entries) != 2 {
		t.Fatalf("entries %v", entries)
	}
	put := func(mutate func(*armnetwork.BackendAddressPool)) error {
		cp := *p
		props := *p.Properties
		cp.Properties = &props
		props.LoadBalancerBackendAddresses = nil
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			ac := *a
			ap := *a.Properties
			ac.Properties = &ap
			props.LoadBalancerBackendAddresses = append(props.LoadBalancerBackendAddresses, &ac)
		}
		mutate(&cp)
		pp, err := ce.pools.BeginCreateOrUpdate(ctx, "rg", "kubernetes", "kubernetes", cp, nil)
		if err != nil {
			return err
		}
		_, err = pp.PollUntilDone(ctx, pollOpts)
		return err
	}
	cases := []struct {
		name   string
		mutate func(*armnetwork.BackendAddressPool)
		code   string
	}{
		{"drop an entry", func(p *armnetwork.BackendAddressPool) {
			p.Properties.LoadBalancerBackendAddresses = p.Properties.LoadBalancerBackendAddresses[1:]
		}, "ModificationOfNICIpConfigBackendPoolNotSupported"},
		{"rename an entry", func(p *armnetwork.BackendAddressPool) {
			p.Properties.LoadBalancerBackendAddresses[0].Name = to.Ptr("other")
		}, "ModificationOfNICIpConfigBackendPoolNotSupported"},
		{"add an ip configuration", func(p *armnetwork.BackendAddressPool) {
			p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
				Name: to.Ptr("extra"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					NetworkInterfaceIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(netID("rg", "networkInterfaces", "x") + "/ipConfigurations/c")}}})
		}, "ModificationOfNICIpConfigBackendPoolNotSupported"},
		{"reference one twice", func(p *armnetwork.BackendAddressPool) {
			dup := *p.Properties.LoadBalancerBackendAddresses[0]
			dup.Name = to.Ptr("dup")
			p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, &dup)
		}, "DuplicateIpConfigurationReferenceOnBackendAddressPool"},
		{"add an IP address", func(p *armnetwork.BackendAddressPool) {
			p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
				Name: to.Ptr("ip"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress: to.Ptr("10.0.0.99"), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(netID("rg", "virtualNetworks", "vnet"))}}})
		}, "CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool"},
	}
	for _, tc := range cases {
		err := put(tc.mutate)
		if code, status := errorCode(err); status != 400 || code != tc.code {
			t.Errorf("%s: %d %s (%v), want 400 %s", tc.name, status, code, err, tc.code)
		}
	}
	if err := put(func(p *armnetwork.BackendAddressPool) {
		p.Properties.LoadBalancerBackendAddresses[1].Properties.AdminState = to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)
	}); err != nil {
		t.Fatalf("adminState-only change: %v", err)
	}
	_, _, after := ce.poolView(t, "rg", "kubernetes", "kubernetes")
	got := after.Properties.LoadBalancerBackendAddresses
	if len(got) != 2 || got[1].Properties.AdminState == nil || *got[1].Properties.AdminState != armnetwork.LoadBalancerBackendAddressAdminStateDown ||
		got[0].Properties.AdminState != nil {
		t.Fatalf("admin state not kept on the NIC entry alone: %+v %+v", got[0].Properties, got[1].Properties)
	}
	// A NIC cannot join a pool that holds IP addresses.
	ipPool := ce.ipPool(t)
	_, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", "nic-x", nicWithPool("rg", ipPool), nil)
	if code, _ := errorCode(err); code != "CannotMixIPBasedAddressesAndIPConfigurationsOnLoadBalancerBackendAddressPool" {
		t.Fatalf("NIC joining an IP pool: %v", err)
	}
}

// ipPool adds an IP-based pool "ips" to the load balancer.
func (ce *computeEnv) ipPool(t *testing.T) string {
	t.Helper()
	pp, err := ce.pools.BeginCreateOrUpdate(ctxT(t), "rg", "kubernetes", "ips", armnetwork.BackendAddressPool{
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(netID("rg", "virtualNetworks", "vnet"))},
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("a"),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0.50")}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pp.PollUntilDone(ctxT(t), pollOpts); err != nil {
		t.Fatal(err)
	}
	return poolID("rg", "kubernetes", "ips")
}

func nicWithPool(rg string, pools ...string) armnetwork.Interface {
	var refs []*armnetwork.BackendAddressPool
	for _, p := range pools {
		refs = append(refs, &armnetwork.BackendAddressPool{ID: to.Ptr(p)})
	}
	return armnetwork.Interface{
		Location: to.Ptr("eastus"),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{
			Name: to.Ptr("ipconfig1"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet:                          &armnetwork.Subnet{ID: to.Ptr(subnetRef(rg))},
				LoadBalancerBackendAddressPools: refs,
			},
		}}},
	}
}

func TestSDKLoadBalancerInUseByScaleSet(t *testing.T) {
	ce := newComputeEnv(t, Options{})
	ctx := ctxT(t)
	lb := seedNetwork(t, ce.sdkEnv, "rg")
	pool := poolID("rg", "kubernetes", "kubernetes")
	ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 1, pool), "")

	_, err := ce.lbs.BeginDelete(ctx, "rg", "kubernetes", nil)
	code, status := errorCode(err)
	vmssID := computeID(testSub, "rg", typeVMSS, "pool1")
	if status != 400 || code != "LoadBalancerInUseByVirtualMachineScaleSet" || !strings.Contains(err.Error(), vmssID+".") {
		t.Fatalf("deleting a load balancer a model uses: %d %s: %v", status, code, err)
	}
	// Dropping the pool in a load balancer PUT is refused the same way.
	noPools := lb
	noPools.Properties.BackendAddressPools = nil
	noPools.Properties.LoadBalancingRules = nil
	_, err = ce.lbs.BeginCreateOrUpdate(ctx, "rg", "kubernetes", noPools, nil)
	if code, _ := errorCode(err); code != "LoadBalancerInUseByVirtualMachineScaleSet" {
		t.Fatalf("a load balancer PUT dropping the pool: %v", err)
	}
	// Without the model reference, the instance is still a member.
	ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 1), "")
	_, err = ce.lbs.BeginDelete(ctx, "rg", "kubernetes", nil)
	if code, _ := errorCode(err); code != "InUseBackendAddressPoolCannotBeDeleted" {
		t.Fatalf("deleting a load balancer with an instance member: %v", err)
	}
	// A load balancer PUT that leaves the pool's addresses out keeps its
	// NIC-derived entries (the pool as a property of the load balancer).
	cur, err := ce.lbs.Get(ctx, "rg", "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	cur.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses = nil
	lp, err := ce.lbs.BeginCreateOrUpdate(ctx, "rg", "kubernetes", cur.LoadBalancer, nil)
	if err != nil {
		t.Fatalf("load balancer PUT without the pool's addresses: %v", err)
	}
	if _, err := lp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	if members, entries, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes"); len(members) != 1 || len(entries) != 1 {
		t.Fatalf("the load balancer PUT dropped the member: %v %v", members, entries)
	}
}

func TestSDKPowerActions(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ce := newComputeEnv(t, Options{Clock: clk, OperationDuration: 10 * time.Second})
	ctx := ctxT(t)
	seedSubnetAt(t, ce, clk)
	p, err := ce.vmss.BeginCreateOrUpdate(ctx, "rg", "pool1", scaleSet("rg", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(11 * time.Second)
	if _, err := p.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	power := func() string {
		t.Helper()
		iv, err := ce.vmssVM.GetInstanceView(ctx, "rg", "pool1", "0", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range iv.Statuses {
			if strings.HasPrefix(*s.Code, "PowerState/") {
				return strings.TrimPrefix(*s.Code, "PowerState/")
			}
		}
		return ""
	}
	if got := power(); got != "running" {
		t.Fatalf("new instance is %s", got)
	}
	dp, err := ce.vmssVM.BeginDeallocate(ctx, "rg", "pool1", "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := power(); got != "deallocating" {
		t.Fatalf("while deallocating: %s", got)
	}
	_, err = ce.vmssVM.BeginStart(ctx, "rg", "pool1", "0", nil)
	if _, status := errorCode(err); status != 409 {
		t.Fatalf("an action while another runs: %v", err)
	}
	clk.Step(11 * time.Second)
	if _, err := dp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	if got := power(); got != "deallocated" {
		t.Fatalf("after deallocate: %s", got)
	}
	_, err = ce.vmssVM.BeginRestart(ctx, "rg", "pool1", "0", nil)
	if code, status := errorCode(err); status != 409 || code != "OperationNotAllowed" {
		t.Fatalf("restart of a deallocated VM: %v", err)
	}
	sp, err := ce.vmssVM.BeginStart(ctx, "rg", "pool1", "0", nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(11 * time.Second)
	if _, err := sp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	if got := power(); got != "running" {
		t.Fatalf("after start: %s", got)
	}
	// The list with $expand=instanceView shows power states too.
	pager := ce.vmssVM.NewListPager("rg", "pool1", &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")})
	page, err := pager.NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Value) != 1 || page.Value[0].Properties.InstanceView == nil || len(page.Value[0].Properties.InstanceView.Statuses) != 2 {
		t.Fatalf("list with instance views: %+v", page.Value)
	}
}

// seedSubnetAt creates rg with the vnet and subnet scaleSet uses, stepping
// the fake clock past each operation.
func seedSubnetAt(t *testing.T, ce *computeEnv, clk *clocktesting.FakeClock) {
	t.Helper()
	ctx := ctxT(t)
	ce.createGroup(t, "rg", "eastus")
	vp, err := ce.vnets.BeginCreateOrUpdate(ctx, "rg", "vnet", armnetwork.VirtualNetwork{
		Location: to.Ptr("eastus"),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(11 * time.Second)
	if _, err := vp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
}

func TestSDKVirtualMachinesAndNICs(t *testing.T) {
	ce := newComputeEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, ce.sdkEnv, "rg")
	pool := poolID("rg", "kubernetes", "kubernetes")
	asp, err := ce.avsets.CreateOrUpdate(ctx, "rg", "as1", armcompute.AvailabilitySet{Location: to.Ptr("eastus"),
		SKU: &armcompute.SKU{Name: to.Ptr("Aligned")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	np, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", "vm1-nic", nicWithPool("rg", pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	nic, err := np.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	cfgID := *nic.Properties.IPConfigurations[0].ID
	members, entries, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes")
	if len(members) != 1 || !strings.EqualFold(members[0], cfgID) || entries["rg_vm1-nicipconfig1"] != cfgID {
		t.Fatalf("NIC membership: %v %v", members, entries)
	}
	vmp, err := ce.vms.BeginCreateOrUpdate(ctx, "rg", "vm1", armcompute.VirtualMachine{
		Location: to.Ptr("eastus"),
		Properties: &armcompute.VirtualMachineProperties{
			HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
			NetworkProfile:  &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}},
			AvailabilitySet: &armcompute.SubResource{ID: asp.ID},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := vmp.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	if *vm.Etag != `"2"` {
		t.Fatalf("VM etag after creation completed: %s, want \"2\"", *vm.Etag)
	}
	got, err := ce.nics.Get(ctx, "rg", "vm1-nic", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Properties.VirtualMachine == nil || !strings.EqualFold(*got.Properties.VirtualMachine.ID, *vm.ID) {
		t.Fatalf("NIC has no virtualMachine back-reference: %+v", got.Properties.VirtualMachine)
	}
	as, err := ce.avsets.Get(ctx, "rg", "as1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(as.Properties.VirtualMachines) != 1 {
		t.Fatalf("availability set members: %+v", as.Properties.VirtualMachines)
	}
	_, err = ce.nics.BeginDelete(ctx, "rg", "vm1-nic", nil)
	if code, _ := errorCode(err); code != "NicInUse" {
		t.Fatalf("deleting a NIC a VM uses: %v", err)
	}
	// Detaching the NIC from its pool is a NIC PUT.
	got.Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = nil
	up, err := ce.nics.BeginCreateOrUpdate(ctx, "rg", "vm1-nic", got.Interface, &armnetwork.InterfacesClientBeginCreateOrUpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := up.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatal(err)
	}
	if kept.Properties.VirtualMachine == nil {
		t.Fatal("a NIC PUT dropped the virtualMachine back-reference")
	}
	if members, _, _ := ce.poolView(t, "rg", "kubernetes", "kubernetes"); len(members) != 0 {
		t.Fatalf("NIC still a member: %v", members)
	}
	// VMs list with the one filter azlb's reads use.
	pager := ce.vms.NewListPager("rg", &armcompute.VirtualMachinesClientListOptions{Filter: to.Ptr("'virtualMachineScaleSet/id' eq 'x'")})
	page, err := pager.NextPage(ctx)
	if err != nil || len(page.Value) != 0 {
		t.Fatalf("filtered list: %v %v", page.Value, err)
	}
	dp, err := ce.vms.BeginDelete(ctx, "rg", "vm1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	resp, _ := ce.raw(t, "DELETE", netPath("rg", "networkInterfaces", "vm1-nic"), "", nil)
	if resp.StatusCode != 202 {
		t.Fatalf("deleting a NIC a VM used answered %d, want 202", resp.StatusCode)
	}
}

func TestSDKScaleSetNICViews(t *testing.T) {
	ce := newComputeEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, ce.sdkEnv, "rg")
	pool := poolID("rg", "kubernetes", "kubernetes")
	ce.putScaleSet(t, "rg", "pool1", scaleSet("rg", 2, pool), "")
	nic, err := ce.nics.GetVirtualMachineScaleSetNetworkInterface(ctx, "rg", "pool1", "1", "nic", nil)
	if err != nil {
		t.Fatal(err)
	}
	ipc := nic.Properties.IPConfigurations[0]
	if *ipc.Properties.PrivateIPAddress != "10.0.0.5" || len(ipc.Properties.LoadBalancerBackendAddressPools) != 1 ||
		!strings.HasSuffix(*nic.Properties.VirtualMachine.ID, "/virtualMachines/1") {
		t.Fatalf("instance 1 NIC: %s pools %d vm %s", *ipc.Properties.PrivateIPAddress, len(ipc.Properties.LoadBalancerBackendAddressPools), *nic.Properties.VirtualMachine.ID)
	}
	pager := ce.nics.NewListVirtualMachineScaleSetNetworkInterfacesPager("rg", "pool1", nil)
	page, err := pager.NextPage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Value) != 2 {
		t.Fatalf("scale set NICs: %d", len(page.Value))
	}
	// The NIC views are served at 2018-10-01 only.
	resp, _ := ce.raw(t, "GET", "/subscriptions/"+testSub+"/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool1/networkInterfaces?api-version="+ComputeAPIVersion, "", nil)
	if resp.StatusCode != 400 {
		t.Fatalf("NIC view at the Compute api-version answered %d", resp.StatusCode)
	}
}
