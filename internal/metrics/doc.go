// Package metrics defines the Prometheus metrics azlb exports about its use of
// Azure Resource Manager, and the small helpers controllers use to record them.
//
// All metrics live in the cloudprovider_azure namespace and are registered in
// k8s.io/component-base/metrics/legacyregistry, so the cloud-controller-manager's
// /metrics endpoint serves them. Registration happens once, lazily, the first
// time any helper of this package is used (or when Register is called).
//
// Two families exist:
//
//   - Operation metrics describe one logical controller operation, such as
//     "ensure the admin state of a node", which may issue several ARM
//     requests. A controller creates a MetricContext when the operation starts
//     and calls ObserveOperationWithResult exactly once when it ends, with the
//     terminal outcome. Series: cloudprovider_azure_op_duration_seconds
//     (histogram) and cloudprovider_azure_op_failure_count (counter), labelled
//     request, resource_group, subscription_id, source.
//
//   - API request metrics describe single ARM HTTP requests. They are recorded
//     by the pipeline policies of package internal/azure, not by controllers:
//     cloudprovider_azure_api_request_duration_seconds (histogram),
//     cloudprovider_azure_api_request_errors (counter, extra label code),
//     cloudprovider_azure_api_request_ratelimited_count and
//     cloudprovider_azure_api_request_throttled_count (counters), labelled
//     request, resource_group, subscription_id, source.
//
// Pod-based load balancing adds the cloudprovider_azure_servicegateway_*
// family (servicegateway.go): pending operations, operation outcomes and
// durations, retries, parking, deletion steps, the gateway's totals and the
// address updates; see docs/container-load-balancer.md.
//
// The Basic to Standard load balancer migration adds the
// cloudprovider_azure_basic_migration_* family (migration.go): Basic load
// balancers found, steps and their results, the migration's duration and
// the public IP upgrades; see docs/migration.md.
//
// In addition cloudprovider_azure_lock_wait_duration_seconds (histogram,
// labels lock and caller) records how long a caller waited to acquire a lock
// such as the load balancer store's write queue (lock "lbstore"); use
// ObserveLockWait.
//
// Resource group label values are lower-cased, since ARM treats resource group
// names case-insensitively. Time is read from an injectable
// k8s.io/utils/clock.PassiveClock so tests can drive durations exactly.
package metrics
