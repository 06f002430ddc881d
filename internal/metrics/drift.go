package metrics

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Series of the drift pass (internal/drift).
const (
	DriftPassesName       = "cloudprovider_azure_drift_passes_total"
	DriftPassDurationName = "cloudprovider_azure_drift_pass_duration_seconds"
	DriftRepairsName      = "cloudprovider_azure_drift_repairs_total"
)

var (
	driftPasses = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: "drift_passes_total",
		Help: "Drift passes, by result: success or failure.", StabilityLevel: metrics.ALPHA}, []string{"result"})
	driftDuration = metrics.NewHistogram(&metrics.HistogramOpts{Namespace: Namespace, Subsystem: Subsystem, Name: "drift_pass_duration_seconds",
		Help: "How long a drift pass took.", Buckets: metrics.ExponentialBuckets(0.05, 2, 14), StabilityLevel: metrics.ALPHA})
	driftRepairs = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: "drift_repairs_total",
		Help: "Objects a drift pass wrote back, by kind: load_balancer, backend_pool, security_group.", StabilityLevel: metrics.ALPHA}, []string{"kind"})

	driftRegisterOnce sync.Once
)

func registerDrift() {
	driftRegisterOnce.Do(func() { legacyregistry.MustRegister(driftPasses, driftDuration, driftRepairs) })
}

// ObserveDriftPass records one pass.
func ObserveDriftPass(ok bool, d time.Duration) {
	registerDrift()
	result := "success"
	if !ok {
		result = "failure"
	}
	driftPasses.WithLabelValues(result).Inc()
	driftDuration.Observe(d.Seconds())
}

// CountDriftRepair counts one object written back.
func CountDriftRepair(kind string) {
	registerDrift()
	driftRepairs.WithLabelValues(kind).Inc()
}
