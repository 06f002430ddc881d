package main

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/localservice"
	"github.com/azlb/azlb/internal/provider"
)

// extensions lists azlb's own controllers, each enabled by azure.json.
func extensions() []provider.Extension {
	return []provider.Extension{startLocalServiceUpdater, startAdminState}
}

// startAdminState runs the admin-state controller unless azure.json sets
// enableLoadBalancerAdminState to false. PreemptScheduled events are read
// through an informer of their own that lists only those events (a field
// selector), not every event of the cluster.
func startAdminState(ctx context.Context, c *provider.Cloud, f informers.SharedInformerFactory, client kubernetes.Interface, rec record.EventRecorder) error {
	log := klog.FromContext(ctx)
	if !c.Config.AdminStateEnabled() {
		log.Info("Admin-state controller disabled by enableLoadBalancerAdminState=false")
		return nil
	}
	mgr, err := adminstate.NewManager(c.Store, adminstate.ManagerOptions{SubscriptionID: c.Config.SubscriptionID,
		Source: "azlb-controller-manager", Policy: backendpool.PolicyFromConfig(c.Config)})
	if err != nil {
		return err
	}
	events := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.AndSelectors(
			fields.OneTermEqualSelector("reason", adminstate.ReasonPreemptScheduled),
			fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		).String()
	}))
	ctrl, err := adminstate.NewController(client, f.Core().V1().Nodes(), events.Core().V1().Events(), mgr, rec, clock.RealClock{})
	if err != nil {
		return err
	}
	events.Start(ctx.Done())
	go func() {
		if err := ctrl.Run(ctx, 1); err != nil {
			log.Error(err, "Admin-state controller stopped")
		}
		events.Shutdown()
	}()
	log.Info("Started the admin-state controller")
	return nil
}

// startLocalServiceUpdater runs the ExternalTrafficPolicy=Local backend pool
// updater in multiple Standard load balancer mode (the only mode with
// dedicated Local pools).
func startLocalServiceUpdater(ctx context.Context, c *provider.Cloud, f informers.SharedInformerFactory, _ kubernetes.Interface, rec record.EventRecorder) error {
	if !c.Config.UseMultipleStandardLoadBalancers() {
		return nil
	}
	u, err := localservice.NewUpdater(localservice.FromConfig(c.Config, localservice.Options{
		Recorder:       rec,
		Store:          c.Store,
		Nodes:          f.Core().V1().Nodes(),
		Services:       f.Core().V1().Services(),
		EndpointSlices: f.Discovery().V1().EndpointSlices(),
		Source:         "azlb-controller-manager",
	}))
	if err != nil {
		return err
	}
	go func() {
		if err := u.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Local service backend pool updater stopped")
		}
	}()
	klog.FromContext(ctx).Info("Started the local service backend pool updater", "interval", u.Interval(), "maxRetries", u.MaxRetries())
	return nil
}
