// Package compute is azlb's view of the Azure VMs behind Kubernetes nodes:
// Uniform scale set VMs, Flexible scale set VMs and standalone or
// availability-set VMs. The node lifecycle (cloudprovider InstancesV2), the
// NIC-based backend pool writer and the admin-state controller read VMs
// through one Inventory.
//
// Contract:
//
//   - A node is found by its providerID (azure:///subscriptions/.../
//     virtualMachineScaleSets/{v}/virtualMachines/{i} or .../virtualMachines/{name});
//     without one, by its name: the VM's name or computer name (lower-cased)
//     in the configured resource group, standalone VMs first, then the VMs
//     of each scale set.
//   - Reads are listings, cached per scope: the VMs (with instance views) of
//     one scale set, the VMs of one resource group, the network interfaces
//     of one scale set (api-version 2018-10-01) or of one resource group,
//     the scale sets of one resource group. A lookup says how old its answer
//     may be (maxAge); a scope older than that is listed again, once, however
//     many lookups wait for it (single flight). So N nodes cost at most one
//     listing per scope per maxAge: InstanceMetadata of 5,000 scale set VMs
//     is one VM listing and one NIC listing per scale set per cache period.
//     A VM missing from a scope older than MissRefresh lists it again (a new
//     VM), at most once per MissRefresh.
//   - A scope that does not exist (404: no such scale set or resource group)
//     is an empty listing; any other ARM error is returned and not cached.
//   - Invalidate drops a scope after azlb changed it (membership writes), so
//     the next lookup lists it again.
//   - Returned Instances are shared snapshots: callers must not modify them
//     (or the SDK objects they carry).
//   - Time comes from an injected k8s.io/utils/clock.
package compute
