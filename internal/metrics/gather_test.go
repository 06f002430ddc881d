package metrics

import (
	dto "github.com/prometheus/client_model/go"

	"k8s.io/component-base/metrics/legacyregistry"
)

// filtered gathers legacyregistry but keeps only series whose source label is
// source, so tests sharing the global registry do not see each other.
type filtered struct{ source string }

func (f filtered) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(mfs))
	for _, mf := range mfs {
		var keep []*dto.Metric
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == LabelSource && lp.GetValue() == f.source {
					keep = append(keep, m)
				}
			}
		}
		if len(keep) > 0 {
			mf.Metric = keep
			out = append(out, mf)
		}
	}
	return out, nil
}
