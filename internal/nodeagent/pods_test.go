package nodeagent

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// A terminating pod on one of the agent's nodes is deleted again with a
// grace period of 0 (the kubelet's confirmation); a terminating pod of
// another node, a running pod and one confirmed already are left alone.
func TestPodTerminatorConfirmsTheEndOfDeletedPods(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, deleting bool, grace int64) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, UID: "uid-" + "name"}, Spec: v1.PodSpec{NodeName: node}}
		if deleting {
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, ptr.To(grace)
			p.Finalizers = []string{"example.com/held"}
		}
		return p
	}
	cs := fake.NewClientset(
		pod("ours", "n1", true, 30),
		pod("elsewhere", "n9", true, 30),
		pod("running", "n1", false, 0),
		pod("confirmed", "n2", true, 0),
	)
	factory := informers.NewSharedInformerFactory(cs, 0)
	term, err := NewPodTerminator(cs, factory.Core().V1().Pods(), []string{"n1", "n2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() { term.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	deletes := func() map[string]int64 {
		out := map[string]int64{}
		for _, a := range cs.Actions() {
			if d, ok := a.(k8stesting.DeleteActionImpl); ok && d.GetResource().Resource == "pods" {
				out[d.GetName()] = ptr.Deref(d.DeleteOptions.GracePeriodSeconds, -1)
			}
		}
		return out
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, ok := deletes()["ours"]
		return ok, nil
	})
	if err != nil {
		t.Fatalf("the terminating pod on n1 was not confirmed: actions %v", cs.Actions())
	}
	got := deletes()
	if got["ours"] != 0 {
		t.Errorf("delete of pod ours with grace period %d, want 0", got["ours"])
	}
	for _, other := range []string{"elsewhere", "running", "confirmed"} {
		if _, ok := got[other]; ok {
			t.Errorf("pod %s was deleted: %v", other, got)
		}
	}
}
