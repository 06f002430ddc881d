package annotations

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	nodePortHTTP  = 30080
	nodePortHTTPS = 30443
	healthCheckNP = 32000
)

// newService returns a two-port Service (80 "http", 443 "https").
func newService(ann map[string]string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "svc", Annotations: ann},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, NodePort: nodePortHTTP, Protocol: v1.ProtocolTCP},
				{Name: "https", Port: 443, NodePort: nodePortHTTPS, Protocol: v1.ProtocolTCP},
			},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
		},
	}
}

func localService(ann map[string]string) *v1.Service {
	s := newService(ann)
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = healthCheckNP
	return s
}

// leafErrors flattens an errors.Join tree.
func leafErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	return []error{err}
}

// checkLeaves asserts every leaf is an *Error whose key is one of the
// annotation keys, and returns them.
func checkLeaves(t *testing.T, err error, ann map[string]string) []*Error {
	t.Helper()
	var out []*Error
	for _, leaf := range leafErrors(err) {
		var ae *Error
		if !errors.As(leaf, &ae) {
			t.Errorf("leaf error %q (%T) is not an *annotations.Error", leaf, leaf)
			continue
		}
		if _, ok := ann[ae.Key]; !ok {
			t.Errorf("error %q names key %q, which is not an annotation of the Service", ae, ae.Key)
		}
		if !strings.HasPrefix(ae.Error(), ae.Key+": ") {
			t.Errorf("error %q does not start with its key", ae)
		}
		out = append(out, ae)
	}
	return out
}

func i32(n int32) *int32 { return &n }
