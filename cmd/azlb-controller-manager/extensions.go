package main

import (
	"context"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/localservice"
	"github.com/azlb/azlb/internal/provider"
)

// extensions lists azlb's own controllers, each enabled by azure.json.
func extensions() []provider.Extension {
	return []provider.Extension{startLocalServiceUpdater}
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
		Lock:           c.Lock(),
		Pools:          c.Provider,
		Nodes:          f.Core().V1().Nodes(),
		Services:       f.Core().V1().Services(),
		EndpointSlices: f.Discovery().V1().EndpointSlices(),
		Source:         "azlb-controller-manager",
	}))
	if err != nil {
		return err
	}
	c.SetLocalServices(u)
	go func() {
		if err := u.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Local service backend pool updater stopped")
		}
	}()
	klog.FromContext(ctx).Info("Started the local service backend pool updater", "interval", u.Interval(), "maxRetries", u.MaxRetries())
	return nil
}
