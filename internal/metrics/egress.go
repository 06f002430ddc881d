package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Series of egress through the service gateway (pod-based load balancing).
const (
	SGWEgressIdentitiesName = "cloudprovider_azure_servicegateway_egress_identities"
	SGWEgressOperationsName = "cloudprovider_azure_servicegateway_egress_operations_total"
)

var (
	sgwEgressIdentities = metrics.NewGauge(&metrics.GaugeOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("egress_identities"),
		Help: "Egress identities azlb holds in Azure or is making or removing.", StabilityLevel: metrics.ALPHA})
	sgwEgressOperations = metrics.NewCounterVec(&metrics.CounterOpts{Namespace: Namespace, Subsystem: Subsystem, Name: sgwName("egress_operations_total"),
		Help: "Egress identity syncs that ended, by operation (provision, teardown) and result (success, or failure with the error code bucket).", StabilityLevel: metrics.ALPHA},
		[]string{"operation", "result", "error_code"})

	sgwEgressRegisterOnce sync.Once
)

func registerEgress() {
	sgwEgressRegisterOnce.Do(func() { legacyregistry.MustRegister(sgwEgressIdentities, sgwEgressOperations) })
}

// SetServiceGatewayEgressIdentities sets servicegateway_egress_identities.
func SetServiceGatewayEgressIdentities(n int) {
	registerEgress()
	sgwEgressIdentities.Set(float64(n))
}

// CountServiceGatewayEgressOperation counts an egress sync that ended
// (errorCode "" for a success).
func CountServiceGatewayEgressOperation(op, errorCode string) {
	registerEgress()
	if errorCode == "" {
		sgwEgressOperations.WithLabelValues(op, "success", "").Inc()
		return
	}
	sgwEgressOperations.WithLabelValues(op, "failure", errorCode).Inc()
}
