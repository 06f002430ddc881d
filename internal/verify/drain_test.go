package verify

import (
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// The deletion taints (admin-state.md, Scale-down) and the pools' drain
// period (configuration.md).
func TestDeletionTaintsAndDrainPeriod(t *testing.T) {
	autoscaler := v1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1767225600", Effect: v1.TaintEffectNoSchedule}
	karpenter := v1.Taint{Key: "karpenter.sh/disrupted", Effect: v1.TaintEffectNoSchedule}
	n1 := func(s *Snapshot, state string) {
		lbOf(s).BackendAddressPools[0].Properties.LoadBalancerBackendAddresses[0] = entry("n1", "10.0.0.1", state)
	}
	dropN1 := func(s *Snapshot) {
		p := lbOf(s).BackendAddressPools[0].Properties
		p.LoadBalancerBackendAddresses = p.LoadBalancerBackendAddresses[1:]
	}
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   []string
	}{
		{"the autoscaler's taint: Down while it lingers", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{autoscaler}
			n1(s, "Down")
		}, nil},
		{"the autoscaler's taint: None is a finding", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{autoscaler}
		}, []string{"entry n1 (node n1) has adminState None, want Down (taints ToBeDeletedByClusterAutoscaler)"}},
		{"the autoscaler's taint: gone from the pool", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{autoscaler}
			dropN1(s)
		}, nil},
		{"Karpenter's taint: Down, and it stays", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{karpenter}
			dropN1(s)
		}, []string{"pool kubernetes/kubernetes: lacks node n1"}},
		{"Karpenter's taint: None is a finding", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{karpenter}
		}, []string{"want Down (taints karpenter.sh/disrupted)"}},
		{"Karpenter's key with another effect", func(s *Snapshot) {
			s.Nodes[0].Spec.Taints = []v1.Taint{{Key: "karpenter.sh/disrupted", Effect: v1.TaintEffectPreferNoSchedule}}
		}, nil},
		{"cordon is never a trigger", func(s *Snapshot) {
			s.Nodes[0].Spec.Unschedulable = true
			s.Nodes[0].Spec.Taints = []v1.Taint{{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}}
		}, nil},
		{"no taints configured: the autoscaler's lingering node stays None", func(s *Snapshot) {
			s.Config.LoadBalancerAdminStateTaints = &[]string{}
			s.Nodes[0].Spec.Taints = []v1.Taint{autoscaler}
			n1(s, "Down")
		}, []string{"entry n1 (node n1) has adminState Down, want None (no out-of-service taint)"}},
		{"an operator's own taint", func(s *Snapshot) {
			s.Config.LoadBalancerAdminStateTaints = &[]string{"example.com/retire=yes"}
			s.Nodes[0].Spec.Taints = []v1.Taint{testutil.Taint("example.com/retire", "yes")}
		}, []string{"want Down (taints example.com/retire)"}},
		{"the admin state off", func(s *Snapshot) {
			s.Config.EnableLoadBalancerAdminState = ptr.To(false)
			s.Nodes[0].Spec.Taints = []v1.Taint{karpenter}
		}, nil},
		{"a drain period configured, none on the pool", func(s *Snapshot) {
			s.Config.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(30)
			lbOf(s).BackendAddressPools[0].Properties.DrainPeriodInSeconds = nil
		}, []string{"pool kubernetes/kubernetes: has drainPeriodInSeconds 0, want 30"}},
		{"none configured (the default), one on the pool", func(s *Snapshot) {
			lbOf(s).BackendAddressPools[0].Properties.DrainPeriodInSeconds = ptr.To[int32](30)
		}, []string{"has drainPeriodInSeconds 30, want 0"}},
		{"a drain period configured and on the pool", func(s *Snapshot) {
			s.Config.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(30)
			lbOf(s).BackendAddressPools[0].Properties.DrainPeriodInSeconds = ptr.To[int32](30)
		}, nil},
		{"drain period off, unset on the pool", func(s *Snapshot) {
			s.Config.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(0)
			lbOf(s).BackendAddressPools[0].Properties.DrainPeriodInSeconds = nil
		}, nil},
		{"a pool no rule uses is not judged for its drain period", func(s *Snapshot) {
			lbOf(s).BackendAddressPools = append(lbOf(s).BackendAddressPools, &armnetwork.BackendAddressPool{Name: ptr.To("kubernetes-IPv6")})
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fixture()
			tt.change(s)
			r := Check(s)
			if len(r.Findings) != len(tt.want) {
				t.Fatalf("%d findings, want %d:\n%s", len(r.Findings), len(tt.want), findings(r))
			}
			for i, w := range tt.want {
				if !strings.Contains(r.Findings[i].String(), w) {
					t.Errorf("finding %d:\n%s\nwant it to contain %q", i, r.Findings[i], w)
				}
			}
		})
	}
}
