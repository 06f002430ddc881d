package backendpool_test

import (
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
)

func tainted(taints ...v1.Taint) *v1.Node {
	return node("n", []string{"10.0.0.1"}, func(n *v1.Node) { n.Spec.Taints = taints })
}

func TestOutOfServiceReasons(t *testing.T) {
	autoscaler := v1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1767225600", Effect: v1.TaintEffectNoSchedule}
	karpenter := v1.Taint{Key: "karpenter.sh/disrupted", Effect: v1.TaintEffectNoSchedule}
	own := []config.TaintSelector{{Key: "example.com/retire", Value: "yes"}}
	cases := []struct {
		name   string
		policy backendpool.Policy
		node   *v1.Node
		want   []string
	}{
		{"untainted", backendpool.Policy{}, tainted(), nil},
		{"out-of-service, any value and effect", backendpool.Policy{}, tainted(v1.Taint{Key: backendpool.TaintOutOfService, Value: "x", Effect: v1.TaintEffectNoExecute}), []string{backendpool.TaintOutOfService}},
		{"spot eviction only with its value", backendpool.Policy{}, tainted(v1.Taint{Key: backendpool.TaintDraining, Value: "other", Effect: v1.TaintEffectNoSchedule}), nil},
		{"the autoscaler's taint by default", backendpool.Policy{}, tainted(autoscaler), []string{"ToBeDeletedByClusterAutoscaler"}},
		{"the autoscaler's taint, any effect", backendpool.Policy{}, tainted(v1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoExecute}), []string{"ToBeDeletedByClusterAutoscaler"}},
		{"Karpenter's taint by default", backendpool.Policy{}, tainted(karpenter), []string{"karpenter.sh/disrupted"}},
		{"Karpenter's key with another effect", backendpool.Policy{}, tainted(v1.Taint{Key: "karpenter.sh/disrupted", Effect: v1.TaintEffectPreferNoSchedule}), nil},
		{"the autoscaler's soft taint is not one", backendpool.Policy{}, tainted(v1.Taint{Key: "DeletionCandidateOfClusterAutoscaler", Value: "1", Effect: v1.TaintEffectPreferNoSchedule}), nil},
		{"cordon never", backendpool.Policy{}, tainted(v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}), nil},
		{"none added", backendpool.Policy{Taints: []config.TaintSelector{}}, tainted(autoscaler, karpenter), nil},
		{"built-ins stay with none added", backendpool.Policy{Taints: []config.TaintSelector{}}, tainted(autoscaler, v1.Taint{Key: backendpool.TaintShutdown}), []string{backendpool.TaintShutdown}},
		{"an operator's own", backendpool.Policy{Taints: own}, tainted(v1.Taint{Key: "example.com/retire", Value: "yes", Effect: v1.TaintEffectNoSchedule}, autoscaler), []string{"example.com/retire"}},
		{"an operator's own, other value", backendpool.Policy{Taints: own}, tainted(v1.Taint{Key: "example.com/retire", Value: "no"}), nil},
		{"built-ins first, each key once", backendpool.Policy{}, tainted(karpenter, autoscaler, v1.Taint{Key: backendpool.TaintShutdown}, v1.Taint{Key: backendpool.TaintShutdown, Effect: v1.TaintEffectNoExecute}),
			[]string{backendpool.TaintShutdown, "ToBeDeletedByClusterAutoscaler", "karpenter.sh/disrupted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.policy.OutOfServiceReasons(tc.node)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("reasons %q, want %q", got, tc.want)
			}
			wantState := armnetwork.LoadBalancerBackendAddressAdminStateNone
			if len(tc.want) > 0 {
				wantState = armnetwork.LoadBalancerBackendAddressAdminStateDown
			}
			if s := tc.policy.DesiredState(tc.node); s != wantState {
				t.Errorf("DesiredState %s, want %s", s, wantState)
			}
			p := tc.policy
			p.AdminState = true
			if s := p.State(tc.node); s != wantState {
				t.Errorf("State %s, want %s", s, wantState)
			}
			p.AdminState = false
			if s := p.State(tc.node); s != armnetwork.LoadBalancerBackendAddressAdminStateNone {
				t.Errorf("State with the admin state off %s, want None", s)
			}
		})
	}
	if got := backendpool.OutOfServiceReasons(tainted(autoscaler)); !reflect.DeepEqual(got, []string{"ToBeDeletedByClusterAutoscaler"}) {
		t.Errorf("package-level reasons (the default policy) %q", got)
	}
}

// A node the autoscaler tainted goes Down but leaves pools only at their
// next write (it is no longer eligible, as for the service controller); a
// node Karpenter tainted stays, Down, until it is deleted.
func TestDeletionTaintsMembership(t *testing.T) {
	p := backendpool.Policy{AdminState: true, VNetID: vnet}
	ca := tainted(v1.Taint{Key: "ToBeDeletedByClusterAutoscaler", Value: "1", Effect: v1.TaintEffectNoSchedule})
	karp := node("k", []string{"10.0.0.2"}, func(n *v1.Node) {
		n.Spec.Taints = []v1.Taint{{Key: "karpenter.sh/disrupted", Effect: v1.TaintEffectNoSchedule}}
	})
	if p.Eligible(ca) {
		t.Error("a node the autoscaler is deleting is eligible")
	}
	if !p.Eligible(karp) {
		t.Error("a node Karpenter is disrupting is not eligible")
	}
	got := p.Members([]*v1.Node{ca, karp}, v1.IPv4Protocol)
	want := []backendpool.Member{{Name: "k", IP: "10.0.0.2", AdminState: armnetwork.LoadBalancerBackendAddressAdminStateDown}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("members %+v, want %+v", got, want)
	}
}

func TestPolicyFromConfigTaintsAndDrain(t *testing.T) {
	p := backendpool.PolicyFromConfig(&config.Config{})
	if !reflect.DeepEqual(p.Taints, []config.TaintSelector{{Key: "ToBeDeletedByClusterAutoscaler"}, {Key: "karpenter.sh/disrupted", Effect: "NoSchedule"}}) || p.DrainPeriodInSeconds != 0 {
		t.Errorf("defaults: taints %+v, drain %d", p.Taints, p.DrainPeriodInSeconds)
	}
	p = backendpool.PolicyFromConfig(&config.Config{LoadBalancerAdminStateTaints: &[]string{}, LoadBalancerBackendPoolDrainPeriodInSeconds: ptr.To(0)})
	if p.Taints == nil || len(p.Taints) != 0 || p.DrainPeriodInSeconds != 0 {
		t.Errorf("off: taints %+v, drain %d", p.Taints, p.DrainPeriodInSeconds)
	}
}

func TestSyncSetsTheDrainPeriod(t *testing.T) {
	want := []backendpool.Member{{Name: "a", IP: "10.0.0.1", AdminState: armnetwork.LoadBalancerBackendAddressAdminStateNone}}
	pool := &armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{entry("a", "10.0.0.1", armnetwork.LoadBalancerBackendAddressAdminStateNone, vnet)},
	}}
	p := backendpool.Policy{VNetID: vnet, DrainPeriodInSeconds: 30}
	if d := p.Sync(pool, want); !d.Changed || !d.DrainPeriod || d.Added+d.Removed+d.Updated != 0 {
		t.Fatalf("first sync %+v: the drain period alone must change the pool", d)
	}
	if got := ptr.Deref(pool.Properties.DrainPeriodInSeconds, 0); got != 30 {
		t.Fatalf("drainPeriodInSeconds %d, want 30", got)
	}
	if d := p.Sync(pool, want); d.Changed {
		t.Fatalf("second sync changed %+v", d)
	}
	p.DrainPeriodInSeconds = 0
	if d := p.Sync(pool, want); !d.Changed || pool.Properties.DrainPeriodInSeconds != nil {
		t.Fatalf("drain period 0: %+v, pool %v; want it unset", d, pool.Properties.DrainPeriodInSeconds)
	}
	pool.Properties.DrainPeriodInSeconds = to.Ptr[int32](0) // 0 and unset are the same
	if p.SetDrainPeriod(pool) || p.SetDrainPeriod(nil) {
		t.Error("SetDrainPeriod changed a pool that was right")
	}
	empty := &armnetwork.BackendAddressPool{}
	if !(backendpool.Policy{DrainPeriodInSeconds: 5}).SetDrainPeriod(empty) || *empty.Properties.DrainPeriodInSeconds != 5 {
		t.Error("SetDrainPeriod on a pool without properties")
	}
}
