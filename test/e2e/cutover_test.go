package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/testutil"
)

// TestTrafficCutover measures the admin-state promise end to end: the real
// controller, a real API server, and the emulator's data plane carrying
// 200 new connections per second to a Service on four loopback nodes while
// one node leaves service, in the three scenarios of docs/admin-state.md:
// (a) the node stops with no taint: only the load balancer's probes (5 s x
// 2) notice, and new connections fail for seconds; (b) the out-of-service
// taint, then the stop 1 s later: no new connection fails, and a connection
// established before the taint keeps working; (c) taint and stop at once:
// failures only for the few tens of milliseconds the cutover takes.
func TestTrafficCutover(t *testing.T) {
	cluster := startDataPlaneClusterWith(t, "cut", 4, clusterOptions{})
	names := cluster.nodes
	frontend, backends := cluster.nodePortWeb(t)

	// b and c first: each leaves the node Down and stopped, which the
	// next scenario does not mind.
	reports := map[string]testutil.CutoverReport{}
	for i, sc := range []testutil.CutoverScenario{testutil.CutoverScenarios[1], testutil.CutoverScenarios[2], testutil.CutoverScenarios[0]} {
		node := names[i]
		rep := testutil.RunCutover(t, sc, testutil.Cutover{Frontend: frontend, Node: node, Stop: backends[node].Stop,
			Taint: func(ctx context.Context) error { return taintOutOfService(ctx, node) }})
		t.Log(rep)
		t.Logf("timeline (100 ms per character; # %s, x failed, . other nodes, | event, S stop):\n%s", node, rep.Timeline(node, 100*time.Millisecond))
		reports[sc.Name] = rep
	}
	a, b, c := reports["a-stop-probe-only"], reports["b-taint-then-stop-1s"], reports["c-taint-and-stop"]
	if b.Failed != 0 {
		t.Errorf("(b) %d new connections failed, want none", b.Failed)
	}
	if b.EstablishedSurvived == nil || !*b.EstablishedSurvived {
		t.Error("(b) the connection established before the taint did not survive until the node stopped")
	}
	if b.Window >= time.Second {
		t.Errorf("(b) new connections reached the node for %v after the taint, until it stopped", b.Window)
	}
	// Probes fail from the stop on; the second failure (5 s apart) takes
	// the node out: between 5 and 10 s.
	if a.Failed == 0 || a.Window < 4*time.Second {
		t.Errorf("(a) %d failed for %v: the probe-only path should fail new connections for seconds", a.Failed, a.Window)
	}
	if c.Window >= a.Window || c.Failed >= a.Failed {
		t.Errorf("(c) %d failed for %v, not better than the probe-only %d for %v", c.Failed, c.Window, a.Failed, a.Window)
	}
}

func taintOutOfService(ctx context.Context, node string) error {
	return addTaint(ctx, node, v1.Taint{Key: backendpool.TaintOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute})
}

// addTaint adds a taint to the node (one read and one update).
func addTaint(ctx context.Context, node string, tn v1.Taint) error {
	n, err := suite.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = append(n.Spec.Taints, tn)
	if _, err := suite.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("taint %s: %w", node, err)
	}
	return nil
}
