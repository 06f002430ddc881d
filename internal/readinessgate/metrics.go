package readinessgate

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	azmetrics "github.com/azlb/azlb/internal/metrics"
)

// DurationMetric is the histogram's full name.
const DurationMetric = "cloudprovider_azure_pod_readiness_gate_duration_seconds"

var (
	duration = metrics.NewHistogramVec(&metrics.HistogramOpts{Namespace: azmetrics.Namespace, Subsystem: azmetrics.Subsystem,
		Name: "pod_readiness_gate_duration_seconds",
		Help: "From a gated pod's containers becoming ready to its load balancer readiness gate turning True, by result: ready, not_load_balanced or timeout.",
		// 10 ms to about 10 minutes.
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 17),
		StabilityLevel: metrics.ALPHA}, []string{"result"})
	registerOnce sync.Once
)

func observe(result string, d time.Duration) {
	registerOnce.Do(func() { legacyregistry.MustRegister(duration) })
	duration.WithLabelValues(result).Observe(max(d, 0).Seconds())
}
