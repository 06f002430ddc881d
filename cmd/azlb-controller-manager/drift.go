package main

import (
	"context"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/drift"
	"github.com/azlb/azlb/internal/provider"
)

// startDrift runs the drift pass (internal/drift) every
// driftRepairIntervalInSeconds on the leader, for the Services of azlb's
// load-balancer class, with its own identity (events only). Not with
// pod-based load balancing.
func startDrift(flags *azlbFlags) app.InitFuncConstructor {
	return func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			az, err := azureCloud(cloud)
			if err != nil {
				return nil, false, err
			}
			if az.Config.PodIPMode() || az.Config.DriftRepairInterval() == 0 {
				klog.FromContext(ctx).Info("Drift pass off: driftRepairIntervalInSeconds is 0, or pod-based load balancing")
				return nil, false, nil
			}
			client, err := clientFor(cfg, ic)
			if err != nil {
				return nil, false, err
			}
			f := cfg.SharedInformers
			c, err := drift.New(drift.Options{
				Interval: az.Config.DriftRepairInterval(),
				Repairer: az.Provider,
				Services: f.Core().V1().Services().Lister(),
				Nodes:    f.Core().V1().Nodes().Lister(),
				Serves:   flags.class.Owns,
				Recorder: provider.NewRecorder(ctx, client, "azlb-drift-controller"),
			})
			if err != nil {
				return nil, false, err
			}
			go run(ctx, c.Name(), c.Run)
			return c, true, nil
		}
	}
}
