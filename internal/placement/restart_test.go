package placement

import (
	"fmt"
	"reflect"
	"testing"
)

// cluster simulates the controller's use of Placer and State: rules per load
// balancer are counted from the recorded Services (ports per Service).
type cluster struct {
	p     *Placer
	s     *State
	ports map[string]int // Service key -> rules it adds
}

func (c *cluster) ruleCounts() map[string]int {
	out := map[string]int{}
	for _, name := range c.p.ConfigNames() {
		for _, key := range c.s.Services(name) {
			out[name] += c.ports[key]
		}
	}
	return out
}

func (c *cluster) placeService(t *testing.T, svc ServiceInfo) string {
	t.Helper()
	svc.Current, _ = c.s.ServiceConfig(svc.Key)
	got, err := c.p.PlaceService(svc, c.ruleCounts())
	if err != nil {
		t.Fatalf("PlaceService(%s): %v", svc.Key, err)
	}
	c.s.MoveService(svc.Key, got)
	return got
}

func (c *cluster) placeNode(t *testing.T, n NodeInfo) string {
	t.Helper()
	n.Current, _ = c.s.NodeConfig(n.Name)
	got, err := c.p.PlaceNode(n, c.s.NodeCounts())
	if err != nil {
		t.Fatalf("PlaceNode(%s): %v", n.Name, err)
	}
	c.s.MoveNode(n.Name, got)
	return got
}

func restartFixture(t *testing.T) (*Placer, []ServiceInfo, []NodeInfo, map[string]int) {
	p := mustNew(t, []cfg{
		{Name: "kubernetes"},
		{Name: "lb-2", ServiceNamespaceSelector: matchLabels("team", "a")},
		{Name: "lb-3", NodeSelector: matchLabels("zone", "1")},
		{Name: "lb-4", PrimaryVMSet: "gpu"},
		{Name: "lb-5"},
	}, "kubernetes")
	var svcs []ServiceInfo
	ports := map[string]int{}
	for i := range 40 {
		team := []string{"a", "b"}[i%2]
		key := fmt.Sprintf("team-%s/svc-%02d", team, i)
		svcs = append(svcs, ServiceInfo{Key: key, NamespaceLabels: map[string]string{"team": team}})
		ports[key] = 1 + i%3
	}
	var nodes []NodeInfo
	for i := range 30 {
		n := NodeInfo{Name: fmt.Sprintf("node-%02d", i), Labels: map[string]string{}}
		switch i % 3 {
		case 0:
			n.Labels["zone"] = "1"
		case 1:
			n.VMSet = "gpu"
		}
		nodes = append(nodes, n)
	}
	return p, svcs, nodes, ports
}

// TestRestartMovesNothing places everything, rebuilds a fresh State from
// the observed memberships (as after a controller restart) and places
// everything again: no Service and no node may move.
func TestRestartMovesNothing(t *testing.T) {
	p, svcs, nodes, ports := restartFixture(t)
	before := &cluster{p: p, s: NewState(), ports: ports}
	svcAt := map[string]string{}
	nodeAt := map[string]string{}
	for _, s := range svcs {
		svcAt[s.Key] = before.placeService(t, s)
	}
	for _, n := range nodes {
		nodeAt[n.Name] = before.placeNode(t, n)
	}

	// Sanity: placement actually spread things out, so "nothing moved" is
	// not trivially true.
	if len(before.s.ServiceCounts()) < 3 || len(before.s.NodeCounts()) < 3 {
		t.Fatalf("fixture did not spread: services %v nodes %v", before.s.ServiceCounts(), before.s.NodeCounts())
	}

	observedSvcs := map[string][]string{}
	observedNodes := map[string][]string{}
	for _, name := range p.ConfigNames() {
		observedSvcs[name] = before.s.Services(name)
		observedNodes[name] = before.s.Nodes(name)
	}
	after := &cluster{p: p, s: NewState(), ports: ports}
	if c := after.s.Rebuild(observedSvcs, observedNodes); len(c) != 0 {
		t.Fatalf("Rebuild conflicts: %v", c)
	}
	// Replay in reverse order so that sequence does not hide a move.
	for i := len(svcs) - 1; i >= 0; i-- {
		if got := after.placeService(t, svcs[i]); got != svcAt[svcs[i].Key] {
			t.Errorf("Service %s moved from %s to %s after restart", svcs[i].Key, svcAt[svcs[i].Key], got)
		}
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		if got := after.placeNode(t, nodes[i]); got != nodeAt[nodes[i].Name] {
			t.Errorf("node %s moved from %s to %s after restart", nodes[i].Name, nodeAt[nodes[i].Name], got)
		}
	}
	if !reflect.DeepEqual(before.s.ServiceCounts(), after.s.ServiceCounts()) || !reflect.DeepEqual(before.s.NodeCounts(), after.s.NodeCounts()) {
		t.Errorf("counts changed across restart")
	}
}

// TestInitialPlacementDeterministic places the same objects twice from
// scratch and expects identical, balanced results.
func TestInitialPlacementDeterministic(t *testing.T) {
	run := func() (map[string]string, map[string]string, map[string]int) {
		p, svcs, nodes, ports := restartFixture(t)
		c := &cluster{p: p, s: NewState(), ports: ports}
		sa, na := map[string]string{}, map[string]string{}
		for _, s := range svcs {
			sa[s.Key] = c.placeService(t, s)
		}
		for _, n := range nodes {
			na[n.Name] = c.placeNode(t, n)
		}
		return sa, na, c.s.NodeCounts()
	}
	s1, n1, counts := run()
	for range 5 {
		s2, n2, _ := run()
		if !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(n1, n2) {
			t.Fatalf("placement differs between identical runs")
		}
	}
	// 10 nodes in zone 1 -> lb-3 only; 10 gpu -> lb-4; 10 others split
	// between the selector-less kubernetes, lb-2, lb-5 (lb-4 has no
	// selector but its VM set is not theirs: it is still a target).
	want := map[string]int{"lb-3": 10}
	if counts["lb-3"] != want["lb-3"] {
		t.Errorf("lb-3 nodes = %d, want 10", counts["lb-3"])
	}
	rest := counts["kubernetes"] + counts["lb-2"] + counts["lb-5"] + counts["lb-4"] - 10
	if rest != 10 {
		t.Errorf("selector-less LBs got %d non-gpu nodes, want 10 (counts %v)", rest, counts)
	}
	// All team-a Services may use lb-2; team-b Services may not.
	for key, lb := range s1 {
		if lb == "lb-2" && key[:6] != "team-a" {
			t.Errorf("Service %s placed on lb-2 against its namespace selector", key)
		}
	}
}
