package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// recorder queues each node event's key the way the framework's service
// controller does (DeletionHandlingMetaNamespaceKeyFunc into a workqueue),
// and keeps the labels it saw.
type recorder struct {
	queue  workqueue.TypedInterface[string]
	mu     sync.Mutex
	labels map[string]int
}

func (r *recorder) seen(pool string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.labels[pool]
}

func (r *recorder) add(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		panic(err)
	}
	r.queue.Add(key)
	if n, ok := obj.(*v1.Node); ok {
		r.mu.Lock()
		r.labels[n.Labels["pool"]]++
		r.mu.Unlock()
	}
}

// TestServiceControllerSeesOneNodeKey: 200 nodes in the informer's initial
// list, then an update and a delete, reach the service controller's node
// queue as one key (one node-sync pass, not 200), and the handler still
// sees each node's own labels.
func TestServiceControllerSeesOneNodeKey(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	for i := range 200 {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%03d", i),
			Labels: map[string]string{"pool": fmt.Sprintf("p%d", i%2)}}}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	nodes := oneNodeKey{factory.Core().V1().Nodes()}
	rec := &recorder{queue: workqueue.NewTyped[string](), labels: map[string]int{}}
	defer rec.queue.ShutDown()
	reg, err := nodes.Informer().AddEventHandlerWithResyncPeriod(cache.ResourceEventHandlerFuncs{
		AddFunc:    rec.add,
		UpdateFunc: func(_, cur any) { rec.add(cur) },
		DeleteFunc: rec.add,
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers to stop
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("handler never synced")
	}
	if got := rec.queue.Len(); got != 1 {
		t.Fatalf("node queue holds %d keys after 200 adds, want 1", got)
	}
	if rec.seen("p0") != 100 || rec.seen("p1") != 100 {
		t.Fatalf("labels seen: p0 %d, p1 %d, want each node's own (100 each)", rec.seen("p0"), rec.seen("p1"))
	}
	key, _ := rec.queue.Get()
	if key != nodeSyncKey {
		t.Fatalf("key %q, want %q", key, nodeSyncKey)
	}
	// The key is being processed: a later event queues it again, once.
	n, err := client.CoreV1().Nodes().Get(ctx, "n000", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["pool"] = "p9"
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "n001", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return rec.seen("p9") == 1 && rec.seen("p1") == 101, nil
	})
	if err != nil {
		t.Fatalf("update and delete not seen: p9 %d, p1 %d", rec.seen("p9"), rec.seen("p1"))
	}
	rec.queue.Done(key)
	if got := rec.queue.Len(); got != 1 {
		t.Fatalf("node queue holds %d keys after the update and delete, want 1", got)
	}
}

// TestRenamedTombstone: a delete whose final state is unknown still
// reaches the handler as the one key, with the node's labels.
func TestRenamedTombstone(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone", Labels: map[string]string{"pool": "p1"}}}
	rec := &recorder{queue: workqueue.NewTyped[string](), labels: map[string]int{}}
	defer rec.queue.ShutDown()
	h := mappedHandler{cache.ResourceEventHandlerFuncs{DeleteFunc: rec.add}, renamed}
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "gone", Obj: n})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "other"})
	if rec.queue.Len() != 1 || rec.seen("p1") != 1 {
		t.Fatalf("queue %d keys, p1 seen %d; want 1 key and the node's labels", rec.queue.Len(), rec.seen("p1"))
	}
	if n.Name != "gone" {
		t.Fatalf("the informer's node was renamed to %q", n.Name)
	}
}
