package lbclass

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func service(typ v1.ServiceType, class *string) *v1.Service {
	return &v1.Service{Spec: v1.ServiceSpec{Type: typ, LoadBalancerClass: class}}
}

func TestOwns(t *testing.T) {
	const ours = "azlb.example/test"
	for _, tc := range []struct {
		name  string
		class Class
		svc   *v1.Service
		want  bool
	}{
		{"default: class-less LoadBalancer", "", service(v1.ServiceTypeLoadBalancer, nil), true},
		{"default: classed LoadBalancer", "", service(v1.ServiceTypeLoadBalancer, ptr.To(ours)), false},
		{"default: ClusterIP", "", service(v1.ServiceTypeClusterIP, nil), false},
		{"default: NodePort", "", service(v1.ServiceTypeNodePort, nil), false},
		{"class: its LoadBalancer", ours, service(v1.ServiceTypeLoadBalancer, ptr.To(ours)), true},
		{"class: class-less LoadBalancer", ours, service(v1.ServiceTypeLoadBalancer, nil), false},
		{"class: another class", ours, service(v1.ServiceTypeLoadBalancer, ptr.To("other.example/lb")), false},
		{"class: a prefix of it", ours, service(v1.ServiceTypeLoadBalancer, ptr.To("azlb.example/tes")), false},
		{"class: ClusterIP", ours, service(v1.ServiceTypeClusterIP, nil), false},
		{"nil Service", ours, nil, false},
	} {
		if got := tc.class.Owns(tc.svc); got != tc.want {
			t.Errorf("%s: Owns = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"", "azlb", "azlb.example/test", "example.com/internal-vip"} {
		c, err := Parse(s)
		if err != nil || string(c) != s {
			t.Errorf("Parse(%q) = %q, %v", s, c, err)
		}
	}
	for _, s := range []string{"Azlb Class", "a/b/c", "/x", "example.com/", "-x"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", s)
		}
	}
}
