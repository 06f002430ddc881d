package azure

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// ComputeAPIVersion is the Microsoft.Compute api-version of every Compute
// call (armcompute/v7's).
const ComputeAPIVersion = "2025-04-01"

// ScaleSetClient reads and writes virtual machine scale set models.
// Compute etags are quoted integers ("3"): pass them back verbatim.
type ScaleSetClient interface {
	Get(ctx context.Context, resourceGroup, name string) (*armcompute.VirtualMachineScaleSet, error)
	List(ctx context.Context, resourceGroup string) ([]*armcompute.VirtualMachineScaleSet, error)
	// CreateOrUpdate PUTs the model (Compute merges the body into the
	// scale set), with If-Match: etag when etag is non-empty, and waits for
	// the operation.
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, vmss armcompute.VirtualMachineScaleSet, etag string) (*armcompute.VirtualMachineScaleSet, error)
}

// ScaleSetVMClient reads and writes the VMs of a Uniform scale set.
type ScaleSetVMClient interface {
	Get(ctx context.Context, resourceGroup, scaleSet, instanceID string) (*armcompute.VirtualMachineScaleSetVM, error)
	// List lists the scale set's VMs with their instance views (power
	// state).
	List(ctx context.Context, resourceGroup, scaleSet string) ([]*armcompute.VirtualMachineScaleSetVM, error)
	// Update PUTs one VM, with If-Match: etag when etag is non-empty, and
	// waits for the operation.
	Update(ctx context.Context, resourceGroup, scaleSet, instanceID string, vm armcompute.VirtualMachineScaleSetVM, etag string) (*armcompute.VirtualMachineScaleSetVM, error)
	// BeginUpdate is Update returning once ARM accepted the PUT; wait polls
	// the operation to its end.
	BeginUpdate(ctx context.Context, resourceGroup, scaleSet, instanceID string, vm armcompute.VirtualMachineScaleSetVM, etag string) (
		wait func(context.Context) (*armcompute.VirtualMachineScaleSetVM, error), err error)
}

// VMClient reads virtual machines (standalone, availability set and
// Flexible scale set VMs).
type VMClient interface {
	// Get reads one VM with its instance view.
	Get(ctx context.Context, resourceGroup, name string) (*armcompute.VirtualMachine, error)
	// List lists the resource group's VMs with their instance views.
	List(ctx context.Context, resourceGroup string) ([]*armcompute.VirtualMachine, error)
}

// InterfaceClient reads and writes network interfaces, and reads the
// network interfaces of scale set VMs (api-version 2018-10-01).
type InterfaceClient interface {
	Get(ctx context.Context, resourceGroup, name string) (*armnetwork.Interface, error)
	List(ctx context.Context, resourceGroup string) ([]*armnetwork.Interface, error)
	CreateOrUpdate(ctx context.Context, resourceGroup, name string, nic armnetwork.Interface, etag string) (*armnetwork.Interface, error)
	// ListScaleSetNICs lists the network interfaces of every VM of a
	// scale set.
	ListScaleSetNICs(ctx context.Context, resourceGroup, scaleSet string) ([]*armnetwork.Interface, error)
}

type scaleSetClient struct {
	*base
	c *armcompute.VirtualMachineScaleSetsClient
}

var _ ScaleSetClient = (*scaleSetClient)(nil)

func (s *scaleSetClient) Get(ctx context.Context, rg, name string) (*armcompute.VirtualMachineScaleSet, error) {
	return get(ctx, s.base, rg, rg+"/"+name,
		func(ctx context.Context) (armcompute.VirtualMachineScaleSetsClientGetResponse, error) {
			return s.c.Get(ctx, rg, name, nil)
		},
		func(r *armcompute.VirtualMachineScaleSetsClientGetResponse) *armcompute.VirtualMachineScaleSet {
			return &r.VirtualMachineScaleSet
		})
}

func (s *scaleSetClient) List(ctx context.Context, rg string) ([]*armcompute.VirtualMachineScaleSet, error) {
	return list(ctx, s.base, rg, rg,
		func() *runtime.Pager[armcompute.VirtualMachineScaleSetsClientListResponse] {
			return s.c.NewListPager(rg, nil)
		},
		func(p armcompute.VirtualMachineScaleSetsClientListResponse) []*armcompute.VirtualMachineScaleSet {
			return p.Value
		})
}

func (s *scaleSetClient) CreateOrUpdate(ctx context.Context, rg, name string, vmss armcompute.VirtualMachineScaleSet, etag string) (*armcompute.VirtualMachineScaleSet, error) {
	resp, err := write(ctx, s.base, opCreateOrUpdate, rg, rg+"/"+name, etag,
		func(ctx context.Context) (*runtime.Poller[armcompute.VirtualMachineScaleSetsClientCreateOrUpdateResponse], error) {
			return s.c.BeginCreateOrUpdate(ctx, rg, name, vmss, nil)
		})
	if err != nil {
		return nil, err
	}
	return &resp.VirtualMachineScaleSet, nil
}

type scaleSetVMClient struct {
	*base
	c *armcompute.VirtualMachineScaleSetVMsClient
}

var _ ScaleSetVMClient = (*scaleSetVMClient)(nil)

func (s *scaleSetVMClient) Get(ctx context.Context, rg, vmss, id string) (*armcompute.VirtualMachineScaleSetVM, error) {
	return get(ctx, s.base, rg, rg+"/"+vmss+"/"+id,
		func(ctx context.Context) (armcompute.VirtualMachineScaleSetVMsClientGetResponse, error) {
			return s.c.Get(ctx, rg, vmss, id, &armcompute.VirtualMachineScaleSetVMsClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
		},
		func(r *armcompute.VirtualMachineScaleSetVMsClientGetResponse) *armcompute.VirtualMachineScaleSetVM {
			return &r.VirtualMachineScaleSetVM
		})
}

func (s *scaleSetVMClient) List(ctx context.Context, rg, vmss string) ([]*armcompute.VirtualMachineScaleSetVM, error) {
	return list(ctx, s.base, rg, rg+"/"+vmss,
		func() *runtime.Pager[armcompute.VirtualMachineScaleSetVMsClientListResponse] {
			return s.c.NewListPager(rg, vmss, &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")})
		},
		func(p armcompute.VirtualMachineScaleSetVMsClientListResponse) []*armcompute.VirtualMachineScaleSetVM {
			return p.Value
		})
}

func (s *scaleSetVMClient) Update(ctx context.Context, rg, vmss, id string, vm armcompute.VirtualMachineScaleSetVM, etag string) (*armcompute.VirtualMachineScaleSetVM, error) {
	wait, err := s.BeginUpdate(ctx, rg, vmss, id, vm, etag)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

func (s *scaleSetVMClient) BeginUpdate(ctx context.Context, rg, vmss, id string, vm armcompute.VirtualMachineScaleSetVM, etag string) (
	func(context.Context) (*armcompute.VirtualMachineScaleSetVM, error), error) {
	wait, err := startWrite(ctx, s.base, opCreateOrUpdate, rg, rg+"/"+vmss+"/"+id, etag,
		func(ctx context.Context) (*armcompute.VirtualMachineScaleSetVMsClientUpdateResponse, *runtime.Poller[armcompute.VirtualMachineScaleSetVMsClientUpdateResponse], error) {
			p, err := s.c.BeginUpdate(ctx, rg, vmss, id, vm, nil)
			return nil, p, err
		})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (*armcompute.VirtualMachineScaleSetVM, error) {
		resp, err := wait(ctx)
		if err != nil {
			return nil, err
		}
		return &resp.VirtualMachineScaleSetVM, nil
	}, nil
}

type vmClient struct {
	*base
	c *armcompute.VirtualMachinesClient
}

var _ VMClient = (*vmClient)(nil)

func (v *vmClient) Get(ctx context.Context, rg, name string) (*armcompute.VirtualMachine, error) {
	return get(ctx, v.base, rg, rg+"/"+name,
		func(ctx context.Context) (armcompute.VirtualMachinesClientGetResponse, error) {
			return v.c.Get(ctx, rg, name, &armcompute.VirtualMachinesClientGetOptions{Expand: to.Ptr(armcompute.InstanceViewTypesInstanceView)})
		},
		func(r *armcompute.VirtualMachinesClientGetResponse) *armcompute.VirtualMachine {
			return &r.VirtualMachine
		})
}

func (v *vmClient) List(ctx context.Context, rg string) ([]*armcompute.VirtualMachine, error) {
	return list(ctx, v.base, rg, rg,
		func() *runtime.Pager[armcompute.VirtualMachinesClientListResponse] {
			return v.c.NewListPager(rg, &armcompute.VirtualMachinesClientListOptions{Expand: to.Ptr(armcompute.ExpandTypeForListVMsInstanceView)})
		},
		func(p armcompute.VirtualMachinesClientListResponse) []*armcompute.VirtualMachine { return p.Value })
}

type interfaceClient struct {
	*base
	c *armnetwork.InterfacesClient
}

var _ InterfaceClient = (*interfaceClient)(nil)

func (n *interfaceClient) Get(ctx context.Context, rg, name string) (*armnetwork.Interface, error) {
	return get(ctx, n.base, rg, rg+"/"+name,
		func(ctx context.Context) (armnetwork.InterfacesClientGetResponse, error) {
			return n.c.Get(ctx, rg, name, nil)
		},
		func(r *armnetwork.InterfacesClientGetResponse) *armnetwork.Interface { return &r.Interface })
}

func (n *interfaceClient) List(ctx context.Context, rg string) ([]*armnetwork.Interface, error) {
	return list(ctx, n.base, rg, rg,
		func() *runtime.Pager[armnetwork.InterfacesClientListResponse] { return n.c.NewListPager(rg, nil) },
		func(p armnetwork.InterfacesClientListResponse) []*armnetwork.Interface { return p.Value })
}

func (n *interfaceClient) CreateOrUpdate(ctx context.Context, rg, name string, nic armnetwork.Interface, etag string) (*armnetwork.Interface, error) {
	resp, err := write(ctx, n.base, opCreateOrUpdate, rg, rg+"/"+name, etag,
		func(ctx context.Context) (*runtime.Poller[armnetwork.InterfacesClientCreateOrUpdateResponse], error) {
			return n.c.BeginCreateOrUpdate(ctx, rg, name, nic, nil)
		})
	if err != nil {
		return nil, err
	}
	return &resp.Interface, nil
}

func (n *interfaceClient) ListScaleSetNICs(ctx context.Context, rg, vmss string) ([]*armnetwork.Interface, error) {
	return list(ctx, n.base, rg, rg+"/"+vmss,
		func() *runtime.Pager[armnetwork.InterfacesClientListVirtualMachineScaleSetNetworkInterfacesResponse] {
			return n.c.NewListVirtualMachineScaleSetNetworkInterfacesPager(rg, vmss, nil)
		},
		func(p armnetwork.InterfacesClientListVirtualMachineScaleSetNetworkInterfacesResponse) []*armnetwork.Interface {
			return p.Value
		})
}
