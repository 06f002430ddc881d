package provider

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/names"
)

// DefaultPowerStateMaxAge is how old the power state InstanceExists and
// InstanceShutdown answer from may be. The cloud node lifecycle controller
// asks about NotReady nodes only, every --node-monitor-period (5 s), so
// this bounds both the delay from a VM's shutdown to the node's shutdown
// taint and the listings a mass event costs (one per scale set or resource
// group per period).
const DefaultPowerStateMaxAge = 5 * time.Second

// Instances implements cloudprovider.InstancesV2 from the compute
// Inventory: the cloud node controller initializes nodes from
// InstanceMetadata, the cloud node lifecycle controller taints a NotReady
// node whose VM is shut down (InstanceShutdown) and deletes one whose VM is
// gone (InstanceExists).
type Instances struct {
	inv *compute.Inventory
	// powerMaxAge bounds the age of the power state and existence answers.
	powerMaxAge time.Duration
}

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

// NewInstances builds InstancesV2 on an Inventory; powerMaxAge 0 means
// DefaultPowerStateMaxAge.
func NewInstances(inv *compute.Inventory, powerMaxAge time.Duration) *Instances {
	if powerMaxAge <= 0 {
		powerMaxAge = DefaultPowerStateMaxAge
	}
	return &Instances{inv: inv, powerMaxAge: powerMaxAge}
}

// InstanceExists reports whether the node's VM exists. A providerID that
// is not an Azure VM of this subscription is an error, not "gone": the
// lifecycle controller would delete the node.
func (i *Instances) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	_, err := i.inv.ForNode(ctx, node, i.powerMaxAge)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, compute.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("node %s: %w", node.Name, err)
	}
}

// InstanceShutdown reports whether the node's VM is shut down: provisioned
// and stopped, deallocated or deallocating.
func (i *Instances) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	inst, err := i.inv.ForNode(ctx, node, i.powerMaxAge)
	switch {
	case err == nil:
		return inst.Shutdown(), nil
	case errors.Is(err, compute.ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("node %s: %w", node.Name, err)
	}
}

// InstanceMetadata returns the node's providerID, VM size, zone, region and
// addresses, from listings no older than the Inventory's TTL.
func (i *Instances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	inst, err := i.inv.ForNode(ctx, node, 0)
	if err != nil {
		if errors.Is(err, compute.ErrNotFound) {
			return nil, fmt.Errorf("node %s: %w: %w", node.Name, cloudprovider.InstanceNotFound, err)
		}
		return nil, fmt.Errorf("node %s: %w", node.Name, err)
	}
	addrs, err := i.inv.Addresses(ctx, inst, 0)
	if err != nil {
		return nil, fmt.Errorf("node %s: addresses: %w", node.Name, err)
	}
	return &cloudprovider.InstanceMetadata{
		ProviderID:    names.ProviderIDPrefix + inst.ID,
		InstanceType:  inst.VMSize,
		NodeAddresses: addrs,
		Zone:          zoneOf(inst),
		Region:        strings.ToLower(inst.Location),
	}, nil
}

// zoneOf is the node's zone as the Azure cloud provider labels it:
// "<region>-<zone>" for a zonal VM, else its fault domain.
func zoneOf(inst *compute.Instance) string {
	if len(inst.Zones) > 0 && inst.Zones[0] != "" {
		return strings.ToLower(inst.Location) + "-" + inst.Zones[0]
	}
	fd := int32(0)
	switch {
	case inst.ScaleSetVM != nil && inst.ScaleSetVM.Properties != nil && inst.ScaleSetVM.Properties.InstanceView != nil:
		fd = ptr.Deref(inst.ScaleSetVM.Properties.InstanceView.PlatformFaultDomain, 0)
	case inst.VM != nil && inst.VM.Properties != nil && inst.VM.Properties.InstanceView != nil:
		fd = ptr.Deref(inst.VM.Properties.InstanceView.PlatformFaultDomain, 0)
	}
	return strconv.Itoa(int(fd))
}
