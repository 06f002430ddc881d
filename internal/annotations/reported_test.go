package annotations

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestReportedAnnotationsIsBounded(t *testing.T) {
	r := NewReported(3)
	svc := func(i int) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("s", i), UID: types.UID(fmt.Sprint("uid-", i))}}
	}
	keys := []string{Prefix + "azure-x"}
	for i := range 5 {
		if !r.ShouldReport(svc(i), keys) {
			t.Fatalf("service %d not reported the first time", i)
		}
	}
	if n := r.Len(); n != 3 {
		t.Fatalf("size %d, want the bound 3", n)
	}
	if r.ShouldReport(svc(4), keys) || r.ShouldReport(svc(2), keys) {
		t.Error("a recently reported Service was reported again")
	}
	if !r.ShouldReport(svc(0), keys) {
		t.Error("the oldest Service was not evicted")
	}
}
