package main

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"
)

// nodeSyncKey is the one node-queue key the service controller is handed.
const nodeSyncKey = "azlb-node-set"

// startServiceController runs the framework's service controller as
// app.StartServiceControllerWrapper does, except that it sees the shared
// node informer through oneNodeKey. The framework's node sync is one pass
// over every Service with the whole node set whatever node key it
// dequeues, yet it queues one key per node: the 5,000 node adds of an
// informer's initial list became 5,000 back-to-back passes, each listing
// every node again per Service (docs/reliability.md, scale). With one key
// the workqueue still guarantees a pass that starts after every node event
// (a key added while it is processed runs again), which is all a pass per
// node ever gave.
func startServiceController(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		client, err := clientFor(cfg, ic)
		if err != nil {
			return nil, false, err
		}
		sc, err := servicecontroller.New(cloud, client, cfg.SharedInformers.Core().V1().Services(),
			oneNodeKey{cfg.SharedInformers.Core().V1().Nodes()}, cfg.ComponentConfig.KubeCloudShared.ClusterName,
			utilfeature.DefaultFeatureGate)
		if err != nil {
			// As the framework's: a cloud without load balancers runs no service controller.
			klog.FromContext(ctx).Error(err, "Service controller not started")
			return nil, false, nil
		}
		go sc.Run(ctx, int(cfg.ComponentConfig.ServiceController.ConcurrentServiceSyncs), cc.ControllerManagerMetrics)
		return nil, true, nil
	}
}

// oneNodeKey is a node informer whose event handlers see every node under
// the name nodeSyncKey. Its lister is the shared one, untouched.
type oneNodeKey struct {
	coreinformers.NodeInformer
}

func (n oneNodeKey) Informer() cache.SharedIndexInformer {
	return oneKeyInformer{n.NodeInformer.Informer()}
}

type oneKeyInformer struct {
	cache.SharedIndexInformer
}

func (i oneKeyInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(oneKeyHandler{h})
}

func (i oneKeyInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(oneKeyHandler{h}, resync)
}

func (i oneKeyInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(oneKeyHandler{h}, opts)
}

// oneKeyHandler passes each event on with shallow copies of the nodes
// renamed to nodeSyncKey: labels, taints, conditions and provider ID (what
// the framework's update filter reads) are the node's own. Handlers do not
// modify informer objects, so sharing the maps and slices is safe.
type oneKeyHandler struct {
	inner cache.ResourceEventHandler
}

func (h oneKeyHandler) OnAdd(obj any, isInInitialList bool) {
	h.inner.OnAdd(renamed(obj), isInInitialList)
}

func (h oneKeyHandler) OnUpdate(oldObj, newObj any) {
	h.inner.OnUpdate(renamed(oldObj), renamed(newObj))
}

func (h oneKeyHandler) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	h.inner.OnDelete(renamed(obj))
}

// renamed is a shallow copy of the node named nodeSyncKey; anything else
// (a tombstone without a node) becomes an empty node of that name, which
// still triggers the pass.
func renamed(obj any) *v1.Node {
	var out v1.Node
	if n, ok := obj.(*v1.Node); ok && n != nil {
		out = *n
	}
	out.Name = nodeSyncKey
	out.Namespace = ""
	return &out
}
