package placement

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/annotations"
)

func TestConfigurationsAnnotationKey(t *testing.T) {
	if ConfigurationsAnnotation != annotations.KeyLoadBalancerConfigurations {
		t.Errorf("ConfigurationsAnnotation = %q, annotations package uses %q", ConfigurationsAnnotation, annotations.KeyLoadBalancerConfigurations)
	}
}

// TestAnnotationFeedsPlacement wires annotations.Parse into PlaceService the
// way the Service controller does.
func TestAnnotationFeedsPlacement(t *testing.T) {
	p := mustNew(t, []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3"}}, "kubernetes")
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: "web",
		Annotations: map[string]string{annotations.KeyLoadBalancerConfigurations: "LB-3, lb-2"},
	}}
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.PlaceService(ServiceInfo{Key: "ns/web", Requested: spec.LoadBalancerConfigurations}, map[string]int{"lb-2": 4, "lb-3": 4, "kubernetes": 0})
	if err != nil || got != "lb-2" {
		t.Errorf("PlaceService = %q, %v; want lb-2 (requested, tie broken by configuration order)", got, err)
	}
}
