package metrics

import (
	"context"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// MetricContext measures one logical Azure operation. Create it when the
// operation starts and call ObserveOperationWithResult once with the terminal
// outcome. It is not safe for concurrent use.
type MetricContext struct {
	clock  clock.PassiveClock
	start  time.Time
	logger klog.Logger
	labels APIRequest
}

// NewMetricContext starts measuring an operation. The request label is
// prefix + "_" + request (just request when prefix is empty), e.g. prefix
// "loadbalancer_adminstate" and request "update" give
// "loadbalancer_adminstate_update".
func NewMetricContext(prefix, request, resourceGroup, subscriptionID, source string) *MetricContext {
	return NewMetricContextWithClock(clock.RealClock{}, prefix, request, resourceGroup, subscriptionID, source)
}

// NewMetricContextWithClock is NewMetricContext with an injected clock.
func NewMetricContextWithClock(clk clock.PassiveClock, prefix, request, resourceGroup, subscriptionID, source string) *MetricContext {
	Register()
	if clk == nil {
		clk = clock.RealClock{}
	}
	name := request
	if prefix != "" {
		name = prefix + "_" + request
	}
	return &MetricContext{
		clock:  clk,
		start:  clk.Now(),
		logger: klog.Background(),
		labels: APIRequest{Request: name, ResourceGroup: resourceGroup, SubscriptionID: subscriptionID, Source: source},
	}
}

// WithContext makes the context's logger (klog.FromContext) the one the
// MetricContext logs observations with. It returns mc.
func (mc *MetricContext) WithContext(ctx context.Context) *MetricContext {
	mc.logger = klog.FromContext(ctx)
	return mc
}

// Request returns the request label value.
func (mc *MetricContext) Request() string { return mc.labels.Request }

// APIRequest returns the label values of this context, for the API request
// helpers.
func (mc *MetricContext) APIRequest() APIRequest { return mc.labels }

// ObserveOperationWithResult records the operation's latency (since the
// context was created) in cloudprovider_azure_op_duration_seconds and, when
// isOperationSucceeded is false, increments
// cloudprovider_azure_op_failure_count. labelAndValues are extra key/value
// pairs for the log line only; they do not become metric labels. It returns
// the observed latency.
func (mc *MetricContext) ObserveOperationWithResult(isOperationSucceeded bool, labelAndValues ...string) time.Duration {
	latency := mc.clock.Since(mc.start)
	values := mc.labels.values()
	opDuration.WithLabelValues(values...).Observe(latency.Seconds())
	if !isOperationSucceeded {
		opFailures.WithLabelValues(values...).Inc()
	}
	if mc.logger.V(4).Enabled() {
		kv := make([]any, 0, 8+len(labelAndValues))
		kv = append(kv, "request", mc.labels.Request, "resourceGroup", values[1], "source", mc.labels.Source,
			"succeeded", isOperationSucceeded, "latency", latency)
		for _, s := range labelAndValues {
			kv = append(kv, s)
		}
		mc.logger.V(4).Info("Observed Azure operation", kv...)
	}
	return latency
}

// CountFailedOperation increments cloudprovider_azure_op_failure_count without
// observing latency. Prefer ObserveOperationWithResult.
func (mc *MetricContext) CountFailedOperation() {
	opFailures.WithLabelValues(mc.labels.values()...).Inc()
}

// RateLimitedCount counts a client-side rate-limit rejection under this
// context's labels.
func (mc *MetricContext) RateLimitedCount() { CountAPIRequestRateLimited(mc.labels) }

// ThrottledCount counts a throttled request under this context's labels.
func (mc *MetricContext) ThrottledCount() { CountAPIRequestThrottled(mc.labels) }
