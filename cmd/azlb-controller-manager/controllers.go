package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/drift"
	"github.com/azlb/azlb/internal/localservice"
	"github.com/azlb/azlb/internal/nodelabels"
	"github.com/azlb/azlb/internal/provider"
	"github.com/azlb/azlb/internal/servicegateway"
)

// Client identities (ServiceAccounts with --use-service-account-credentials)
// of the controllers; deploy/ grants each only what it calls.
const (
	clientService            = "azlb-service-controller"
	clientCloudNode          = "azlb-cloud-node-controller"
	clientCloudNodeLifecycle = "azlb-cloud-node-lifecycle-controller"
	clientAdminState         = "azlb-admin-state-controller"
	clientSpotEviction       = "azlb-spot-eviction-controller"
	clientLocalService       = "azlb-local-service-controller"
	clientGateway            = "azlb-service-gateway-controller"
	clientDrift              = "azlb-drift-controller"
)

// defaultControllers run unless --controllers says otherwise: the
// framework's service, cloud node and cloud node lifecycle controllers
// (azlb implements LoadBalancer and InstancesV2) and azlb's own; the route
// controller stays off.
func defaultControllers() []string {
	return []string{names.ServiceLBController, names.CloudNodeController, names.CloudNodeLifecycleController,
		adminstate.ControllerAdminState, adminstate.ControllerSpotEviction, localservice.ControllerName,
		servicegateway.ControllerName, drift.ControllerName}
}

// controllerInitializers lists every controller --controllers knows: the
// framework's (the service controller with azlb's client identity) and
// azlb's own. Each of azlb's is also switched by azure.json (it reports
// itself not started when its feature is off). Those that act for Services
// serve the load-balancer class of flags.
func controllerInitializers(flags *azlbFlags) map[string]app.ControllerInitFuncConstructor {
	inits := map[string]app.ControllerInitFuncConstructor{}
	for name, c := range app.DefaultInitFuncConstructors {
		inits[name] = c
	}
	for name, client := range map[string]string{
		names.ServiceLBController:          clientService,
		names.CloudNodeController:          clientCloudNode,
		names.CloudNodeLifecycleController: clientCloudNodeLifecycle,
	} {
		if c, ok := inits[name]; ok {
			c.InitContext.ClientName = client
			inits[name] = c
		}
	}
	if c, ok := inits[names.ServiceLBController]; ok {
		c.Constructor = withNodeLabels(startServiceController(flags))
		inits[names.ServiceLBController] = c
	}
	inits[adminstate.ControllerAdminState] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientAdminState},
		Constructor: startAdminState,
	}
	inits[adminstate.ControllerSpotEviction] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientSpotEviction},
		Constructor: startSpotEviction,
	}
	inits[localservice.ControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientLocalService},
		Constructor: startLocalService(flags),
	}
	inits[servicegateway.ControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientGateway},
		Constructor: startServiceGateway,
	}
	inits[drift.ControllerName] = app.ControllerInitFuncConstructor{
		InitContext: app.ControllerInitContext{ClientName: clientDrift},
		Constructor: startDrift(flags),
	}
	return inits
}

// azureCloud is the cloud azlb registered.
func azureCloud(cloud cloudprovider.Interface) (*provider.Cloud, error) {
	az, ok := cloud.(*provider.Cloud)
	if !ok {
		return nil, fmt.Errorf("cloud provider %T is not azlb's %q", cloud, provider.ProviderName)
	}
	return az, nil
}

// clientFor builds the controller's own client.
func clientFor(cfg *cloudcontrollerconfig.CompletedConfig, ic app.ControllerInitContext) (kubernetes.Interface, error) {
	client, err := cfg.ClientBuilder.Client(ic.ClientName)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", ic.ClientName, err)
	}
	return client, nil
}

// withNodeLabels runs the node-label controller (internal/nodelabels) with
// the service controller: the framework's node sync acts only when the node
// set changes, and a node whose labels now place it on another load
// balancer, or out of every pool, must move too. It reads nodes from the
// shared informer and writes through the cloud's store, so it needs no
// identity of its own. Not with pod-based load balancing (no node pools).
func withNodeLabels(inner app.InitFuncConstructor) app.InitFuncConstructor {
	return func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		start := inner(ic, cfg, cloud)
		return func(ctx context.Context, cc genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
			c, enabled, err := start(ctx, cc)
			if err != nil || !enabled {
				return c, enabled, err
			}
			az, err := azureCloud(cloud)
			if err != nil {
				return nil, false, err
			}
			if az.Config.PodIPMode() {
				return c, enabled, nil
			}
			nl, err := nodelabels.NewController(cfg.SharedInformers.Core().V1().Nodes(), az.Provider, nil)
			if err != nil {
				return nil, false, err
			}
			go run(ctx, nl.Name(), func(ctx context.Context) error { return nl.Run(ctx, 1) })
			return c, enabled, nil
		}
	}
}

// startAdminState runs the admin-state controller unless azure.json sets
// enableLoadBalancerAdminState to false.
func startAdminState(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		az, err := azureCloud(cloud)
		if err != nil {
			return nil, false, err
		}
		if !az.Config.AdminStateEnabled() {
			klog.FromContext(ctx).Info("Admin-state controller disabled by enableLoadBalancerAdminState=false")
			return nil, false, nil
		}
		if az.Config.PodIPMode() {
			klog.FromContext(ctx).Info("Admin-state controller idle: pod-based load balancing has no node pools")
			return nil, false, nil
		}
		client, err := clientFor(cfg, ic)
		if err != nil {
			return nil, false, err
		}
		policy := backendpool.PolicyFromConfig(az.Config)
		var members adminstate.NodeMembers
		if policy.NICBased {
			members = az.Inventory // NIC-derived entries are matched by their VM or NIC
		}
		opts := adminstate.ManagerOptions{SubscriptionID: az.Config.NetworkSubscriptionID(),
			Source: "azlb-controller-manager", Policy: policy, Members: members}
		if az.Config.UseMultipleStandardLoadBalancers() { // Local Services' pools: their draining entries stay Down
			svcs, slices := cfg.SharedInformers.Core().V1().Services(), cfg.SharedInformers.Discovery().V1().EndpointSlices()
			opts.LocalPools = backendpool.LocalPools{Services: svcs.Lister(), Slices: slices.Lister()}
			opts.LocalPoolsSynced = func() bool { return svcs.Informer().HasSynced() && slices.Informer().HasSynced() }
		}
		mgr, err := adminstate.NewManager(az.Store, opts)
		if err != nil {
			return nil, false, err
		}
		c, err := adminstate.NewController(cfg.SharedInformers.Core().V1().Nodes(), mgr,
			provider.NewRecorder(ctx, client, "azlb-admin-state-controller"), nil, adminstate.WithDrainedCondition(client))
		if err != nil {
			return nil, false, err
		}
		go run(ctx, c.Name(), c.Run)
		return c, true, nil
	}
}

// startSpotEviction runs the spot-eviction controller with the admin-state
// feature. PreemptScheduled events are read through an informer of its own
// that lists only those events (a field selector), not every event.
func startSpotEviction(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		az, err := azureCloud(cloud)
		if err != nil {
			return nil, false, err
		}
		if !az.Config.AdminStateEnabled() || az.Config.PodIPMode() {
			klog.FromContext(ctx).Info("Spot-eviction controller idle: enableLoadBalancerAdminState=false, or pod-based load balancing (no node pools)")
			return nil, false, nil
		}
		client, err := clientFor(cfg, ic)
		if err != nil {
			return nil, false, err
		}
		events := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(adminstate.PreemptEventListOptions))
		c, err := adminstate.NewSpotController(client, cfg.SharedInformers.Core().V1().Nodes(), events.Core().V1().Events(),
			provider.NewRecorder(ctx, client, "azlb-spot-eviction-controller"), nil)
		if err != nil {
			return nil, false, err
		}
		events.Start(ctx.Done())
		go func() {
			run(ctx, c.Name(), func(ctx context.Context) error { return c.Run(ctx, 1) })
			events.Shutdown()
		}()
		return c, true, nil
	}
}

// startLocalService runs the ExternalTrafficPolicy=Local pool updater in
// multiple Standard load balancer mode (the only mode with dedicated Local
// pools), for the Services of the class azlb serves.
func startLocalService(flags *azlbFlags) app.InitFuncConstructor {
	return func(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
		return localServiceInit(ic, cfg, cloud, flags)
	}
}

// localServiceInit is startLocalService's InitFunc.
func localServiceInit(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface, flags *azlbFlags) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		az, err := azureCloud(cloud)
		if err != nil {
			return nil, false, err
		}
		if !az.Config.UseMultipleStandardLoadBalancers() {
			klog.FromContext(ctx).Info("Local service pool updater idle: dedicated Local pools exist only with multipleStandardLoadBalancerConfigurations")
			return nil, false, nil
		}
		client, err := clientFor(cfg, ic)
		if err != nil {
			return nil, false, err
		}
		f := cfg.SharedInformers
		u, err := localservice.NewUpdater(localservice.FromConfig(az.Config, localservice.Options{
			Recorder:       provider.NewRecorder(ctx, client, "azlb-local-service-controller"),
			Store:          az.Store,
			Nodes:          f.Core().V1().Nodes(),
			Services:       f.Core().V1().Services(),
			EndpointSlices: f.Discovery().V1().EndpointSlices(),
			Class:          flags.class,
			Source:         "azlb-controller-manager",
		}))
		if err != nil {
			return nil, false, err
		}
		go run(ctx, u.Name(), u.Run)
		return u, true, nil
	}
}

// startServiceGateway runs pod-based load balancing (serviceGatewayEnabled):
// the engine behind the cloud's LoadBalancer.
func startServiceGateway(ic app.ControllerInitContext, cfg *cloudcontrollerconfig.CompletedConfig, cloud cloudprovider.Interface) app.InitFunc {
	return func(ctx context.Context, _ genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
		az, err := azureCloud(cloud)
		if err != nil {
			return nil, false, err
		}
		if !az.Config.PodIPMode() {
			klog.FromContext(ctx).Info("Service gateway controller idle: serviceGatewayEnabled is not set")
			return nil, false, nil
		}
		lb, _ := az.LoadBalancer()
		balancer, ok := lb.(*servicegateway.Balancer)
		if !ok {
			return nil, false, fmt.Errorf("the cloud's LoadBalancer is %T, not the service gateway's", lb)
		}
		client, err := clientFor(cfg, ic)
		if err != nil {
			return nil, false, err
		}
		f := cfg.SharedInformers
		// Egress pods only: an informer of the labelled pods, with the
		// controller's own identity.
		podInformers := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = servicegateway.EgressLabel
		}))
		e, err := servicegateway.NewController(servicegateway.Options{
			Config:         az.Config,
			Store:          az.Store,
			PublicIPs:      az.Clients.PublicIP,
			Gateway:        az.Clients.ServiceGateway,
			Client:         client,
			Services:       f.Core().V1().Services(),
			EndpointSlices: f.Discovery().V1().EndpointSlices(),
			Nodes:          f.Core().V1().Nodes(),
			Pods:           podInformers.Core().V1().Pods(),
			NatGateways:    az.Clients.NatGateway,
			Recorder:       provider.NewRecorder(ctx, client, clientGateway),
		})
		if err != nil {
			return nil, false, err
		}
		podInformers.Start(ctx.Done())
		if err := startReadinessGate(ctx, cfg, client, e); err != nil {
			return nil, false, err
		}
		balancer.Attach(e)
		go run(ctx, e.Name(), func(ctx context.Context) error { return e.Run(ctx, servicegateway.DefaultWorkers) })
		return e, true, nil
	}
}

// run runs a controller until ctx ends and logs how it ended.
func run(ctx context.Context, name string, fn func(context.Context) error) {
	if err := fn(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Controller stopped", "controller", name)
	}
}
