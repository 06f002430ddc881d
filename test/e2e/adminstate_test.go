package e2e

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// adminState returns the admin state of a node's entry in a pool ("" when
// the node is not in it).
func adminState(t *testing.T, lb, pool, node string) string {
	t.Helper()
	l := getLB(t, lb)
	if l == nil || l.Properties == nil {
		return ""
	}
	for _, p := range l.Properties.BackendAddressPools {
		if p.Name == nil || *p.Name != pool || p.Properties == nil {
			continue
		}
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			if a.Name != nil && *a.Name == node {
				if a.Properties == nil || a.Properties.AdminState == nil || *a.Properties.AdminState == "" {
					return "None"
				}
				return string(*a.Properties.AdminState)
			}
		}
	}
	return ""
}

func setTaints(t *testing.T, node string, taints ...v1.Taint) {
	t.Helper()
	ctx := context.Background()
	n, err := suite.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	if _, err := suite.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestAdminStateFollowsTaints(t *testing.T) {
	ctx := context.Background()
	createNode(t, "adm-n1", "10.240.5.1", nil)
	createNode(t, "adm-n2", "10.240.5.2", nil)
	startController(t, "a", writeConfig(t, nil), false)
	ns := createNamespace(t)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "web")
	wantState := func(node, want string) {
		t.Helper()
		eventually(t, 30*time.Second, node+" AdminState "+want, func(context.Context) (bool, error) {
			return adminState(t, lbName, lbName, node) == want, nil
		})
	}
	wantState("adm-n1", "None")

	// Cordon-like signals are ignored: no write, still None.
	setTaints(t, "adm-n1", v1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule})

	setTaints(t, "adm-n1", v1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute})
	wantState("adm-n1", "Down")
	if got := adminState(t, lbName, lbName, "adm-n2"); got != "None" {
		t.Fatalf("the untainted node is %s", got)
	}
	eventually(t, 30*time.Second, "a LoadBalancerAdminStateDown event", func(ctx context.Context) (bool, error) {
		evs, err := suite.cs.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "LoadBalancerAdminStateDown" && e.InvolvedObject.Name == "adm-n1" {
				return true, nil
			}
		}
		return false, nil
	})

	setTaints(t, "adm-n1")
	wantState("adm-n1", "None")
	// Leave nothing behind: a later test's controller (with another
	// configuration) would otherwise finish this Service's deletion.
	deleteService(t, ns, "web")
	eventually(t, 30*time.Second, "load balancer deleted", func(context.Context) (bool, error) {
		return getLB(t, lbName) == nil, nil
	})
}
