// Package verify is the judge of azlb's work: it reads the cluster and
// Azure and reports every difference between what Azure holds and what
// azlb's documentation (docs/*.md) says it should hold. `azlb verify` prints
// the report; the reliability suites (test/chaos) use it to decide whether
// the controllers converged.
//
// Independence rule. The expectations here are written from the
// documentation, not from the reconcile code, so a mistake in the
// controllers shows up as a finding instead of being repeated here. The
// package therefore never imports internal/provider, internal/lbstore,
// internal/backendpool, internal/placement, internal/localservice,
// internal/adminstate, internal/nicpool, internal/servicegateway,
// internal/compute, internal/securitygroup or internal/accesscontrol (a test
// enforces this). It uses only:
//
//   - internal/config to load azure.json (the input, not a behaviour);
//   - internal/azure for read-only ARM clients (verify installs a write
//     fence that refuses every write, so it cannot change Azure);
//   - internal/annotations to read annotation values (parsing and
//     validation of the input; how they turn into rules and probes, their
//     defaults and the probe resolution are derived here from
//     docs/load-balancers.md). The access-control inputs (source ranges,
//     service tags, deny-all, disable-nsg-rule) are read here, from
//     docs/security-groups.md, not by the package that writes the rules;
//   - internal/names for the documented names and ARM ids (the naming
//     table of docs/load-balancers.md, tested in that package);
//   - internal/lbclass, the one predicate of whose a Service is
//     (--load-balancer-class): which Services are judged, not how.
//
// Contract:
//
//   - Collect reads everything once (Services, nodes, namespaces,
//     EndpointSlices; load balancers, public IPs, the network security group
//     securityGroupName names in the node-pool modes, and in the modes that
//     use them the VMs behind nodes or the service gateway), Check compares,
//     and neither writes anything anywhere.
//   - A Finding names the object, what Azure holds, what the documentation
//     says it should hold and the page that says so. Findings are sorted;
//     an empty report means Azure matches the documented behaviour.
//   - What the documentation leaves open is not a finding: where a Service
//     is placed among eligible load balancers (history decides), members of
//     a cluster pool no rule uses, a NIC-based member whose VM is not running
//     (it may stay), Services azlb refuses (load-balancers.md, Which
//     Services are refused; refusals.go derives each from the pages and
//     what Azure holds) or that pod-based load balancing refuses: nothing
//     is written for them, each is one skipped line naming the reason, and
//     what such a Service had before is left alone.
//   - Objects not azlb's are never findings: load balancers that are not
//     managed (docs/load-balancers.md: Standard ones with the cluster pool or
//     the cluster tag, and the configured names), public IPs without both of
//     azlb's tags, gateway services not named by a UID, security rules not
//     named k8s-azure-lb* with a priority in 500-4096, and LoadBalancer
//     Services of another implementation (Snapshot.Class does not own
//     them): what carries their names on azlb's load balancers is skipped.
//     With a class, the default implementation may write the same security
//     rules into the same NSG, so a destination that is no address of a
//     frontend on azlb's load balancers nor of a node is not judged, nor is
//     a rule that holds only such destinations.
//   - Security rules (docs/security-groups.md) are compared as (protocol,
//     source, destination, port) tuples per Service and family; their
//     priorities are not judged, except that a deny-all must come after the
//     allows of the same destination. No security group configured: no
//     security rule is judged. Pod-based mode is not covered by that page
//     and has no security rule checks.
//
// Operator documentation: docs/verify.md.
package verify
