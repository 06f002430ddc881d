package provider

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// A node whose labels now match another configuration's nodeSelector moves
// to that load balancer's cluster pool when SyncClusterPools runs (the
// node-label controller's call), and a node sync that listed the nodes
// before the relabel does not move it back. Nothing is written once the
// pools are right.
func TestRelabelledNodeMovesBetweenLoadBalancers(t *testing.T) {
	h := newHarness(t, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{
			{Name: "kubernetes", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}},
			{Name: "lb-2", NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "b"}}},
		}
	})
	ctx := context.Background()
	n1 := testutil.Node("n1", testutil.InternalIPs("10.240.0.4"), testutil.Labels("pool", "a"))
	n2 := testutil.Node("n2", testutil.InternalIPs("10.240.0.5"), testutil.Labels("pool", "b"))
	idx := h.useNodes(t, n1, n2)
	listed := []*v1.Node{n1, n2} // the service controller's list, from before the relabel
	// Two Services: one per load balancer (fewest Services wins).
	web := testService("web", "c1c1c1c1-0000-0000-0000-000000000041", nil, 80)
	api := testService("api", "c2c2c2c2-0000-0000-0000-000000000042", nil, 8080)
	for _, s := range []*v1.Service{web, api} {
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, listed); err != nil {
			t.Fatal(err)
		}
	}
	clusterPool := names.ClusterPool("kubernetes", v1.IPv4Protocol)
	members := func(lb string) []string {
		t.Helper()
		got := poolNames(findPool(h.lb(t, lb), clusterPool))
		slices.Sort(got)
		return got
	}
	if a, b := members("kubernetes"), members("lb-2"); !slices.Equal(a, []string{"n1"}) || !slices.Equal(b, []string{"n2"}) {
		t.Fatalf("setup: kubernetes %v, lb-2 %v, want [n1] and [n2]", a, b)
	}

	// Nothing changed: a sync writes nothing.
	h.env.Emulator().ResetRequests()
	if err := h.p.SyncClusterPools(ctx); err != nil {
		t.Fatal(err)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d writes from a sync with no label change, want 0", w)
	}

	relabelled := n1.DeepCopy()
	relabelled.Labels["pool"] = "b"
	if err := idx.Update(relabelled); err != nil {
		t.Fatal(err)
	}
	if err := h.p.SyncClusterPools(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := members("kubernetes"), members("lb-2"); len(a) != 0 || !slices.Equal(b, []string{"n1", "n2"}) {
		t.Errorf("after n1's relabel: kubernetes %v, lb-2 %v, want [] and [n1 n2]", a, b)
	}

	// The framework's node sync, with the nodes it listed before the
	// relabel, leaves n1 where its labels put it now.
	h.env.Emulator().ResetRequests()
	for _, s := range []*v1.Service{web, api} {
		if err := h.p.UpdateLoadBalancer(ctx, "kubernetes", s, listed); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := members("kubernetes"), members("lb-2"); len(a) != 0 || !slices.Equal(b, []string{"n1", "n2"}) {
		t.Errorf("after a node sync with pre-relabel nodes: kubernetes %v, lb-2 %v, want [] and [n1 n2]", a, b)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d writes from the stale node sync, want 0", w)
	}
}

// In single load balancer mode a node that gains the control-plane label
// leaves the cluster pool (control-plane nodes are excluded by default).
func TestNodeLabelledControlPlaneLeavesThePool(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	n1 := testutil.Node("n1", testutil.InternalIPs("10.240.0.4"))
	n2 := testutil.Node("n2", testutil.InternalIPs("10.240.0.5"))
	idx := h.useNodes(t, n1, n2)
	svc := testService("web", "c3c3c3c3-0000-0000-0000-000000000043", nil, 80)
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{n1, n2}); err != nil {
		t.Fatal(err)
	}
	cp := n2.DeepCopy()
	cp.Labels["node-role.kubernetes.io/control-plane"] = ""
	if err := idx.Update(cp); err != nil {
		t.Fatal(err)
	}
	if err := h.p.SyncClusterPools(ctx); err != nil {
		t.Fatal(err)
	}
	got := poolNames(findPool(h.lb(t, "kubernetes"), names.ClusterPool("kubernetes", v1.IPv4Protocol)))
	if !slices.Equal(got, []string{"n1"}) {
		t.Errorf("cluster pool %v after n2 became a control-plane node, want [n1]", got)
	}
}

// useNodes gives the provider a node lister holding the nodes and returns
// its indexer (for relabels).
func (h *harness) useNodes(t *testing.T, nodes ...*v1.Node) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range nodes {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	h.p.nodes = corelisters.NewNodeLister(idx)
	return idx
}
