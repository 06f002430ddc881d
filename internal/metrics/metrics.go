package metrics

import (
	"strings"
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Namespace and subsystem shared by every azlb Azure metric; series names are
// cloudprovider_azure_<name>.
const (
	Namespace = "cloudprovider"
	Subsystem = "azure"
)

// Full series names, for tests and dashboards.
const (
	OpDurationName            = "cloudprovider_azure_op_duration_seconds"
	OpFailureCountName        = "cloudprovider_azure_op_failure_count"
	APIRequestDurationName    = "cloudprovider_azure_api_request_duration_seconds"
	APIRequestErrorsName      = "cloudprovider_azure_api_request_errors"
	APIRequestRateLimitedName = "cloudprovider_azure_api_request_ratelimited_count"
	APIRequestThrottledName   = "cloudprovider_azure_api_request_throttled_count"
	LockWaitDurationName      = "cloudprovider_azure_lock_wait_duration_seconds"
)

// Label names.
const (
	LabelRequest        = "request"
	LabelResourceGroup  = "resource_group"
	LabelSubscriptionID = "subscription_id"
	LabelSource         = "source"
	LabelCode           = "code"
	LabelLock           = "lock"
	LabelCaller         = "caller"
)

var (
	baseLabels  = []string{LabelRequest, LabelResourceGroup, LabelSubscriptionID, LabelSource}
	errorLabels = []string{LabelRequest, LabelResourceGroup, LabelSubscriptionID, LabelSource, LabelCode}

	opDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "op_duration_seconds",
		Help:           "Latency of a logical Azure operation (which may issue several ARM requests), by terminal outcome of the operation.",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, baseLabels)

	opFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "op_failure_count",
		Help:           "Number of logical Azure operations that ended in a terminal failure.",
		StabilityLevel: metrics.ALPHA,
	}, baseLabels)

	apiDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "api_request_duration_seconds",
		Help:           "Latency of single ARM HTTP requests that reached ARM (every SDK retry and LRO poll counts).",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, baseLabels)

	apiErrors = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "api_request_errors",
		Help:           "Number of ARM HTTP requests that failed, by ARM error code (or HTTP status, or 'transport', or 'fenced' for a write the leader fence refused).",
		StabilityLevel: metrics.ALPHA,
	}, errorLabels)

	apiRateLimited = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "api_request_ratelimited_count",
		Help:           "Number of ARM calls rejected by the client-side token bucket rate limiter before being sent.",
		StabilityLevel: metrics.ALPHA,
	}, baseLabels)

	apiThrottled = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "api_request_throttled_count",
		Help:           "Number of ARM requests throttled: answered 429 by ARM, or blocked locally while a throttle gate was closed.",
		StabilityLevel: metrics.ALPHA,
	}, baseLabels)

	lockWait = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      Namespace,
		Subsystem:      Subsystem,
		Name:           "lock_wait_duration_seconds",
		Help:           "Time a caller waited for a lock; for lock=\"lbstore\", the time a change waited for the load balancer store round that wrote it.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 14),
		StabilityLevel: metrics.ALPHA,
	}, []string{LabelLock, LabelCaller})

	registerOnce sync.Once
)

// Register registers every metric of this package in legacyregistry. It is
// idempotent and called implicitly by every recording helper; call it
// explicitly to have the series described on /metrics before first use.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(opDuration, opFailures, apiDuration, apiErrors, apiRateLimited, apiThrottled, lockWait)
	})
	registerServiceGateway()
	registerMigration()
}

// APIRequest names the label values of one ARM API request series.
type APIRequest struct {
	// Request is the operation, for example "loadbalancer_get".
	Request        string
	ResourceGroup  string
	SubscriptionID string
	// Source names the component issuing the request, for example
	// "cloud-controller-manager".
	Source string
}

func (r APIRequest) values() []string {
	return []string{r.Request, strings.ToLower(r.ResourceGroup), r.SubscriptionID, r.Source}
}

// ObserveAPIRequest records the latency of one ARM HTTP request that reached
// ARM, whatever its outcome.
func ObserveAPIRequest(r APIRequest, d time.Duration) {
	Register()
	apiDuration.WithLabelValues(r.values()...).Observe(d.Seconds())
}

// CountAPIRequestError counts one failed ARM HTTP request. code is the ARM
// error code when known, else the HTTP status or "transport".
func CountAPIRequestError(r APIRequest, code string) {
	Register()
	apiErrors.WithLabelValues(append(r.values(), code)...).Inc()
}

// CountAPIRequestRateLimited counts one call rejected by the client-side rate
// limiter.
func CountAPIRequestRateLimited(r APIRequest) {
	Register()
	apiRateLimited.WithLabelValues(r.values()...).Inc()
}

// CountAPIRequestThrottled counts one request answered 429 by ARM or blocked
// by a closed throttle gate.
func CountAPIRequestThrottled(r APIRequest) {
	Register()
	apiThrottled.WithLabelValues(r.values()...).Inc()
}
