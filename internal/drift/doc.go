// Package drift runs the drift pass: every interval, on the leader, it
// brings what Azure holds back to what azlb's Services call for, so a
// change made out of band (a rule deleted by hand, an admin state flipped,
// a security rule edited) is repaired without waiting for some Service or
// node to change.
//
// Contract:
//
//   - One pass per interval (azure.json driftRepairIntervalInSeconds,
//     default 300 s, 0: no pass), the first one interval after Run starts
//     (the controller start already reconciles everything). Time comes from
//     an injected clock.
//   - A pass asks its Repairer (the provider) to read every load balancer,
//     public IP and the security group once (BeginRepairPass), then to
//     repair each LoadBalancer Service azlb serves (RepairService) through
//     the usual writers, a few at a time. With nothing drifted it writes
//     nothing.
//   - Each repair is a Normal event DriftRepaired on its Service naming what
//     was written, and counts in cloudprovider_azure_drift_repairs_total by
//     kind; a pass that fails is logged and counted, and the next one runs
//     on time.
//
// Operator documentation: docs/reliability.md (Drift).
package drift
