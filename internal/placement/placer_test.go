package placement

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func badSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus", Values: []string{"v"}}}}
}

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name    string
		configs []cfg
		def     string
		want    []string // substrings; empty means success
	}{
		{
			name:    "valid with default",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", NodeSelector: matchLabels("a", "b")}},
			def:     "kubernetes",
		},
		{
			name:    "default matched case-insensitively",
			configs: []cfg{{Name: "Kubernetes"}},
			def:     "kubernetes",
		},
		{
			name:    "no configurations",
			configs: nil,
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations is empty", `"kubernetes"`},
		},
		{
			name:    "missing default",
			configs: []cfg{{Name: "lb-1"}, {Name: "lb-2"}},
			def:     "kubernetes",
			want:    []string{`the default load balancer "kubernetes" must have a configuration`},
		},
		{
			name:    "empty default name",
			configs: []cfg{{Name: "lb-1"}},
			def:     "",
			want:    []string{`the default load balancer "" must have a configuration`},
		},
		{
			name:    "invalid namespace selector",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", ServiceNamespaceSelector: badSelector()}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[1].serviceNamespaceSelector", "Bogus"},
		},
		{
			name:    "invalid service label selector",
			configs: []cfg{{Name: "kubernetes", ServiceLabelSelector: badSelector()}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[0].serviceLabelSelector"},
		},
		{
			name:    "invalid node selector",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[2].nodeSelector"},
		},
		{
			name:    "empty name",
			configs: []cfg{{Name: "kubernetes"}, {Name: ""}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[1].name: must not be empty"},
		},
		{
			name:    "name with spaces",
			configs: []cfg{{Name: "kubernetes"}, {Name: " lb-2"}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[1].name", "leading or trailing spaces"},
		},
		{
			name:    "duplicate name differing in case",
			configs: []cfg{{Name: "kubernetes"}, {Name: "LB-2"}, {Name: "lb-2"}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[2].name", "duplicates multipleStandardLoadBalancerConfigurations[1].name"},
		},
		{
			name:    "shared primaryVMSet",
			configs: []cfg{{Name: "kubernetes", PrimaryVMSet: "pool1"}, {Name: "lb-2", PrimaryVMSet: "POOL1"}},
			def:     "kubernetes",
			want:    []string{"multipleStandardLoadBalancerConfigurations[1].primaryVMSet", "multipleStandardLoadBalancerConfigurations[0]"},
		},
		{
			name:    "every problem reported",
			configs: []cfg{{Name: "lb-1", ServiceNamespaceSelector: badSelector()}, {Name: "lb-2", NodeSelector: badSelector()}},
			def:     "kubernetes",
			want: []string{
				"[0].serviceNamespaceSelector",
				"[1].nodeSelector",
				"the default load balancer",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.configs, tc.def)
			if len(tc.want) == 0 {
				if err != nil || p == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if p != nil {
				t.Errorf("New returned a Placer alongside an error")
			}
			wantErrContaining(t, err, tc.want...)
		})
	}
}

func TestPlacerNames(t *testing.T) {
	p := mustNew(t, []cfg{{Name: "Kubernetes"}, {Name: "lb-2"}, {Name: "edge-internal"}}, "kubernetes")
	if got, want := p.ConfigNames(), []string{"Kubernetes", "lb-2", "edge-internal"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ConfigNames = %v, want %v", got, want)
	}
	if got := p.DefaultName(); got != "Kubernetes" {
		t.Errorf("DefaultName = %q, want the configured spelling %q", got, "Kubernetes")
	}
	if got, ok := p.ConfigName(" LB-2 "); !ok || got != "lb-2" {
		t.Errorf("ConfigName(LB-2) = %q, %v", got, ok)
	}
	if _, ok := p.ConfigName("lb-9"); ok {
		t.Errorf("ConfigName(lb-9) found a configuration")
	}

	lbTests := []struct {
		lb       string
		cfg      string
		internal bool
		ok       bool
	}{
		{"kubernetes", "Kubernetes", false, true},
		{"KUBERNETES-INTERNAL", "Kubernetes", true, true},
		{"lb-2-internal", "lb-2", true, true},
		{"edge-internal", "edge-internal", false, true}, // a configured name wins
		{"edge-internal-internal", "edge-internal", true, true},
		{"edge", "", false, false},
		{"lb-3-internal", "", false, false},
		{"-internal", "", false, false},
		{"", "", false, false},
	}
	for _, tc := range lbTests {
		c, internal, ok := p.ConfigForLoadBalancer(tc.lb)
		if c != tc.cfg || internal != tc.internal || ok != tc.ok {
			t.Errorf("ConfigForLoadBalancer(%q) = %q, %v, %v; want %q, %v, %v", tc.lb, c, internal, ok, tc.cfg, tc.internal, tc.ok)
		}
	}
	if got := LoadBalancerName("lb-2", true); got != "lb-2-internal" {
		t.Errorf("LoadBalancerName internal = %q", got)
	}
	if got := LoadBalancerName("lb-2", false); got != "lb-2" {
		t.Errorf("LoadBalancerName public = %q", got)
	}
}

func TestNewDoesNotAliasInput(t *testing.T) {
	configs := []cfg{{Name: "kubernetes"}, {Name: "lb-2", AllowServicePlacement: boolPtr(true)}}
	p := mustNew(t, configs, "kubernetes")
	*configs[1].AllowServicePlacement = false
	configs[1].Name = "changed"
	got, err := p.PlaceService(ServiceInfo{Key: "ns/a"}, map[string]int{"kubernetes": 5})
	if err != nil || got != "lb-2" {
		t.Fatalf("PlaceService after mutating the input = %q, %v; want lb-2 (Placer must be immutable)", got, err)
	}
}
