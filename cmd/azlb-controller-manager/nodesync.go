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
// app.StartServiceControllerWrapper does, except for what it is shown:
//
//   - the shared node informer through oneNodeKey. The framework's node
//     sync is one pass over every Service with the whole node set whatever
//     node key it dequeues, yet it queues one key per node: the 5,000 node
//     adds of an informer's initial list became 5,000 back-to-back passes,
//     each listing every node again per Service (docs/reliability.md,
//     scale). With one key the workqueue still guarantees a pass that
//     starts after every node event (a key added while it is processed runs
//     again), which is all a pass per node ever gave.
//   - the shared Service informer through classServices: the Services of
//     the class azlb serves (--load-balancer-class) as the framework's own,
//     every other LoadBalancer Service as none of its business (classView).
func startServiceController(flags *azlbFlags) app.InitFuncConstructor {
	return func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			client, err := clientFor(cfg, ic)
			if err != nil {
				return nil, false, err
			}
			if !flags.class.IsDefault() {
				klog.FromContext(ctx).Info("Service controller serves one load-balancer class", "loadBalancerClass", flags.class)
			}
			sc, err := servicecontroller.New(cloud, client, classServices{cfg.SharedInformers.Core().V1().Services(), flags.class},
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
}

// oneNodeKey is a node informer whose event handlers see every node under
// the name nodeSyncKey. Its lister is the shared one, untouched.
type oneNodeKey struct {
	coreinformers.NodeInformer
}

func (n oneNodeKey) Informer() cache.SharedIndexInformer {
	return mappedInformer{n.NodeInformer.Informer(), renamed}
}

// renamed is a shallow copy of the node (or of a tombstone's node) named
// nodeSyncKey: labels, taints, conditions and provider ID (what the
// framework's update filter reads) are the node's own. Handlers do not
// modify informer objects, so sharing the maps and slices is safe. Anything
// else (a tombstone without a node) becomes an empty node of that name,
// which still triggers the pass.
func renamed(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	var out v1.Node
	if n, ok := obj.(*v1.Node); ok && n != nil {
		out = *n
	}
	out.Name = nodeSyncKey
	out.Namespace = ""
	return &out
}

// mappedInformer is an informer whose event handlers see every object
// through fn; its store, indexer and lister are untouched.
type mappedInformer struct {
	cache.SharedIndexInformer
	fn func(any) any
}

func (i mappedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandler(mappedHandler{h, i.fn})
}

func (i mappedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(mappedHandler{h, i.fn}, resync)
}

func (i mappedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, opts cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.SharedIndexInformer.AddEventHandlerWithOptions(mappedHandler{h, i.fn}, opts)
}

// mappedHandler passes each event on with its objects mapped by fn (which
// also receives tombstones, cache.DeletedFinalStateUnknown, on delete).
type mappedHandler struct {
	inner cache.ResourceEventHandler
	fn    func(any) any
}

func (h mappedHandler) OnAdd(obj any, isInInitialList bool) {
	h.inner.OnAdd(h.fn(obj), isInInitialList)
}

func (h mappedHandler) OnUpdate(oldObj, newObj any) {
	h.inner.OnUpdate(h.fn(oldObj), h.fn(newObj))
}

func (h mappedHandler) OnDelete(obj any) {
	h.inner.OnDelete(h.fn(obj))
}
