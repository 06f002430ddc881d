// Package chaos holds azlb's reliability suites: the real controller
// binary, a real kube-apiserver + etcd and the ARM emulator on loopback,
// churned and faulted, judged by azlb verify (internal/verify: the
// documented behaviour, written independently of the reconcile).
//
//   - TestFaultMix: for each seed, 20% of ARM calls fail (429 with
//     Retry-After, 409 AnotherOperationInProgress, 412, 500/503, connection
//     resets, 504 after a delay, long-running operations ending Failed; the
//     network security group's GETs and PUTs like every other path) during
//     a churn of Services, their access settings (source ranges, service
//     tags, deny-all, no NSG rule, invalid ranges), endpoints, taints and
//     nodes; after the faults stop, verify (NSG rules included) must come
//     clean within the bound; then a restart without change must make no
//     ARM write.
//   - TestEgressFaultMix (egress_test.go): pod-based load balancing with
//     egress identities: labelled pods (some backing an inbound Service
//     too, a few with an invalid or the reserved identity) created,
//     deleted, relabelled and dropped an identity at a time under the same
//     fault mix plus failing service gateway POSTs; verify (egress
//     included) clean within the bound, a restart without change makes no
//     write, and once every pod is deleted all are released and nothing of
//     an identity is left.
//   - TestCrashRecovery: kill -9 of the controller at random points during
//     churn, restart, verify clean.
//   - TestLeaderFailover: two replicas under the chart's leader election;
//     the leader is killed, then the next one frozen (SIGSTOP) and resumed;
//     takeover within 15 s, and the emulator's request log (which names
//     each replica by its azure.json userAgent) shows no two replicas
//     writing in the same period.
//
// `make chaos` runs the full suites (AZLB_CHAOS_FULL=1); `make test` runs a
// short variant. Figures are printed as FIGURE lines and, with
// AZLB_CHAOS_OUT=dir, written to dir/figures.jsonl. See docs/reliability.md.
package chaos
