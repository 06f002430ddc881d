package nodelabels

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/workqueue"

	"github.com/azlb/azlb/internal/testutil"
)

// countingSyncer counts syncs and fails the first failures of them.
type countingSyncer struct {
	mu       sync.Mutex
	calls    int
	failures int
}

func (s *countingSyncer) SyncClusterPools(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return errors.New("injected failure")
	}
	return nil
}

func (s *countingSyncer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func TestOnNodeUpdateEnqueuesOnlyLabelChanges(t *testing.T) {
	base := testutil.Node("n1", testutil.Labels("pool", "a"), testutil.InternalIPs("10.0.0.4"))
	relabelled := base.DeepCopy()
	relabelled.Labels["pool"] = "b"
	labelAdded := base.DeepCopy()
	labelAdded.Labels["kubernetes.azure.com/agentpool"] = "np2"
	labelRemoved := base.DeepCopy()
	delete(labelRemoved.Labels, "pool")
	replaced := base.DeepCopy()
	replaced.UID = "uid-n1-again"
	heartbeat := base.DeepCopy()
	heartbeat.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
	tainted := base.DeepCopy()
	tainted.Spec.Taints = []v1.Taint{testutil.Taint("node.kubernetes.io/out-of-service", "nodeshutdown")}
	for _, tc := range []struct {
		name     string
		old, new any
		want     int
	}{
		{"label value changed", base, relabelled, 1},
		{"label added", base, labelAdded, 1},
		{"label removed", base, labelRemoved, 1},
		{"node replaced under its name", base, replaced, 1},
		{"status heartbeat", base, heartbeat, 0},
		{"taint (the admin-state controller's)", base, tainted, 0},
		{"resync of the same object", base, base, 0},
		{"not a node", "x", relabelled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestController(t, &countingSyncer{}, nil)
			c.onNodeUpdate(tc.old, tc.new)
			if got := c.queue.Len(); got != tc.want {
				t.Errorf("queue length %d after the update, want %d", got, tc.want)
			}
		})
	}
}

func TestBurstOfRelabelsIsOneSync(t *testing.T) {
	c := newTestController(t, &countingSyncer{}, nil)
	a := testutil.Node("a")
	for i := range 5 {
		b := a.DeepCopy()
		b.Labels["pool"] = string(rune('a' + i))
		c.onNodeUpdate(a, b)
	}
	if got := c.queue.Len(); got != 1 {
		t.Errorf("queue length %d after 5 relabels, want 1", got)
	}
}

// TestRelabelSyncsAndRetries runs the controller on an informer: a label
// change reaches the syncer, and a failing sync is retried until it works.
func TestRelabelSyncsAndRetries(t *testing.T) {
	client := fake.NewClientset(testutil.Node("n1", testutil.Labels("pool", "a")))
	factory := informers.NewSharedInformerFactory(client, 0)
	syncer := &countingSyncer{failures: 2}
	c, err := NewController(factory.Core().V1().Nodes(), syncer,
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	factory.Start(ctx.Done())
	go func() { done <- c.Run(ctx, 1) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		factory.Shutdown()
	})
	testutil.Poll(t, 10*time.Second, "the informer to sync", func() bool {
		return factory.Core().V1().Nodes().Informer().HasSynced()
	})
	if n := syncer.count(); n != 0 {
		t.Fatalf("%d syncs before any relabel (additions are the service controller's), want 0", n)
	}
	n1, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1.Labels["pool"] = "b"
	if _, err := client.CoreV1().Nodes().Update(ctx, n1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two failures, then the third attempt succeeds and the key is forgotten.
	testutil.Poll(t, 10*time.Second, "the sync to succeed after two failures", func() bool { return syncer.count() == 3 })
	testutil.Poll(t, 10*time.Second, "the key to be forgotten", func() bool { return c.queue.NumRequeues(SyncKey) == 0 })
}

func TestNewControllerRequiresCollaborators(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	if _, err := NewController(nil, &countingSyncer{}, nil); err == nil {
		t.Error("NewController without nodes: no error")
	}
	if _, err := NewController(factory.Core().V1().Nodes(), nil, nil); err == nil {
		t.Error("NewController without a syncer: no error")
	}
}

func newTestController(t *testing.T, s Syncer, limiter workqueue.TypedRateLimiter[string]) *Controller {
	t.Helper()
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	c, err := NewController(factory.Core().V1().Nodes(), s, limiter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	return c
}
