package nodeagent

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	cloudproviderapi "k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePower is a settable power source.
type fakePower struct {
	mu    sync.Mutex
	state string
	found bool
}

func (p *fakePower) set(state string, found bool) {
	p.mu.Lock()
	p.state, p.found = state, found
	p.mu.Unlock()
}

func (p *fakePower) PowerState(context.Context, string) (string, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.found, nil
}

func writes(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() != "get" {
			n++
		}
	}
	return n
}

func TestAgentReadyFollowsThePowerState(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	power := &fakePower{state: "running", found: true}
	clk := clocktesting.NewFakeClock(time.Now())
	a, err := New(Node{Name: "aks-nic-000000", ProviderID: "azure:///x", IPs: []string{"10.240.0.4"}, Labels: map[string]string{"pool": "nic"}},
		Options{Client: cs, Power: power, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ready := func() v1.ConditionStatus {
		t.Helper()
		n, err := cs.CoreV1().Nodes().Get(ctx, "aks-nic-000000", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return readyCondition(n).Status
	}
	if err := a.Step(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "aks-nic-000000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID != "" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != cloudproviderapi.TaintExternalCloudProvider ||
		n.Labels["pool"] != "nic" || n.Status.Addresses[0].Address != "10.240.0.4" || readyCondition(n).Status != v1.ConditionTrue {
		t.Fatalf("registered node: %+v", n)
	}
	before := writes(cs)
	if err := a.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if writes(cs) != before {
		t.Fatal("an unchanged power state wrote the node")
	}
	power.set("deallocating", true)
	if err := a.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ready(); got != v1.ConditionFalse {
		t.Fatalf("deallocating VM: Ready %s", got)
	}
	power.set("running", true)
	if err := a.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ready(); got != v1.ConditionTrue {
		t.Fatalf("started VM: Ready %s", got)
	}

	// A node whose VM is gone is not registered again.
	if err := cs.CoreV1().Nodes().Delete(ctx, "aks-nic-000000", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	power.set("", false)
	if err := a.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "aks-nic-000000", metav1.GetOptions{}); err == nil {
		t.Fatal("a node without a VM was registered")
	}
}

func TestRunAllStopsWithTheContext(t *testing.T) {
	cs := fake.NewClientset()
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- RunAll(ctx, []Node{{Name: "a", ProviderID: "p"}, {Name: "b", ProviderID: "q"}},
			Options{Client: cs, Power: &fakePower{state: "running", found: true}, Clock: clk})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); l != nil && len(l.Items) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("agents did not register their nodes")
		}
		clk.Step(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
