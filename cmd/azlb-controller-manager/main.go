// Command azlb-controller-manager is the azlb cloud controller manager: the
// Kubernetes cloud-provider framework (leader election, secure serving of
// /metrics and /healthz, the service controller) with the "azure" cloud
// provider registered, plus azlb's own controllers.
//
// This file is wiring only; behaviour lives in internal/.
package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"github.com/spf13/cobra"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // build info metric
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/cloudconfig"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/leaderfence"
	"github.com/azlb/azlb/internal/provider"
	"github.com/azlb/azlb/internal/servicegateway"
	"github.com/azlb/azlb/internal/version"
)

func main() {
	provider.Register()
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("Unable to initialize command options: %v", err)
	}
	// azlb implements only load balancers: run the service controller and
	// azlb's own controllers unless --controllers says otherwise.
	opts.Generic.Controllers = defaultControllers()
	opts.KubeCloudShared.CloudProvider.Name = provider.ProviderName
	// Every server binds to loopback unless told otherwise; azlb serves no
	// webhooks, so that server is off by default.
	opts.SecureServing.BindAddress = net.IPv4(127, 0, 0, 1)
	opts.WebhookServing.BindAddress = net.IPv4(127, 0, 0, 1)
	opts.WebhookServing.BindPort = 0
	// Group commit (internal/provider) batches the changes of concurrent
	// Service syncs into one write per load balancer.
	opts.ServiceController.ConcurrentServiceSyncs = 10

	flags := &azlbFlags{}
	cmd := app.NewCloudControllerManagerCommand(opts, cloudInitializer(flags), controllerInitializers(flags), names.CCMControllerAliases(), flags.flagSets(), wait.NeverStop)
	cmd.Use = "azlb-controller-manager"
	cmd.PreRunE = func(cmd *cobra.Command, args []string) error {
		printVersion(cmd, args)
		flags.clusterNameGiven = clusterNameGiven(cmd)
		return flags.complete()
	}
	os.Exit(cli.Run(cmd))
}

// clusterNameGiven reports whether the framework's --cluster-name was set
// on the command line (its default, "kubernetes", does not count: it must
// not override azure.json's clusterName).
func clusterNameGiven(cmd *cobra.Command) bool {
	f := cmd.Flags().Lookup("cluster-name")
	return f != nil && f.Changed
}

// printVersion answers --version with azlb's name and build (the
// framework's own answer names Kubernetes); --version=raw stays the
// framework's.
func printVersion(cmd *cobra.Command, _ []string) {
	if f := cmd.Flags().Lookup("version"); f != nil && f.Value.String() == "true" {
		fmt.Println(version.String(cmd.Use))
		os.Exit(0)
	}
}

// cloudInitializer builds azlb's cloud from azure.json and the flags.
func cloudInitializer(flags *azlbFlags) app.InitCloudFunc {
	return func(c *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
		return initCloud(c, flags)
	}
}

func initCloud(c *cloudcontrollerconfig.CompletedConfig, flags *azlbFlags) cloudprovider.Interface {
	az, err := loadCloud(c, flags)
	if err != nil {
		klog.Fatalf("Cloud provider could not be initialized: %v", err)
	}
	if le := c.ComponentConfig.Generic.LeaderElection; le.LeaderElect {
		// Only the replica holding a fresh lease writes to Azure.
		client, err := kubernetes.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(c.Kubeconfig), "azlb-leader-fence"))
		if err != nil {
			klog.Fatalf("Leader fence client: %v", err)
		}
		fence, err := leaderfence.New(leaderfence.Options{Client: client, Namespace: le.ResourceNamespace, Name: le.ResourceName,
			RenewDeadline: le.RenewDeadline.Duration})
		if err != nil {
			klog.Fatalf("Leader fence: %v", err)
		}
		az.UseWriteFence(fence)
		// And to Kubernetes: every client the controllers build from here
		// on copies this configuration (leases and events pass).
		c.Kubeconfig.Wrap(fence.KubeWrites)
	}
	if !flags.class.IsDefault() {
		if az.Config.PodIPMode() {
			// The service gateway engine serves every class-less
			// LoadBalancer Service, and tears down the others at start.
			klog.Fatalf("--load-balancer-class=%s: not supported with pod-based load balancing (serviceGatewayEnabled)", flags.class)
		}
		if name := az.Config.DefaultLoadBalancerName(); name == config.DefaultClusterName {
			klog.Warningf("--load-balancer-class=%s with the load balancer %q: the default implementation on Azure (AKS's or the upstream cloud controller manager) uses that name too; set clusterName (or loadBalancerName) in azure.json so that azlb's load balancers are its own (docs/install.md, AKS)", flags.class, name)
		}
		az.SetLoadBalancerClass(flags.class)
	}
	if az.Config.PodIPMode() {
		// Pod-based load balancing: the service controller's calls go to
		// the service gateway engine, which the service-gateway controller
		// attaches when it starts.
		az.UseLoadBalancer(servicegateway.NewBalancer())
	}
	return az
}

// loadCloud builds azlb's cloud from --cloud-config, with the framework's
// --cluster-name naming the cluster when azure.json has no clusterName
// (both set and different: an error).
func loadCloud(c *cloudcontrollerconfig.CompletedConfig, flags *azlbFlags) (*provider.Cloud, error) {
	cc := c.ComponentConfig.KubeCloudShared.CloudProvider
	if cc.Name != provider.ProviderName {
		return nil, fmt.Errorf("cloud provider %q is not known (only %q is)", cc.Name, provider.ProviderName)
	}
	if cc.CloudConfigFile == "" {
		return nil, fmt.Errorf("cloud provider %s: --cloud-config (azure.json) is required", provider.ProviderName)
	}
	// The Secret kube-system/azure-cloud-provider, per azure.json's
	// cloudConfigType, is read as the manager's identity (without a
	// kubeconfig: not at all, which cloudconfig.Load reports).
	var client kubernetes.Interface
	if c.Kubeconfig != nil {
		cs, err := kubernetes.NewForConfig(restclient.AddUserAgent(restclient.CopyConfig(c.Kubeconfig), "azlb-cloud-config"))
		if err != nil {
			return nil, fmt.Errorf("cloud provider %s: Kubernetes client: %w", provider.ProviderName, err)
		}
		client = cs
	}
	ctx := context.Background()
	res, err := cloudconfig.Load(ctx, cc.CloudConfigFile, client)
	if err != nil {
		return nil, fmt.Errorf("cloud provider %s: %w", provider.ProviderName, err)
	}
	klog.InfoS("Cloud configuration loaded", "source", res.Source, "cloudConfigType", res.Config.CloudConfigType,
		"secretOverrides", res.Overrides, "note", res.Note)
	return provider.LoadedCloud(ctx, res.Config, provider.ClusterNameFlag{
		Name: c.ComponentConfig.KubeCloudShared.ClusterName, Given: flags.clusterNameGiven})
}
