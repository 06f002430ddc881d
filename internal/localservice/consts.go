package localservice

import "time"

// Event reasons the updater records on Services. They are the one place
// these strings live; the user-facing description is in
// docs/multiple-load-balancers.md ("ExternalTrafficPolicy=Local services").
const (
	// EventReasonPoolUpdated (Normal): the Service's dedicated backend pool
	// was written and now holds the nodes running its endpoints.
	EventReasonPoolUpdated = "LoadBalancerBackendPoolUpdated"
	// EventReasonPoolUpdateRetrying (Warning): an update attempt failed with
	// a retriable error (throttling, conflict) and is queued again.
	EventReasonPoolUpdateRetrying = "LoadBalancerBackendPoolUpdateRetrying"
	// EventReasonPoolUpdateFailed (Warning): an update failed with a
	// non-retriable error, or its retries are exhausted; it was dropped.
	EventReasonPoolUpdateFailed = "LoadBalancerBackendPoolUpdateFailed"
)

// Metric and lock labels.
const (
	// MetricPrefix and MetricRequest form the request label of the
	// operation metric: loadbalancer_backendpool_local_update, in
	// cloudprovider_azure_op_duration_seconds and
	// cloudprovider_azure_op_failure_count. One observation is recorded per
	// terminal outcome of a pool update (success or final failure), never
	// for a retried attempt, a parked tick or a stale drop.
	MetricPrefix  = "loadbalancer_backendpool_local"
	MetricRequest = "update"
	// LockCaller labels the updater's waits for the service-reconcile lock
	// in cloudprovider_azure_lock_wait_duration_seconds.
	LockCaller = "LocalServiceBackendPoolUpdater"
)

// ControllerName is the updater's name, as --controllers and /healthz know
// it; QueueName names its workqueue in the workqueue metrics.
const (
	ControllerName = "local-service-pools"
	QueueName      = "localservice_pools"
)

// Defaults, the same as azure.json's.
const (
	// DefaultInterval is loadBalancerBackendPoolUpdateIntervalInSeconds'
	// default.
	DefaultInterval = 30 * time.Second
	// DefaultMaxRetries is loadBalancerBackendPoolUpdateMaxRetries' default.
	DefaultMaxRetries = 3
)
