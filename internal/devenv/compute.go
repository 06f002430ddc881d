package devenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/names"
)

// NodeVM is a VM made in the emulator for a Kubernetes node.
type NodeVM struct {
	// Name is the node name: the VM's computer name.
	Name       string
	ProviderID string
	// IPs are the VM's private addresses (IPv4 first).
	IPs []string
}

// Compute writes the VMs of a demo cluster into the emulator: scale sets,
// VMs with their NICs, availability sets, and power actions, through the
// real SDK (armcompute/v7).
type Compute struct {
	clients *azure.Clients
	sub     string // the VMs' subscription
	vmss    *armcompute.VirtualMachineScaleSetsClient
	vmssVMs *armcompute.VirtualMachineScaleSetVMsClient
	vms     *armcompute.VirtualMachinesClient
	avsets  *armcompute.AvailabilitySetsClient
}

// Compute returns a Compute for the environment; Close it when done.
func (e *Env) Compute(ctx context.Context) (*Compute, error) {
	c, err := e.Clients(ctx, azure.ClientOptions{Source: "devenv-compute"})
	if err != nil {
		return nil, err
	}
	out, err := NewCompute(c, e.Config.SubscriptionID)
	if err != nil {
		c.Close()
		return nil, err
	}
	return out, nil
}

// NewCompute returns a Compute writing through clients (which Close
// closes) in a subscription.
func NewCompute(c *azure.Clients, subscription string) (*Compute, error) {
	out := &Compute{clients: c, sub: subscription}
	var err error
	if out.vmss, err = armcompute.NewVirtualMachineScaleSetsClient(subscription, c.Credential(), c.ComputeARMClientOptions("devenv-vmss")); err == nil {
		if out.vmssVMs, err = armcompute.NewVirtualMachineScaleSetVMsClient(subscription, c.Credential(), c.ComputeARMClientOptions("devenv-vmssvm")); err == nil {
			if out.vms, err = armcompute.NewVirtualMachinesClient(subscription, c.Credential(), c.ComputeARMClientOptions("devenv-vm")); err == nil {
				out.avsets, err = armcompute.NewAvailabilitySetsClient(subscription, c.Credential(), c.ComputeARMClientOptions("devenv-avset"))
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Close releases the clients.
func (c *Compute) Close() { c.clients.Close() }

// Clients are the ARM clients Compute uses (azlb's own).
func (c *Compute) Clients() *azure.Clients { return c.clients }

func (c *Compute) subnetID() string {
	return names.SubnetID(names.VirtualNetworkID(c.clients.NetworkSubscriptionID(), ResourceGroup, VnetName), SubnetName)
}

// ScaleSetOptions shape CreateScaleSet.
type ScaleSetOptions struct {
	// Prefix is the computer name prefix (node names are Prefix + six
	// base-36 digits). Default: the scale set name and "-".
	Prefix string
	// DualStack adds an IPv6 ip configuration.
	DualStack bool
	// Tags are the scale set's tags (aks-managed-coordination allows
	// batched VM updates).
	Tags map[string]string
	// Pools are backend pool ids the model's primary ip configuration
	// lists (so every VM is a member).
	Pools []string
}

// CreateScaleSet creates a Uniform scale set of n VMs in the environment's
// subnet and returns them, in instance order.
func (c *Compute) CreateScaleSet(ctx context.Context, name string, n int, o ScaleSetOptions) ([]NodeVM, error) {
	prefix := o.Prefix
	if prefix == "" {
		prefix = name + "-"
	}
	var pools []*armcompute.SubResource
	for _, p := range o.Pools {
		pools = append(pools, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	ipcs := []*armcompute.VirtualMachineScaleSetIPConfiguration{{
		Name: to.Ptr("ipconfig1"),
		Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
			Primary:                         to.Ptr(true),
			Subnet:                          &armcompute.APIEntityReference{ID: to.Ptr(c.subnetID())},
			LoadBalancerBackendAddressPools: pools,
		},
	}}
	if o.DualStack {
		ipcs = append(ipcs, &armcompute.VirtualMachineScaleSetIPConfiguration{
			Name: to.Ptr("ipconfig-v6"),
			Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
				PrivateIPAddressVersion: to.Ptr(armcompute.IPVersionIPv6),
				Subnet:                  &armcompute.APIEntityReference{ID: to.Ptr(c.subnetID())},
			},
		})
	}
	var tags map[string]*string
	for k, v := range o.Tags {
		if tags == nil {
			tags = map[string]*string{}
		}
		tags[k] = to.Ptr(v)
	}
	p, err := c.vmss.BeginCreateOrUpdate(ctx, ResourceGroup, name, armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(Location),
		Tags:     tags,
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Capacity: to.Ptr(int64(n))},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			UpgradePolicy: &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)},
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr(prefix), AdminUsername: to.Ptr("azureuser")},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr(name + "-nic"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary:          to.Ptr(true),
							IPConfigurations: ipcs,
						},
					}},
				},
			},
		},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("create scale set %s: %w", name, err)
	}
	if _, err := p.PollUntilDone(ctx, &PollOptions); err != nil {
		return nil, fmt.Errorf("create scale set %s: %w", name, err)
	}
	return c.ScaleSetNodes(ctx, name)
}

// ScaleSetNodes lists a scale set's VMs as nodes.
func (c *Compute) ScaleSetNodes(ctx context.Context, name string) ([]NodeVM, error) {
	vms, err := c.clients.ScaleSetVM.List(ctx, ResourceGroup, name)
	if err != nil {
		return nil, err
	}
	nics, err := c.clients.Interface.ListScaleSetNICs(ctx, ResourceGroup, name)
	if err != nil {
		return nil, err
	}
	byID := map[string]*armnetwork.Interface{}
	for _, n := range nics {
		byID[strings.ToLower(ptr.Deref(n.ID, ""))] = n
	}
	out := make([]NodeVM, 0, len(vms))
	for _, vm := range vms {
		nv := NodeVM{Name: strings.ToLower(ptr.Deref(vm.Properties.OSProfile.ComputerName, "")), ProviderID: names.ProviderIDPrefix + ptr.Deref(vm.ID, "")}
		for _, ni := range vm.Properties.NetworkProfile.NetworkInterfaces {
			nv.IPs = append(nv.IPs, compute.NICAddresses(byID[strings.ToLower(ptr.Deref(ni.ID, ""))])...)
		}
		out = append(out, nv)
	}
	return out, nil
}

// CreateAvailabilitySet creates an availability set.
func (c *Compute) CreateAvailabilitySet(ctx context.Context, name string) error {
	_, err := c.avsets.CreateOrUpdate(ctx, ResourceGroup, name, armcompute.AvailabilitySet{
		Location: to.Ptr(Location), SKU: &armcompute.SKU{Name: to.Ptr("Aligned")},
		Properties: &armcompute.AvailabilitySetProperties{PlatformFaultDomainCount: to.Ptr[int32](2), PlatformUpdateDomainCount: to.Ptr[int32](5)},
	}, nil)
	if err != nil {
		return fmt.Errorf("create availability set %s: %w", name, err)
	}
	return nil
}

// CreateVM creates a NIC in the environment's subnet and a VM using it,
// in an availability set when availabilitySet is not empty.
func (c *Compute) CreateVM(ctx context.Context, name, availabilitySet string) (NodeVM, error) {
	return c.CreateVMAt(ctx, name, availabilitySet, "")
}

// CreateVMAt is CreateVM with the NIC's private address given (static
// allocation; "" allocates one): the address a real node already has
// (internal/localcluster).
func (c *Compute) CreateVMAt(ctx context.Context, name, availabilitySet, privateIP string) (NodeVM, error) {
	ipc := &armnetwork.InterfaceIPConfigurationPropertiesFormat{Primary: to.Ptr(true), Subnet: &armnetwork.Subnet{ID: to.Ptr(c.subnetID())}}
	if privateIP != "" {
		ipc.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
		ipc.PrivateIPAddress = to.Ptr(privateIP)
	}
	nic, err := c.clients.Interface.CreateOrUpdate(ctx, ResourceGroup, name+"-nic", armnetwork.Interface{
		Location: to.Ptr(Location),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{
			Name: to.Ptr("ipconfig1"), Properties: ipc,
		}}},
	}, "")
	if err != nil {
		return NodeVM{}, fmt.Errorf("create NIC of VM %s: %w", name, err)
	}
	props := &armcompute.VirtualMachineProperties{
		HardwareProfile: &armcompute.HardwareProfile{VMSize: to.Ptr(armcompute.VirtualMachineSizeTypesStandardD2SV3)},
		OSProfile:       &armcompute.OSProfile{ComputerName: to.Ptr(name), AdminUsername: to.Ptr("azureuser")},
		NetworkProfile:  &armcompute.NetworkProfile{NetworkInterfaces: []*armcompute.NetworkInterfaceReference{{ID: nic.ID}}},
	}
	if availabilitySet != "" {
		props.AvailabilitySet = &armcompute.SubResource{ID: to.Ptr(names.AvailabilitySetID(c.sub, ResourceGroup, availabilitySet))}
	}
	p, err := c.vms.BeginCreateOrUpdate(ctx, ResourceGroup, name, armcompute.VirtualMachine{Location: to.Ptr(Location), Properties: props}, nil)
	if err != nil {
		return NodeVM{}, fmt.Errorf("create VM %s: %w", name, err)
	}
	vm, err := p.PollUntilDone(ctx, &PollOptions)
	if err != nil {
		return NodeVM{}, fmt.Errorf("create VM %s: %w", name, err)
	}
	return NodeVM{Name: name, ProviderID: names.ProviderIDPrefix + ptr.Deref(vm.ID, ""), IPs: compute.NICAddresses(nic)}, nil
}

// Power actions PowerAction accepts.
const (
	ActionStart      = "start"
	ActionDeallocate = "deallocate"
	ActionPowerOff   = "powerOff"
	ActionRestart    = "restart"
)

// PowerAction runs start, deallocate, powerOff or restart on the VM a
// providerID names, as ARM does (a POST, then polling), and waits for it.
func (c *Compute) PowerAction(ctx context.Context, providerID, action string) error {
	ref, err := names.ParseProviderID(providerID)
	if err != nil {
		return err
	}
	var wait func() error
	if ref.Kind == names.ScaleSetVM {
		wait, err = scaleSetVMAction(ctx, c.vmssVMs, ref, action)
	} else {
		wait, err = vmAction(ctx, c.vms, ref, action)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", action, ref.ID(), err)
	}
	if err := wait(); err != nil {
		return fmt.Errorf("%s %s: %w", action, ref.ID(), err)
	}
	return nil
}

func pollerWait[T any](ctx context.Context, p *runtime.Poller[T], err error) (func() error, error) {
	if err != nil {
		return nil, err
	}
	return func() error {
		_, err := p.PollUntilDone(ctx, &PollOptions)
		return err
	}, nil
}

func scaleSetVMAction(ctx context.Context, c *armcompute.VirtualMachineScaleSetVMsClient, ref names.VMRef, action string) (func() error, error) {
	rg, v, i := ref.ResourceGroup, ref.ScaleSet, ref.Instance
	switch action {
	case ActionStart:
		p, err := c.BeginStart(ctx, rg, v, i, nil)
		return pollerWait(ctx, p, err)
	case ActionDeallocate:
		p, err := c.BeginDeallocate(ctx, rg, v, i, nil)
		return pollerWait(ctx, p, err)
	case ActionPowerOff:
		p, err := c.BeginPowerOff(ctx, rg, v, i, nil)
		return pollerWait(ctx, p, err)
	case ActionRestart:
		p, err := c.BeginRestart(ctx, rg, v, i, nil)
		return pollerWait(ctx, p, err)
	}
	return nil, fmt.Errorf("unknown power action %q (start, deallocate, powerOff, restart)", action)
}

func vmAction(ctx context.Context, c *armcompute.VirtualMachinesClient, ref names.VMRef, action string) (func() error, error) {
	rg, n := ref.ResourceGroup, ref.Name
	switch action {
	case ActionStart:
		p, err := c.BeginStart(ctx, rg, n, nil)
		return pollerWait(ctx, p, err)
	case ActionDeallocate:
		p, err := c.BeginDeallocate(ctx, rg, n, nil)
		return pollerWait(ctx, p, err)
	case ActionPowerOff:
		p, err := c.BeginPowerOff(ctx, rg, n, nil)
		return pollerWait(ctx, p, err)
	case ActionRestart:
		p, err := c.BeginRestart(ctx, rg, n, nil)
		return pollerWait(ctx, p, err)
	}
	return nil, fmt.Errorf("unknown power action %q (start, deallocate, powerOff, restart)", action)
}
