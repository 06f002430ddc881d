package compute

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/names"
)

// Power states (the PowerState/<code> status of an instance view).
const (
	PowerRunning      = "running"
	PowerStopped      = "stopped"
	PowerDeallocated  = "deallocated"
	PowerDeallocating = "deallocating"
	PowerStarting     = "starting"
	PowerStopping     = "stopping"
)

// Instance is one VM as azlb needs it.
type Instance struct {
	Ref names.VMRef
	// ID is the VM's ARM id as Azure spells it.
	ID string
	// ComputerName is the VM's computer name, lower-cased (the node name).
	ComputerName string
	// ScaleSetID is the scale set of a Uniform scale set VM or of a
	// Flexible scale set's VM ("" for other VMs); Flexible says which.
	ScaleSetID string
	Flexible   bool
	// AvailabilitySetID is the availability set of a VM ("" when none).
	AvailabilitySetID string
	Location          string
	Zones             []string
	VMSize            string
	// PowerState is the instance view's power state code ("" unknown).
	PowerState string
	// ProvisioningState is the VM's provisioningState.
	ProvisioningState string
	// NICIDs are the VM's network interface ids, the primary one first.
	NICIDs []string
	// ScaleSetVM or VM is the resource as listed (shared: do not modify).
	ScaleSetVM *armcompute.VirtualMachineScaleSetVM
	VM         *armcompute.VirtualMachine
}

// Running reports whether the VM runs and is not being deleted or failed:
// the VMs NIC-based pools take.
func (i *Instance) Running() bool {
	return i.PowerState == PowerRunning && !strings.EqualFold(i.ProvisioningState, "Deleting") &&
		!strings.EqualFold(i.ProvisioningState, "Failed")
}

// Shutdown reports whether the VM is shut down as the node lifecycle
// counts it: provisioning succeeded and the power state is stopped,
// deallocated or deallocating.
func (i *Instance) Shutdown() bool {
	if !strings.EqualFold(i.ProvisioningState, "Succeeded") {
		return false
	}
	switch i.PowerState {
	case PowerStopped, PowerDeallocated, PowerDeallocating:
		return true
	}
	return false
}

// OwnerKeys are the lower-cased ids NIC-based pool entries of this VM
// carry as their ip configuration's owner (names.IPConfigOwner): the scale
// set VM itself, or each of a VM's network interfaces.
func (i *Instance) OwnerKeys() []string {
	if i.Ref.Kind == names.ScaleSetVM {
		return []string{strings.ToLower(i.ID)}
	}
	out := make([]string, 0, len(i.NICIDs))
	for _, n := range i.NICIDs {
		out = append(out, strings.ToLower(n))
	}
	return out
}

// powerState reads PowerState/<code> from instance view statuses.
func powerState(statuses []*armcompute.InstanceViewStatus) string {
	for _, s := range statuses {
		if s == nil {
			continue
		}
		if c := ptr.Deref(s.Code, ""); strings.HasPrefix(strings.ToLower(c), "powerstate/") {
			return strings.ToLower(c[len("powerstate/"):])
		}
	}
	return ""
}

// fromScaleSetVM converts a listed scale set VM.
func fromScaleSetVM(ref names.VMRef, vm *armcompute.VirtualMachineScaleSetVM) *Instance {
	inst := &Instance{Ref: ref, ID: ptr.Deref(vm.ID, ref.ID()), ScaleSetVM: vm, Location: ptr.Deref(vm.Location, "")}
	inst.ScaleSetID = names.ScaleSetID(ref.Subscription, ref.ResourceGroup, ref.ScaleSet)
	for _, z := range vm.Zones {
		inst.Zones = append(inst.Zones, ptr.Deref(z, ""))
	}
	if vm.SKU != nil {
		inst.VMSize = ptr.Deref(vm.SKU.Name, "")
	}
	p := vm.Properties
	if p == nil {
		return inst
	}
	inst.setCommon(p.ProvisioningState, p.HardwareProfile, p.OSProfile)
	if p.InstanceView != nil {
		inst.PowerState = powerState(p.InstanceView.Statuses)
		if inst.ComputerName == "" {
			inst.ComputerName = strings.ToLower(ptr.Deref(p.InstanceView.ComputerName, ""))
		}
	}
	if p.NetworkProfileConfiguration != nil {
		var primary, rest []string
		for _, c := range p.NetworkProfileConfiguration.NetworkInterfaceConfigurations {
			if c == nil || c.Name == nil {
				continue
			}
			id := inst.ID + "/networkInterfaces/" + *c.Name
			if c.Properties != nil && ptr.Deref(c.Properties.Primary, false) {
				primary = append(primary, id)
			} else {
				rest = append(rest, id)
			}
		}
		inst.NICIDs = append(primary, rest...)
	}
	return inst
}

// setCommon fills what scale set VMs and VMs share: provisioning state,
// size and computer name.
func (i *Instance) setCommon(provisioning *string, hw *armcompute.HardwareProfile, os *armcompute.OSProfile) {
	i.ProvisioningState = ptr.Deref(provisioning, "")
	if hw != nil && hw.VMSize != nil {
		i.VMSize = string(*hw.VMSize)
	}
	if os != nil {
		i.ComputerName = strings.ToLower(ptr.Deref(os.ComputerName, ""))
	}
}

// fromVM converts a listed virtual machine.
func fromVM(ref names.VMRef, vm *armcompute.VirtualMachine) *Instance {
	inst := &Instance{Ref: ref, ID: ptr.Deref(vm.ID, ref.ID()), VM: vm, Location: ptr.Deref(vm.Location, "")}
	for _, z := range vm.Zones {
		inst.Zones = append(inst.Zones, ptr.Deref(z, ""))
	}
	p := vm.Properties
	if p == nil {
		return inst
	}
	inst.setCommon(p.ProvisioningState, p.HardwareProfile, p.OSProfile)
	if p.InstanceView != nil {
		inst.PowerState = powerState(p.InstanceView.Statuses)
	}
	if p.AvailabilitySet != nil {
		inst.AvailabilitySetID = ptr.Deref(p.AvailabilitySet.ID, "")
	}
	if p.VirtualMachineScaleSet != nil && ptr.Deref(p.VirtualMachineScaleSet.ID, "") != "" {
		inst.ScaleSetID, inst.Flexible = *p.VirtualMachineScaleSet.ID, true
	}
	if p.NetworkProfile != nil {
		var primary, rest []string
		for _, n := range p.NetworkProfile.NetworkInterfaces {
			if n == nil || n.ID == nil {
				continue
			}
			if n.Properties != nil && ptr.Deref(n.Properties.Primary, false) || len(p.NetworkProfile.NetworkInterfaces) == 1 {
				primary = append(primary, *n.ID)
			} else {
				rest = append(rest, *n.ID)
			}
		}
		inst.NICIDs = append(primary, rest...)
	}
	return inst
}
