package placement

import (
	"errors"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPlaceNode(t *testing.T) {
	tests := []struct {
		name    string
		configs []cfg
		node    NodeInfo
		counts  map[string]int
		want    string
		wantErr []string
	}{
		{
			name: "primaryVMSet wins over a matching nodeSelector and over counts",
			configs: []cfg{
				{Name: "kubernetes"},
				{Name: "lb-2", NodeSelector: matchLabels("zone", "1")},
				{Name: "lb-3", PrimaryVMSet: "pool3"},
			},
			node:   NodeInfo{Name: "n1", Labels: map[string]string{"zone": "1"}, VMSet: "pool3"},
			counts: map[string]int{"kubernetes": 0, "lb-2": 0, "lb-3": 100},
			want:   "lb-3",
		},
		{
			name:    "primaryVMSet compared case-insensitively",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", PrimaryVMSet: "Pool2"}},
			node:    NodeInfo{Name: "n1", VMSet: "POOL2"},
			counts:  map[string]int{"lb-2": 10},
			want:    "lb-2",
		},
		{
			name:    "primaryVMSet moves a node off its current LB",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", PrimaryVMSet: "pool2"}},
			node:    NodeInfo{Name: "n1", VMSet: "pool2", Current: "kubernetes"},
			want:    "lb-2",
		},
		{
			name: "nodeSelectors matching several: fewest nodes",
			configs: []cfg{
				{Name: "kubernetes"},
				{Name: "lb-2", NodeSelector: matchLabels("zone", "1")},
				{Name: "lb-3", NodeSelector: matchLabels("gpu", "true")},
			},
			node:   NodeInfo{Name: "n1", Labels: map[string]string{"zone": "1", "gpu": "true"}},
			counts: map[string]int{"kubernetes": 0, "lb-2": 5, "lb-3": 4},
			want:   "lb-3",
		},
		{
			name: "a matching nodeSelector excludes selector-less LBs",
			configs: []cfg{
				{Name: "kubernetes"},
				{Name: "lb-2", NodeSelector: matchLabels("zone", "1")},
			},
			node:   NodeInfo{Name: "n1", Labels: map[string]string{"zone": "1"}},
			counts: map[string]int{"kubernetes": 0, "lb-2": 50},
			want:   "lb-2",
		},
		{
			name: "no matching selector: selector-less LBs, fewest nodes",
			configs: []cfg{
				{Name: "kubernetes"},
				{Name: "lb-2", NodeSelector: matchLabels("zone", "1")},
				{Name: "lb-3"},
			},
			node:   NodeInfo{Name: "n1", Labels: map[string]string{"zone": "2"}},
			counts: map[string]int{"kubernetes": 3, "lb-2": 0, "lb-3": 1},
			want:   "lb-3",
		},
		{
			name:    "VM set that is nobody's primary falls through to selectors",
			configs: []cfg{{Name: "kubernetes", PrimaryVMSet: "pool1"}, {Name: "lb-2"}},
			node:    NodeInfo{Name: "n1", VMSet: "pool9"},
			counts:  map[string]int{"kubernetes": 1, "lb-2": 2},
			want:    "kubernetes",
		},
		{
			name:    "empty nodeSelector matches every node (rule 2)",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", NodeSelector: &metav1.LabelSelector{}}},
			node:    NodeInfo{Name: "n1"},
			counts:  map[string]int{"kubernetes": 0, "lb-2": 9},
			want:    "lb-2",
		},
		{
			name:    "current kept while still a target",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			node:    NodeInfo{Name: "n1", Current: "lb-2"},
			counts:  map[string]int{"kubernetes": 0, "lb-2": 40},
			want:    "lb-2",
		},
		{
			name:    "current kept, matched case-insensitively",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			node:    NodeInfo{Name: "n1", Current: "LB-2"},
			counts:  map[string]int{"kubernetes": 0, "lb-2": 40},
			want:    "lb-2",
		},
		{
			name:    "current no longer a target: node moves",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2", NodeSelector: matchLabels("zone", "1")}, {Name: "lb-3"}},
			node:    NodeInfo{Name: "n1", Labels: map[string]string{"zone": "2"}, Current: "lb-2"},
			counts:  map[string]int{"kubernetes": 2, "lb-2": 0, "lb-3": 2},
			want:    "kubernetes",
		},
		{
			name:    "ties go to configuration order",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-z"}, {Name: "lb-a"}},
			node:    NodeInfo{Name: "n1"},
			counts:  map[string]int{"kubernetes": 1, "lb-z": 0, "lb-a": 0},
			want:    "lb-z",
		},
		{
			name:    "counts keyed in another case",
			configs: []cfg{{Name: "kubernetes"}, {Name: "lb-2"}},
			node:    NodeInfo{Name: "n1"},
			counts:  map[string]int{"Kubernetes": 3, "LB-2": 1},
			want:    "lb-2",
		},
		{
			name: "no target",
			configs: []cfg{
				{Name: "kubernetes", NodeSelector: matchLabels("zone", "1"), PrimaryVMSet: "pool1"},
				{Name: "lb-2", NodeSelector: matchLabels("zone", "2")},
			},
			node: NodeInfo{Name: "n9", Labels: map[string]string{"zone": "3"}, VMSet: "pool9"},
			wantErr: []string{
				`node "n9" (VM set "pool9")`,
				`kubernetes (primaryVMSet "pool1" is not the node's VM set, node labels do not match nodeSelector "zone=1")`,
				`lb-2 (node labels do not match nodeSelector "zone=2")`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := mustNew(t, tc.configs, "kubernetes")
			got, err := p.PlaceNode(tc.node, tc.counts)
			if tc.wantErr != nil {
				wantErrContaining(t, err, tc.wantErr...)
				var ne *NoEligibleNodeLoadBalancerError
				if !errors.As(err, &ne) {
					t.Fatalf("error %T is not *NoEligibleNodeLoadBalancerError", err)
				}
				if ne.Node != tc.node.Name || len(ne.Rejections) != len(tc.configs) {
					t.Errorf("error fields = %+v", ne)
				}
				if len(p.NodeTargets(tc.node)) != 0 {
					t.Errorf("NodeTargets non-empty for a node without target")
				}
				return
			}
			if err != nil {
				t.Fatalf("PlaceNode: %v", err)
			}
			if got != tc.want {
				t.Errorf("PlaceNode = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNodeTargets(t *testing.T) {
	p := mustNew(t, []cfg{
		{Name: "kubernetes"},
		{Name: "lb-2", NodeSelector: matchLabels("zone", "1")},
		{Name: "lb-3", NodeSelector: matchLabels("zone", "1")},
		{Name: "lb-4", PrimaryVMSet: "pool4"},
	}, "kubernetes")
	tests := []struct {
		node NodeInfo
		want []string
	}{
		{NodeInfo{VMSet: "pool4", Labels: map[string]string{"zone": "1"}}, []string{"lb-4"}},
		{NodeInfo{Labels: map[string]string{"zone": "1"}}, []string{"lb-2", "lb-3"}},
		{NodeInfo{Labels: map[string]string{"zone": "2"}}, []string{"kubernetes", "lb-4"}},
	}
	for _, tc := range tests {
		if got := p.NodeTargets(tc.node); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("NodeTargets(%+v) = %v, want %v", tc.node, got, tc.want)
		}
	}
}

func TestVMSetOfNode(t *testing.T) {
	tests := []struct {
		labels map[string]string
		want   string
	}{
		{nil, ""},
		{map[string]string{AgentPoolLabel: "nodepool1"}, "nodepool1"},
		{map[string]string{LegacyAgentPoolLabel: "legacy"}, "legacy"},
		{map[string]string{AgentPoolLabel: "new", LegacyAgentPoolLabel: "old"}, "new"},
		{map[string]string{AgentPoolLabel: "  ", LegacyAgentPoolLabel: "old"}, "old"},
		{map[string]string{AgentPoolLabel: " pool "}, "pool"},
		{map[string]string{"other": "x"}, ""},
	}
	for _, tc := range tests {
		if got := VMSetOfNode(tc.labels); got != tc.want {
			t.Errorf("VMSetOfNode(%v) = %q, want %q", tc.labels, got, tc.want)
		}
	}
}

func TestVMSetFromProviderID(t *testing.T) {
	tests := []struct {
		id, want string
	}{
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-pool1-123-vmss/virtualMachines/0", "aks-pool1-123-vmss"},
		{"azure:///subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachinescalesets/ss/virtualmachines/12", "ss"},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm-1", ""},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss", ""},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets//virtualMachines/0", ""},
		{"", ""},
		{"kind://docker/x/y", ""},
	}
	for _, tc := range tests {
		if got := VMSetFromProviderID(tc.id); got != tc.want {
			t.Errorf("VMSetFromProviderID(%q) = %q, want %q", tc.id, got, tc.want)
		}
	}
}
