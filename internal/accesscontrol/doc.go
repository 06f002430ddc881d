// Package accesscontrol turns a LoadBalancer Service's access settings into
// the inbound security rules it needs: who may connect (sources per IP
// family), to which destinations and ports, and whether everyone else is
// denied. It reads nothing from Azure and writes nothing; the one writer of
// the network security group is internal/securitygroup.
//
// Contract:
//
//   - Parse reads spec.loadBalancerSourceRanges, the source-range
//     annotations (azure-allowed-ip-ranges and the legacy
//     load-balancer-source-ranges), azure-allowed-service-tags,
//     azure-deny-all-except-load-balancer-source-ranges and
//     azure-disable-load-balancer-nsg-rule. It never panics.
//   - It fails closed: an invalid range or tag is reported (Access.Invalid*)
//     and makes the Service's addresses denied to everyone its valid
//     sources do not cover; never open to Internet.
//   - Settings that contradict each other are a *ConflictError: nothing may
//     be written for the Service.
//   - Grants lays the rules out as docs/security-groups.md describes (one
//     source set per rule, ports per protocol, destinations per family).
package accesscontrol
