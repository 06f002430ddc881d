package config

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParseTaintSelector(t *testing.T) {
	tests := []struct {
		in      string
		want    TaintSelector
		wantErr string // substring; "" means valid
	}{
		{in: "ToBeDeletedByClusterAutoscaler", want: TaintSelector{Key: "ToBeDeletedByClusterAutoscaler"}},
		{in: "karpenter.sh/disrupted:NoSchedule", want: TaintSelector{Key: "karpenter.sh/disrupted", Effect: "NoSchedule"}},
		{in: "example.com/maintenance=planned", want: TaintSelector{Key: "example.com/maintenance", Value: "planned"}},
		{in: "example.com/maintenance=planned:NoExecute", want: TaintSelector{Key: "example.com/maintenance", Value: "planned", Effect: "NoExecute"}},
		{in: "", wantErr: `key ""`},
		{in: "bad key", wantErr: `key "bad key"`},
		{in: "a=:NoSchedule", wantErr: `empty value after "="`},
		{in: "a=b c", wantErr: `value "b c"`},
		{in: "a:noschedule", wantErr: `effect "noschedule": must be one of NoSchedule, PreferNoSchedule, NoExecute`},
		{in: "a:", wantErr: `effect ""`},
		{in: "node.kubernetes.io/unschedulable", wantErr: "cordoning never takes a node out of rotation"},
		{in: "node.kubernetes.io/unschedulable:NoSchedule", wantErr: "cordoning never takes a node out of rotation"},
		{in: "node.kubernetes.io/not-ready", wantErr: "not a durable signal"},
		{in: "node.kubernetes.io/unreachable:NoExecute", wantErr: "not a durable signal"},
	}
	for _, tt := range tests {
		got, err := ParseTaintSelector(tt.in)
		if tt.wantErr != "" {
			assertErrorContains(t, err, tt.wantErr)
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseTaintSelector(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("String() = %q, want %q", got.String(), tt.in)
		}
	}
}

func TestAdminStateTaintsDefaultAndEmpty(t *testing.T) {
	def := []TaintSelector{{Key: "ToBeDeletedByClusterAutoscaler"}, {Key: "karpenter.sh/disrupted", Effect: "NoSchedule"}}
	unset := mustLoad(t, doc(t, nil))
	if got := unset.AdminStateTaints(); !reflect.DeepEqual(got, def) {
		t.Errorf("unset: %+v, want %+v", got, def)
	}
	empty := mustLoad(t, doc(t, map[string]any{"loadBalancerAdminStateTaints": []string{}}))
	if got := empty.AdminStateTaints(); len(got) != 0 {
		t.Errorf("empty list: %+v, want none", got)
	}
	own := mustLoad(t, doc(t, map[string]any{"loadBalancerAdminStateTaints": []string{"example.com/retire", "ToBeDeletedByClusterAutoscaler"}}))
	if got := own.AdminStateTaints(); !reflect.DeepEqual(got, []TaintSelector{{Key: "example.com/retire"}, {Key: "ToBeDeletedByClusterAutoscaler"}}) {
		t.Errorf("own list: %+v", got)
	}
	// An explicit empty list survives being written out and read back.
	b, err := json.Marshal(empty)
	if err != nil {
		t.Fatal(err)
	}
	if again := mustLoad(t, b); again.LoadBalancerAdminStateTaints == nil || len(again.AdminStateTaints()) != 0 {
		t.Errorf("round trip of an empty list: %v", again.LoadBalancerAdminStateTaints)
	}
}

func TestBackendPoolDrainPeriodInSeconds(t *testing.T) {
	for _, tt := range []struct {
		in   *int
		want int32
	}{{nil, 0}, {ptrTo(0), 0}, {ptrTo(-5), 0}, {ptrTo(120), 120}, {ptrTo(99999), 3600}} {
		c := Config{LoadBalancerBackendPoolDrainPeriodInSeconds: tt.in}
		if got := c.BackendPoolDrainPeriodInSeconds(); got != tt.want {
			t.Errorf("%v: %d, want %d", tt.in, got, tt.want)
		}
	}
	// 0 (off) is kept when written out and read back.
	c := mustLoad(t, doc(t, map[string]any{"loadBalancerBackendPoolDrainPeriodInSeconds": 0}))
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := mustLoad(t, b).BackendPoolDrainPeriodInSeconds(); got != 0 {
		t.Errorf("round trip of 0: %d", got)
	}
}

func TestValidateAdminStateTaintsAndDrainPeriod(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"own taints", func(c *Config) { c.LoadBalancerAdminStateTaints = &[]string{"example.com/retire=yes:NoSchedule"} }, nil},
		{"no taints", func(c *Config) { c.LoadBalancerAdminStateTaints = &[]string{} }, nil},
		{"bad entries", func(c *Config) {
			c.LoadBalancerAdminStateTaints = &[]string{"ok", "node.kubernetes.io/unschedulable", "x:Never"}
		}, []string{
			`loadBalancerAdminStateTaints[1]: key "node.kubernetes.io/unschedulable" cannot take a node out of rotation: cordoning never`,
			`loadBalancerAdminStateTaints[2]: effect "Never": must be one of NoSchedule, PreferNoSchedule, NoExecute; an entry is "key", "key=value", "key:Effect" or "key=value:Effect"`,
		}},
		{"duplicate", func(c *Config) { c.LoadBalancerAdminStateTaints = &[]string{"a", "a"} }, []string{`loadBalancerAdminStateTaints[1]: duplicate "a"`}},
		{"drain 0", func(c *Config) { c.LoadBalancerBackendPoolDrainPeriodInSeconds = ptrTo(0) }, nil},
		{"drain 3600", func(c *Config) { c.LoadBalancerBackendPoolDrainPeriodInSeconds = ptrTo(3600) }, nil},
		{"drain negative", func(c *Config) { c.LoadBalancerBackendPoolDrainPeriodInSeconds = ptrTo(-1) },
			[]string{"loadBalancerBackendPoolDrainPeriodInSeconds: must be between 0 (off) and 3600"}},
		{"drain too long", func(c *Config) { c.LoadBalancerBackendPoolDrainPeriodInSeconds = ptrTo(3601) },
			[]string{"loadBalancerBackendPoolDrainPeriodInSeconds: must be between 0 (off) and 3600"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := baseConfig()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			assertErrorContains(t, err, tt.want...)
			if len(fieldErrors(err)) != len(tt.want) {
				t.Errorf("%d field errors, want %d: %v", len(fieldErrors(err)), len(tt.want), err)
			}
		})
	}
}
