package adminstate

// Event reasons. The LoadBalancerAdminState* events are recorded on the node
// once the Azure updates for it have finished; the SpotEviction* events when
// the controller adds (or fails to add) the spot-eviction taint. No event is
// recorded on Services.
const (
	// EventReasonAdminStateDown (Normal): AdminState=Down is in effect on
	// every backend pool entry of the node.
	EventReasonAdminStateDown = "LoadBalancerAdminStateDown"
	// EventReasonAdminStateNone (Normal): AdminState=None has been restored
	// on every backend pool entry of the node.
	EventReasonAdminStateNone = "LoadBalancerAdminStateNone"
	// EventReasonAdminStateUpdateFailed (Warning): an Azure update for the
	// node failed; the message carries the error. The node is retried with
	// exponential backoff.
	EventReasonAdminStateUpdateFailed = "LoadBalancerAdminStateUpdateFailed"
	// EventReasonSpotEvictionTainted (Normal): the controller added
	// cloudprovider.azure.microsoft.com/draining=spot-eviction after a
	// PreemptScheduled event.
	EventReasonSpotEvictionTainted = "SpotEvictionTaintAdded"
	// EventReasonSpotEvictionTaintFailed (Warning): adding the spot-eviction
	// taint failed; it is retried with exponential backoff.
	EventReasonSpotEvictionTaintFailed = "SpotEvictionTaintFailed"

	// ReasonPreemptScheduled is the reason of the Kubernetes event announcing
	// an imminent Spot VM eviction of the node it is about.
	ReasonPreemptScheduled = "PreemptScheduled"
)

// Metric and lock labels.
const (
	// MetricPrefix prefixes the operation metric request label:
	// cloudprovider_azure_op_duration_seconds{request="loadbalancer_adminstate_update"}.
	MetricPrefix = "loadbalancer_adminstate"
	// MetricRequestUpdate is the request of one Manager apply.
	MetricRequestUpdate = "update"
	// LockCaller is the caller label of
	// cloudprovider_azure_lock_wait_duration_seconds for the admin-state
	// controller.
	LockCaller = "AdminStateController"
)
