package main

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/utils/clock"
)

// run runs the framework's cloud node controller for one node until ctx
// ends: its informer lists and watches only that node (field selector
// metadata.name), so the controller initializes and refreshes nothing
// else, and cloud answers only for that node.
//
// Beside it a labelKeeper refreshes the node's instance-type and topology
// labels every statusFrequency.
func run(ctx context.Context, cs kubernetes.Interface, nodeName string, cloud cloudprovider.Interface, statusFrequency time.Duration, clk clock.WithTicker) error {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, nodeName).String()
	}))
	defer factory.Shutdown()
	cnc, err := nodecontroller.NewCloudNodeController(factory.Core().V1().Nodes(), cs, cloud, statusFrequency, 1, 1)
	if err != nil {
		return err
	}
	instances, _ := cloud.InstancesV2()
	keeper := &labelKeeper{cs: cs, nodes: factory.Core().V1().Nodes().Lister(), nodeName: nodeName, instances: instances, clock: clk, every: statusFrequency}
	factory.Start(ctx.Done())
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { keeper.run(ctx) })
	cnc.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("azlb-node-manager"))
	return nil
}
