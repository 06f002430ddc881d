// Package leaderfence keeps a replica that lost its leader lease from
// writing to Azure before it notices: a frozen (SIGSTOP, a long GC or VM
// pause) or partitioned leader resumes with its workers mid-flight, and
// client-go's elector only ends the process after its next renew attempt
// fails. Whatever those workers send meanwhile would overlap the new
// leader's writes.
//
// Contract:
//
//   - A Fence watches the leader-election Lease (namespace/name, the
//     controller manager's --leader-elect-resource-*). Start, called once
//     on the elected replica (the cloud's Initialize), reads the Lease to
//     learn this replica's holder identity (it has just acquired it) and
//     keeps the latest holder and renewTime from a watch restricted to that
//     one Lease (RBAC: get, list, watch on that resource name).
//   - Allow is nil while the Lease names this replica and its renewTime (the
//     time this replica's elector wrote, by this machine's clock) is less
//     than RenewDeadline ago; otherwise an error saying why. Client-go
//     requires LeaseDuration > RenewDeadline, and another replica takes the
//     lease only LeaseDuration after it last saw a renew, so a write Allow
//     admits happens before anyone else can lead, up to clock skew between
//     the replicas' machines smaller than LeaseDuration - RenewDeadline
//     (5 s with the defaults).
//   - A frozen replica resumes with an old renewTime: Allow refuses at once,
//     before the elector notices. A stale watch can only make renewTime
//     older, never newer, so a fault closes the fence, never opens it.
//   - Before Start succeeds, Allow refuses (the identity is unknown).
//   - Time comes from an injected clock; Allow is cheap (atomics) and safe
//     for concurrent use.
//
// The controller manager installs Allow as the write fence of every ARM
// client (azure.Clients.SetWriteFence) and, through KubeWrites, on its
// Kubernetes clients' transport (leases and events pass) when leader
// election is on.
// Operator documentation: docs/reliability.md.
package leaderfence
