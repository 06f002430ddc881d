package nodeagent

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// PodTerminator is the part of the simulated nodes' kubelets that ends
// pods: a pod on one of its nodes that is being deleted (deletionTimestamp
// set) is deleted again with a grace period of 0, as a kubelet does once
// the pod's containers have stopped. Without it `kubectl delete pod` of a
// sandbox pod waits for ever: the API server keeps a pod with a grace
// period until its kubelet confirms. Finalizers still hold the pod until
// their owners remove them.
type PodTerminator struct {
	cs    kubernetes.Interface
	pods  coreinformers.PodInformer
	nodes sets.Set[string]
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

// NewPodTerminator watches pods through informer (which the caller starts)
// for the named nodes.
func NewPodTerminator(cs kubernetes.Interface, informer coreinformers.PodInformer, nodes []string) (*PodTerminator, error) {
	t := &PodTerminator{cs: cs, pods: informer, nodes: sets.New(nodes...),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "simulated-kubelet-pods"})}
	enqueue := func(obj any) {
		if p, ok := obj.(*v1.Pod); ok && p.DeletionTimestamp != nil && t.nodes.Has(p.Spec.NodeName) {
			t.queue.Add(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	return t, err
}

// Run ends pods until ctx ends.
func (t *PodTerminator) Run(ctx context.Context) {
	defer t.queue.ShutDown()
	go func() {
		<-ctx.Done()
		t.queue.ShutDown()
	}()
	for t.next(ctx) {
	}
}

func (t *PodTerminator) next(ctx context.Context) bool {
	key, quit := t.queue.Get()
	if quit {
		return false
	}
	defer t.queue.Done(key)
	if err := t.end(ctx, key); err != nil {
		klog.FromContext(ctx).Error(err, "Simulated kubelet could not end the pod; retrying", "pod", key)
		t.queue.AddRateLimited(key)
		return true
	}
	t.queue.Forget(key)
	return true
}

// end confirms the deletion of a terminating pod.
func (t *PodTerminator) end(ctx context.Context, key types.NamespacedName) error {
	p, err := t.pods.Lister().Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.DeletionTimestamp == nil || (p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0) {
		return nil // not terminating, or confirmed already
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = t.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(p.UID)},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or another pod of that name
	}
	if err != nil {
		return fmt.Errorf("delete pod %s with grace period 0: %w", key, err)
	}
	klog.FromContext(ctx).V(2).Info("Simulated kubelet confirmed the pod's termination", "pod", key, "node", p.Spec.NodeName)
	return nil
}
