// Package privatelink publishes a LoadBalancer Service's frontend through an
// Azure Private Link Service (PLS), driven by the azure-pls-* annotations
// (docs/private-link.md), and is the only writer of PLS objects.
//
// Contract:
//
//   - Parse reads the ten annotations with the semantics users know from
//     the Azure cloud provider; every bad value is an *annotations.Error
//     naming its annotation, and nothing is written for the Service.
//   - Desired builds the PLS a Service wants on one IPv4 frontend: NAT ip
//     configurations named <subnet>-<pls>-static-<ip> / -dynamic-<i> (cut to
//     80), the first primary; tags k8s-azure-cluster-name and
//     k8s-azure-owner-service (<namespace>/<name>).
//   - One writer. Store serialises the edits of each PLS: they are queued
//     and a round per PLS applies every queued edit to one read (the cached
//     copy when one is known, from a List at start or the last write) and
//     writes at most once, with If-Match (If-None-Match: * on create). A
//     412 or 409 is retried with a fresh read up to MaxConflictRetries
//     times. An edit that changes nothing writes nothing, so adopting
//     existing PLSs costs one List per resource group and no write.
//   - Deleting a PLS deletes its private endpoint connections first, then
//     the PLS. Before a PLS write, the NAT subnet's
//     privateLinkServiceNetworkPolicies is set to Disabled when it is not
//     (SubnetClient), once per subnet per Store.
//   - Manager.Check vets a Service's settings as Reconcile would (writing
//     nothing, recording no event): the annotations, the frontend, the
//     ownership and name rules, and the NAT subnet, read from Azure (it
//     must exist; static NAT addresses must be usable in it; kept until an
//     Invalidate), so the Service reconcile refuses a Service whole before
//     its first write.
//   - Manager applies the ownership rules: the Service that created a PLS
//     owns it (tags); other Services on the frontend share it and may not
//     configure their own; a PLS keeps its name; a name another frontend's
//     PLS holds is refused; only internal frontends (or floating IP off)
//     and IPv4 frontends are published.
//   - Read-only helpers for azlb status and verify: Drift (what differs
//     from the annotations), ResourceGroups and ListAll (where a cluster's
//     PLSs may be), Connections; ProxyProtocolRequested for the load
//     balancer's Local probe, which Azure's PROXY header would break.
package privatelink
