package servicegateway

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/azlb/azlb/internal/metrics"
)

// metricValue reads one series (counter, gauge, or histogram count) from
// the registry; labels must all match.
func metricValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !matches(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return total
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for k, v := range labels {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k && lp.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// B32, bug 48: each completed operation is counted once under its label;
// gauges follow the state and the gateway's totals.
func TestMetrics(t *testing.T) {
	created := metricValue(t, metrics.SGWOperationsName, map[string]string{"operation": "create", "result": "success"})
	deleted := metricValue(t, metrics.SGWOperationsName, map[string]string{"operation": "delete", "result": "success"})
	syncs := metricValue(t, metrics.SGWLocationSyncsName, map[string]string{"result": "success"})
	h, svc := provisioned(t)
	if got := metricValue(t, metrics.SGWOperationsName, map[string]string{"operation": "create", "result": "success"}) - created; got != 1 {
		t.Errorf("creates counted %v times", got)
	}
	if metricValue(t, metrics.SGWLocationSyncsName, map[string]string{"result": "success"})-syncs < 1 {
		t.Error("no address update counted")
	}
	if metricValue(t, metrics.SGWEnabledName, nil) != 1 {
		t.Error("servicegateway_enabled is not 1")
	}
	h.engine.refreshGauges()
	if l, a := metricValue(t, metrics.SGWLocationsName, nil), metricValue(t, metrics.SGWAddressesName, nil); l != 1 || a != 1 {
		t.Errorf("locations %v addresses %v, want 1 1", l, a)
	}
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n1", "10.2.0.11"))
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc) + " 10.2.0.11=" + uid(svc))
	h.remove(svc)
	h.waitGone(svc)
	if got := metricValue(t, metrics.SGWOperationsName, map[string]string{"operation": "delete", "result": "success"}) - deleted; got != 1 {
		t.Errorf("deletes counted %v times", got)
	}
	h.engine.refreshGauges()
	for _, s := range metrics.SGWStates {
		if v := metricValue(t, metrics.SGWPendingName, map[string]string{"state": s}); v != 0 {
			t.Errorf("pending %s = %v after everything finished", s, v)
		}
	}
	if l, a := metricValue(t, metrics.SGWLocationsName, nil), metricValue(t, metrics.SGWAddressesName, nil); l != 0 || a != 0 {
		t.Errorf("locations %v addresses %v after the deletion", l, a)
	}
}
