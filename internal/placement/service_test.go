package placement

import (
	"errors"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlaceService(t *testing.T) {
	teamA := matchLabels("team", "a")
	tests := []struct {
		name    string
		configs []cfg
		svc     ServiceInfo
		rules   map[string]int
		want    string
		wantErr []string // substrings of the error; set means an error is expected
		errType any      // pointer to the expected error type for errors.As
	}{
		{
			name:    "no annotation: fewest rules among all",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3"}},
			svc:     ServiceInfo{Key: "default/web"},
			rules:   map[string]int{"kubernetes": 10, "lb-2": 3, "lb-3": 7},
			want:    "lb-2",
		},
		{
			name:    "explicit annotation with several eligible: fewest rules among the requested",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3"}, {Name: "lb-4"}},
			svc:     ServiceInfo{Key: "default/web", Requested: []string{"lb-3", "kubernetes"}},
			rules:   map[string]int{"kubernetes": 10, "lb-2": 0, "lb-3": 4, "lb-4": 0},
			want:    "lb-3",
		},
		{
			name:    "annotation matched case-insensitively and trimmed, empty entries ignored",
			configs: []cfg{{Name: "kubernetes"}, {Name: "Lb-2"}, {Name: "lb-3"}},
			svc:     ServiceInfo{Key: "default/web", Requested: []string{" LB-2 ", "", "LB-3"}},
			rules:   map[string]int{"kubernetes": 0, "lb-2": 9, "lb-3": 9},
			want:    "Lb-2",
		},
		{
			name:    "annotation naming an LB whose namespace selector rejects the namespace",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", ServiceNamespaceSelector: teamA}},
			svc:     ServiceInfo{Key: "team-b/api", NamespaceLabels: map[string]string{"team": "b"}, Requested: []string{"lb-2"}},
			wantErr: []string{`service "team-b/api"`, "requested by annotation " + ConfigurationsAnnotation, "lb-2", `namespace labels do not match serviceNamespaceSelector "team=a"`},
			errType: new(*NoEligibleLoadBalancerError),
		},
		{
			name:    "annotation naming an unknown configuration",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web", Requested: []string{"lb-2", "nope", "Other"}},
			wantErr: []string{`service "default/web"`, `["nope", "Other"]`, `configured: ["kubernetes", "lb-2"]`},
			errType: new(*UnknownConfigurationError),
		},
		{
			name:    "service label selector rejects",
			configs: []cfg{{Name: "kubernetes", ServiceLabelSelector: matchLabels("tier", "front")}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web", ServiceLabels: map[string]string{"tier": "back"}},
			rules:   map[string]int{"kubernetes": 0, "lb-2": 100},
			want:    "lb-2",
		},
		{
			name: "both selectors reported",
			configs: []cfg{
				{Name: "kubernetes", ServiceNamespaceSelector: teamA, ServiceLabelSelector: matchLabels("tier", "front"), AllowServicePlacement: boolPtr(false)},
			},
			svc:     ServiceInfo{Key: "x/y"},
			wantErr: []string{"serviceNamespaceSelector", "serviceLabelSelector", "allowServicePlacement is false"},
			errType: new(*NoEligibleLoadBalancerError),
		},
		{
			name:    "allowServicePlacement=false keeps an existing Service even with more rules",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", AllowServicePlacement: boolPtr(false)}},
			svc:     ServiceInfo{Key: "default/web", Current: "lb-2"},
			rules:   map[string]int{"kubernetes": 0, "lb-2": 50},
			want:    "lb-2",
		},
		{
			name:    "allowServicePlacement=false rejects a new Service",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", AllowServicePlacement: boolPtr(false)}},
			svc:     ServiceInfo{Key: "default/web"},
			rules:   map[string]int{"kubernetes": 50, "lb-2": 0},
			want:    "kubernetes",
		},
		{
			name:    "allowServicePlacement=false rejects a new Service that requests only it",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", AllowServicePlacement: boolPtr(false)}},
			svc:     ServiceInfo{Key: "default/web", Requested: []string{"lb-2"}},
			wantErr: []string{`service "default/web"`, "lb-2 (allowServicePlacement is false)"},
			errType: new(*NoEligibleLoadBalancerError),
		},
		{
			name:    "namespace selector change moves the Service",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", ServiceNamespaceSelector: teamA}, {Name: "lb-3"}},
			svc:     ServiceInfo{Key: "team-b/api", NamespaceLabels: map[string]string{"team": "b"}, Current: "lb-2"},
			rules:   map[string]int{"kubernetes": 4, "lb-2": 0, "lb-3": 2},
			want:    "lb-3",
		},
		{
			name:    "selector change with nowhere to go names the current load balancer",
			configs: []cfg{{Name: "kubernetes", ServiceNamespaceSelector: teamA}, {Name: "lb-2", AllowServicePlacement: boolPtr(false)}},
			svc:     ServiceInfo{Key: "team-b/api", NamespaceLabels: map[string]string{"team": "b"}, Current: "kubernetes"},
			wantErr: []string{"kubernetes (current load balancer, namespace labels do not match", "lb-2 (allowServicePlacement is false)"},
			errType: new(*NoEligibleLoadBalancerError),
		},
		{
			name:    "existing Service is never rebalanced",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web", Current: "kubernetes"},
			rules:   map[string]int{"kubernetes": 200, "lb-2": 0},
			want:    "kubernetes",
		},
		{
			name:    "annotation no longer naming the current LB moves the Service",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3"}},
			svc:     ServiceInfo{Key: "default/web", Current: "kubernetes", Requested: []string{"lb-2", "lb-3"}},
			rules:   map[string]int{"kubernetes": 0, "lb-2": 5, "lb-3": 1},
			want:    "lb-3",
		},
		{
			name:    "current configuration removed from config is ignored",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web", Current: "gone"},
			rules:   map[string]int{"kubernetes": 1, "lb-2": 0},
			want:    "lb-2",
		},
		{
			name:    "current matched case-insensitively",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web", Current: "LB-2"},
			rules:   map[string]int{"kubernetes": 0, "lb-2": 9},
			want:    "lb-2",
		},
		{
			name:    "ties go to configuration order",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-b"}, {Name: "lb-a"}},
			svc:     ServiceInfo{Key: "default/web"},
			rules:   map[string]int{"kubernetes": 3, "lb-b": 1, "lb-a": 1},
			want:    "lb-b",
		},
		{
			name:    "missing counts are zero and ties go to configuration order",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web"},
			rules:   nil,
			want:    "kubernetes",
		},
		{
			name:    "rule counts keyed in another case",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			svc:     ServiceInfo{Key: "default/web"},
			rules:   map[string]int{"KUBERNETES": 7, "Lb-2": 2},
			want:    "lb-2",
		},
		{
			name: "match expressions against a namespace without labels",
			configs: []cfg{
				{Name: "kubernetes", ServiceNamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}},
				{Name: "lb-2", ServiceNamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpDoesNotExist}}}},
			},
			svc:  ServiceInfo{Key: "default/web"},
			want: "lb-2",
		},
		{
			name:    "a matching label selector wins over a load balancer without selector and fewer rules (issue 40 item 8)",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web")}},
			svc:     ServiceInfo{Key: "default/web", ServiceLabels: map[string]string{"app": "web"}},
			rules:   map[string]int{"kubernetes": 0, "lb-web": 40},
			want:    "lb-web",
		},
		{
			name:    "a matching namespace selector wins over a load balancer without selector",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-a", ServiceNamespaceSelector: teamA}},
			svc:     ServiceInfo{Key: "team-a/web", NamespaceLabels: map[string]string{"team": "a"}},
			rules:   map[string]int{"kubernetes": 0, "lb-a": 40},
			want:    "lb-a",
		},
		{
			name: "among matching selectors, fewest rules",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-a", ServiceNamespaceSelector: teamA},
				{Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web")}},
			svc:   ServiceInfo{Key: "team-a/web", NamespaceLabels: map[string]string{"team": "a"}, ServiceLabels: map[string]string{"app": "web"}},
			rules: map[string]int{"kubernetes": 0, "lb-a": 9, "lb-web": 3},
			want:  "lb-web",
		},
		{
			name:    "an empty selector counts as none: the matching one wins",
			configs: []cfg{{Name: "kubernetes", ServiceLabelSelector: &metav1.LabelSelector{}}, {Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web")}},
			svc:     ServiceInfo{Key: "default/web", ServiceLabels: map[string]string{"app": "web"}},
			rules:   map[string]int{"kubernetes": 0, "lb-web": 40},
			want:    "lb-web",
		},
		{
			name:    "no selector matches: the load balancers without one, fewest rules",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web")}},
			svc:     ServiceInfo{Key: "default/api", ServiceLabels: map[string]string{"app": "api"}},
			rules:   map[string]int{"kubernetes": 5, "lb-2": 1, "lb-web": 0},
			want:    "lb-2",
		},
		{
			name:    "a Service labelled later leaves the load balancer without selector for the matching one",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web")}},
			svc:     ServiceInfo{Key: "default/web", ServiceLabels: map[string]string{"app": "web"}, Current: "kubernetes"},
			rules:   map[string]int{"kubernetes": 0, "lb-web": 40},
			want:    "lb-web",
		},
		{
			name:    "a matching selector that does not allow placement leaves the others",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web"), AllowServicePlacement: boolPtr(false)}},
			svc:     ServiceInfo{Key: "default/web", ServiceLabels: map[string]string{"app": "web"}},
			want:    "kubernetes",
		},
		{
			name:    "a Service stays on its matching load balancer that no longer allows placement",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-web", ServiceLabelSelector: matchLabels("app", "web"), AllowServicePlacement: boolPtr(false)}},
			svc:     ServiceInfo{Key: "default/web", ServiceLabels: map[string]string{"app": "web"}, Current: "lb-web"},
			want:    "lb-web",
		},
		{
			name:    "empty non-nil selector matches everything",
			configs: []cfg{{Name: "kubernetes", ServiceNamespaceSelector: &metav1.LabelSelector{}, ServiceLabelSelector: &metav1.LabelSelector{}}},
			svc:     ServiceInfo{Key: "default/web"},
			want:    "kubernetes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, tc.configs, "kubernetes")
			got, err := p.PlaceService(tc.svc, tc.rules)
			if tc.wantErr != nil {
				wantErrContaining(t, err, tc.wantErr...)
				if tc.errType != nil && !errors.As(err, tc.errType) {
					t.Errorf("error %T is not %T", err, tc.errType)
				}
				if got != "" {
					t.Errorf("got %q alongside an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlaceService: %v", err)
			}
			if got != tc.want {
				t.Errorf("PlaceService = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNoEligibleLoadBalancerErrorFields(t *testing.T) {
	p := mustNew(t, []cfg{
		{Name: "kubernetes", AllowServicePlacement: boolPtr(false)},
		{Name: "lb-2", ServiceLabelSelector: matchLabels("tier", "front")},
	}, "kubernetes")
	_, err := p.PlaceService(ServiceInfo{Key: "ns/svc"}, nil)
	ne := asNoEligible(t, err)
	want := &NoEligibleLoadBalancerError{
		Service: "ns/svc",
		Rejections: []Rejection{
			{Config: "kubernetes", Reasons: []string{"allowServicePlacement is false"}},
			{Config: "lb-2", Reasons: []string{`service labels do not match serviceLabelSelector "tier=front"`}},
		},
	}
	if !reflect.DeepEqual(ne, want) {
		t.Errorf("error = %#v, want %#v", ne, want)
	}
}

// TestPlaceServiceDeterministic repeats a placement with ties many times:
// map iteration order must not leak into the result.
func TestPlaceServiceDeterministic(t *testing.T) {
	configs := []cfg{{Name: "kubernetes"}, {Name: "lb-2"}, {Name: "lb-3"}, {Name: "lb-4"}, {Name: "lb-5"}}
	p := mustNew(t, configs, "kubernetes")
	rules := map[string]int{"kubernetes": 9, "lb-2": 2, "lb-3": 2, "lb-4": 2, "lb-5": 2, "LB-2": 0}
	for range 200 {
		got, err := p.PlaceService(ServiceInfo{Key: "a/b", Requested: []string{"lb-5", "lb-4", "lb-3", "lb-2"}}, rules)
		if err != nil || got != "lb-2" {
			t.Fatalf("PlaceService = %q, %v; want lb-2", got, err)
		}
	}
}
