package metrics

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Series of pod-based load balancing (the service gateway engine), all
// cloudprovider_azure_servicegateway_*.
const (
	SGWEnabledName            = "cloudprovider_azure_servicegateway_enabled"
	SGWPendingName            = "cloudprovider_azure_servicegateway_pending_operations"
	SGWOperationsName         = "cloudprovider_azure_servicegateway_operations_total"
	SGWOperationDurationName  = "cloudprovider_azure_servicegateway_operation_duration_seconds"
	SGWRetriesName            = "cloudprovider_azure_servicegateway_operation_retries_total"
	SGWParkedName             = "cloudprovider_azure_servicegateway_operations_parked_total"
	SGWPendingDeletionsName   = "cloudprovider_azure_servicegateway_pending_deletions"
	SGWDeleteStepFailuresName = "cloudprovider_azure_servicegateway_delete_step_failures_total"
	SGWOrphansCleanedName     = "cloudprovider_azure_servicegateway_orphans_cleaned_total"
	SGWLocationsName          = "cloudprovider_azure_servicegateway_locations"
	SGWAddressesName          = "cloudprovider_azure_servicegateway_addresses"
	SGWLocationSyncsName      = "cloudprovider_azure_servicegateway_location_syncs_total"
	SGWLocationSyncDurName    = "cloudprovider_azure_servicegateway_location_sync_duration_seconds"
	SGWLocationSyncSizeName   = "cloudprovider_azure_servicegateway_location_sync_addresses"
	SGWLocationAbandonedName  = "cloudprovider_azure_servicegateway_location_sync_abandoned_total"
	SGWInitDurationName       = "cloudprovider_azure_servicegateway_initialization_duration_seconds"
)

func sgwName(n string) string { return "servicegateway_" + n }

var (
	sgwEnabled = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("enabled"),
		Help: "1 when pod-based load balancing (the service gateway engine) runs.", StabilityLevel: metrics.ALPHA})
	sgwPending = metrics.NewGaugeVec(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("pending_operations"),
		Help: "Services whose operation is not done, by state: creating, updating, deleting, draining (deleting, waiting for the gateway to drop its addresses), parked.", StabilityLevel: metrics.ALPHA},
		[]string{"state"})
	sgwOperations = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("operations_total"),
		Help: "Attempts of Service operations that ended: result success (the operation is done, counted once) or failure (with the error code bucket: quota_exceeded, throttled, conflict, not_found, internal_error, timeout, invalid, unknown).", StabilityLevel: metrics.ALPHA},
		[]string{"operation", "result", "error_code"})
	sgwDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("operation_duration_seconds"),
		Help: "Time from the first attempt of a Service operation to its success.", Buckets: metrics.ExponentialBuckets(0.05, 2, 14), StabilityLevel: metrics.ALPHA},
		[]string{"operation"})
	sgwRetries = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("operation_retries_total"),
		Help: "Retries of Service operations scheduled after a transient failure.", StabilityLevel: metrics.ALPHA}, []string{"operation"})
	sgwParked = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("operations_parked_total"),
		Help: "Service operations parked: terminal (refused; until the Service changes) or cooldown (failed repeatedly; tried again after 5 minutes).", StabilityLevel: metrics.ALPHA},
		[]string{"reason"})
	sgwPendingDeletions = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("pending_deletions"),
		Help: "Services being deleted.", StabilityLevel: metrics.ALPHA})
	sgwDeleteSteps = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("delete_step_failures_total"),
		Help: "Failed steps of Service deletions: unlink, load_balancer, unregister, public_ip, finalizer.", StabilityLevel: metrics.ALPHA}, []string{"step"})
	sgwOrphans = metrics.NewCounter(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("orphans_cleaned_total"),
		Help: "Azure resources of Services that no longer exist, removed.", StabilityLevel: metrics.ALPHA})
	sgwLocations = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("locations"),
		Help: "Address locations (nodes) the service gateway holds, as last read or written.", StabilityLevel: metrics.ALPHA})
	sgwAddresses = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("addresses"),
		Help: "Addresses (pods) the service gateway holds, as last read or written.", StabilityLevel: metrics.ALPHA})
	sgwLocationSyncs = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("location_syncs_total"),
		Help: "updateAddressLocations calls, by result: success, retry (transient failure), terminal (refused by the service gateway).", StabilityLevel: metrics.ALPHA},
		[]string{"result"})
	sgwLocationSyncDur = metrics.NewHistogram(&metrics.HistogramOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("location_sync_duration_seconds"),
		Help: "Duration of updateAddressLocations calls.", Buckets: metrics.ExponentialBuckets(0.005, 2, 14), StabilityLevel: metrics.ALPHA})
	sgwLocationSyncSize = metrics.NewHistogram(&metrics.HistogramOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("location_sync_addresses"),
		Help: "Addresses carried by one updateAddressLocations call.", Buckets: metrics.ExponentialBuckets(1, 4, 10), StabilityLevel: metrics.ALPHA})
	sgwAbandoned = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("location_sync_abandoned_total"),
		Help: "Address updates given up after the service gateway refused them (reason: the error code).", StabilityLevel: metrics.ALPHA}, []string{"reason"})
	sgwInit = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("initialization_duration_seconds"),
		Help: "How long the last start-up took to read the state of Azure and the cluster.", StabilityLevel: metrics.ALPHA})

	sgwRegisterOnce sync.Once
)

func registerServiceGateway() {
	sgwRegisterOnce.Do(func() {
		legacyregistry.MustRegister(sgwEnabled, sgwPending, sgwOperations, sgwDuration, sgwRetries, sgwParked, sgwPendingDeletions,
			sgwDeleteSteps, sgwOrphans, sgwLocations, sgwAddresses, sgwLocationSyncs, sgwLocationSyncDur, sgwLocationSyncSize, sgwAbandoned, sgwInit)
	})
}

// SetServiceGatewayEnabled sets servicegateway_enabled to 1.
func SetServiceGatewayEnabled() {
	Register()
	sgwEnabled.Set(1)
}

// SGWStates are the states of servicegateway_pending_operations.
var SGWStates = []string{"creating", "updating", "deleting", "draining", "parked"}

// SetServiceGatewayPending sets the pending operations per state (states
// missing from counts are 0) and the pending deletions.
func SetServiceGatewayPending(counts map[string]int, deletions int) {
	Register()
	for _, s := range SGWStates {
		sgwPending.WithLabelValues(s).Set(float64(counts[s]))
	}
	sgwPendingDeletions.Set(float64(deletions))
}

// ObserveServiceGatewayOperation counts a Service operation that completed
// and records how long it took since its first attempt.
func ObserveServiceGatewayOperation(op string, d time.Duration) {
	Register()
	sgwOperations.WithLabelValues(op, "success", "").Inc()
	sgwDuration.WithLabelValues(op).Observe(d.Seconds())
}

// CountServiceGatewayOperationFailure counts a failed attempt.
func CountServiceGatewayOperationFailure(op, code string) {
	Register()
	sgwOperations.WithLabelValues(op, "failure", code).Inc()
}

// CountServiceGatewayRetry counts a retry scheduled after a failure.
func CountServiceGatewayRetry(op string) {
	Register()
	sgwRetries.WithLabelValues(op).Inc()
}

// CountServiceGatewayParked counts an operation parked (terminal or
// cooldown).
func CountServiceGatewayParked(reason string) {
	Register()
	sgwParked.WithLabelValues(reason).Inc()
}

// CountServiceGatewayDeleteStepFailure counts a failed deletion step.
func CountServiceGatewayDeleteStepFailure(step string) {
	Register()
	sgwDeleteSteps.WithLabelValues(step).Inc()
}

// CountServiceGatewayOrphanCleaned counts the resources of a Service that
// no longer exists, removed.
func CountServiceGatewayOrphanCleaned() {
	Register()
	sgwOrphans.Inc()
}

// SetServiceGatewayTotals sets the locations and addresses the gateway
// holds.
func SetServiceGatewayTotals(locations, addresses int) {
	Register()
	sgwLocations.Set(float64(locations))
	sgwAddresses.Set(float64(addresses))
}

// ObserveServiceGatewayLocationSync records one updateAddressLocations
// call: result success, retry or terminal, its duration and size.
func ObserveServiceGatewayLocationSync(result string, d time.Duration, addresses int) {
	Register()
	sgwLocationSyncs.WithLabelValues(result).Inc()
	sgwLocationSyncDur.Observe(d.Seconds())
	sgwLocationSyncSize.Observe(float64(addresses))
}

// CountServiceGatewayLocationAbandoned counts an address update given up.
func CountServiceGatewayLocationAbandoned(reason string) {
	Register()
	sgwAbandoned.WithLabelValues(reason).Inc()
}

// SetServiceGatewayInitDuration records how long start-up took.
func SetServiceGatewayInitDuration(d time.Duration) {
	Register()
	sgwInit.Set(d.Seconds())
}
