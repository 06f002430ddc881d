package names

import (
	"fmt"
	"strings"
)

// ProviderIDPrefix starts every Azure node providerID; the rest is the ARM
// id of the node's VM.
const ProviderIDPrefix = "azure://"

// VMKind tells which kind of Azure VM a node runs on.
type VMKind int

const (
	// ScaleSetVM is a VM of a Uniform scale set:
	// .../virtualMachineScaleSets/{v}/virtualMachines/{instanceId}.
	ScaleSetVM VMKind = iota + 1
	// StandaloneVM is a virtual machine (standalone, in an availability set,
	// or in a Flexible scale set): .../virtualMachines/{name}.
	StandaloneVM
)

// VMRef identifies a node's VM.
type VMRef struct {
	Kind                        VMKind
	Subscription, ResourceGroup string
	// ScaleSet and Instance name a Uniform scale set VM.
	ScaleSet, Instance string
	// Name is a virtual machine's name (StandaloneVM).
	Name string
}

// ID is the VM's ARM id.
func (r VMRef) ID() string {
	if r.Kind == ScaleSetVM {
		return ScaleSetVMID(r.Subscription, r.ResourceGroup, r.ScaleSet, r.Instance)
	}
	return VMID(r.Subscription, r.ResourceGroup, r.Name)
}

// ProviderID is the node providerID of the VM.
func (r VMRef) ProviderID() string { return ProviderIDPrefix + r.ID() }

// ScaleSetID is the ARM id of a scale set.
func ScaleSetID(subscription, resourceGroup, scaleSet string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachineScaleSets/%s",
		subscription, resourceGroup, scaleSet)
}

// AvailabilitySetID is the ARM id of an availability set.
func AvailabilitySetID(subscription, resourceGroup, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/availabilitySets/%s",
		subscription, resourceGroup, name)
}

// ScaleSetVMID is the ARM id of a Uniform scale set's VM.
func ScaleSetVMID(subscription, resourceGroup, scaleSet, instance string) string {
	return ScaleSetID(subscription, resourceGroup, scaleSet) + "/virtualMachines/" + instance
}

// VMID is the ARM id of a virtual machine.
func VMID(subscription, resourceGroup, name string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Compute/virtualMachines/%s",
		subscription, resourceGroup, name)
}

// ScaleSetIPConfigID is the id pools show for an ip configuration of a
// scale set VM's network interface.
func ScaleSetIPConfigID(vmID, nicConfig, ipConfig string) string {
	return vmID + "/networkInterfaces/" + nicConfig + "/ipConfigurations/" + ipConfig
}

// ParseProviderID parses a node's providerID: azure:///subscriptions/{s}/
// resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{v}/
// virtualMachines/{i} (a Uniform scale set VM) or .../virtualMachines/{name}
// (any other VM). The error names what is wrong with it.
func ParseProviderID(providerID string) (VMRef, error) {
	if providerID == "" {
		return VMRef{}, fmt.Errorf("the node has no providerID")
	}
	if !strings.HasPrefix(strings.ToLower(providerID), ProviderIDPrefix) {
		return VMRef{}, fmt.Errorf("providerID %q is not an Azure VM (want %s/subscriptions/...)", providerID, ProviderIDPrefix)
	}
	segs := strings.Split(strings.Trim(providerID[len(ProviderIDPrefix):], "/"), "/")
	bad := func(why string) (VMRef, error) {
		return VMRef{}, fmt.Errorf("providerID %q is not an Azure VM id: %s", providerID, why)
	}
	if len(segs) != 8 && len(segs) != 10 {
		return bad("wrong number of segments")
	}
	for _, s := range segs {
		if s == "" {
			return bad("empty segment")
		}
	}
	if !strings.EqualFold(segs[0], "subscriptions") || !strings.EqualFold(segs[2], "resourceGroups") ||
		!strings.EqualFold(segs[4], "providers") || !strings.EqualFold(segs[5], "Microsoft.Compute") {
		return bad("expected /subscriptions/{s}/resourceGroups/{rg}/providers/Microsoft.Compute/...")
	}
	r := VMRef{Subscription: segs[1], ResourceGroup: segs[3]}
	switch {
	case len(segs) == 8 && strings.EqualFold(segs[6], "virtualMachines"):
		r.Kind, r.Name = StandaloneVM, segs[7]
	case len(segs) == 10 && strings.EqualFold(segs[6], "virtualMachineScaleSets") && strings.EqualFold(segs[8], "virtualMachines"):
		r.Kind, r.ScaleSet, r.Instance = ScaleSetVM, segs[7], segs[9]
	default:
		return bad("neither .../virtualMachines/{name} nor .../virtualMachineScaleSets/{v}/virtualMachines/{i}")
	}
	return r, nil
}

// IPConfigOwner returns the lower-cased id of what an ip configuration
// belongs to: for a scale set VM's ip configuration
// (.../virtualMachines/{i}/networkInterfaces/{n}/ipConfigurations/{c}) the
// VM, for a NIC's (.../networkInterfaces/{n}/ipConfigurations/{c}) the
// NIC. NIC-based pool entries are matched to nodes by it. "" when id is
// neither.
func IPConfigOwner(id string) string {
	l := strings.ToLower(strings.TrimRight(id, "/"))
	i := strings.LastIndex(l, "/ipconfigurations/")
	if i < 0 {
		return ""
	}
	nic := l[:i]
	j := strings.LastIndex(nic, "/networkinterfaces/")
	if j < 0 {
		return ""
	}
	if strings.Contains(nic[:j], "/virtualmachinescalesets/") && strings.Contains(nic[:j], "/virtualmachines/") {
		return nic[:j]
	}
	return nic
}
