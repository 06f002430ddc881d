package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
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
	ctx := context.Background()
	public, nodes := testutil.LoopbackNet(t), testutil.LoopbackNet(t)
	// The nodes are the subnet, so the subnet's NSG (where the controller
	// writes the Service's allow rule) governs their flows.
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String()}, nil, devenv.WithNetwork(devenv.NodeNetwork(nodes)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() }) // after the controller stops
	names := []string{"cut-n1", "cut-n2", "cut-n3", "cut-n4"}
	for i, name := range names {
		createNode(t, name, testutil.Nth(nodes, i+1).String(), nil)
	}
	startController(t, "a", writeConfigFor(t, env, nil), false)
	ns := createNamespace(t)
	ingress := testutil.Nth(public, 1) // the range's first public IP
	svc := loadBalancerService(ns, "web", int32(testutil.FreePort(t, ingress)))
	svc.Annotations = map[string]string{annotations.KeyDisableFloatingIP: "true"} // the backend port is the node port
	svc, err = suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Gone before the controller stops (cleanups run last first): a
	// Service left behind with its finalizer would join the next test's
	// load balancer.
	t.Cleanup(func() {
		deleteService(t, ns, "web")
		eventually(t, 60*time.Second, "the Service deleted", func(ctx context.Context) (bool, error) {
			_, err := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
	nodePort := uint16(svc.Spec.Ports[0].NodePort)
	backends := map[string]*testutil.Backend{}
	for i, name := range names {
		backends[name] = testutil.StartBackend(t, name, netip.AddrPortFrom(testutil.Nth(nodes, i+1), nodePort))
	}
	if ip := ingressIP(t, ns, "web"); ip != ingress.String() {
		t.Fatalf("ingress IP %s, want %s", ip, ingress)
	}
	eventually(t, 30*time.Second, "every node probed up in the data plane", func(context.Context) (bool, error) {
		st, _ := env.Emulator().DataPlaneStatus()
		if len(st.Rules) != 1 || len(st.Rules[0].Members) != len(names) {
			return false, nil
		}
		for _, m := range st.Rules[0].Members {
			if !m.Eligible {
				return false, nil
			}
		}
		return true, nil
	})
	frontend := netip.AddrPortFrom(ingress, uint16(svc.Spec.Ports[0].Port))

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
