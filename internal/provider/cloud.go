package provider

import (
	"context"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/record"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
)

// ProviderName is the cloud provider name azlb registers (--cloud-provider).
const ProviderName = "azure"

// Cloud is the cloudprovider.Interface azlb registers. Only the
// LoadBalancer part is implemented; Instances, Zones, Clusters and Routes
// report unsupported, so the cloud node, node lifecycle and route
// controllers of the framework stay idle.
type Cloud struct {
	*Provider
	Config  *config.Config
	Clients *azure.Clients
	// Store is the one reader and writer of load balancers and backend
	// pools; Initialize starts its writer.
	Store *lbstore.Store

	// Extensions start azlb's own controllers (admin state, local service
	// updater). The framework calls Initialize and SetInformers on the
	// elected leader only, before the service controller starts, so each
	// extension runs under the same leader election and is plugged into
	// the provider before the first Service is reconciled.
	Extensions []Extension

	client kubernetes.Interface
	ctx    context.Context
}

// Extension starts one controller. ctx ends when the controller manager
// stops leading; informers from f are started by the framework after all
// extensions ran.
type Extension func(ctx context.Context, c *Cloud, f informers.SharedInformerFactory, client kubernetes.Interface, recorder record.EventRecorder) error

// Recorder is the event recorder Initialize built.
func (c *Cloud) Recorder() record.EventRecorder { return c.recorder }

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

// Register makes "azure" available to cloudprovider.InitCloudProvider: the
// factory loads azure.json from the --cloud-config reader and builds the ARM
// clients.
func Register() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		if r == nil {
			return nil, fmt.Errorf("cloud provider %s: --cloud-config (azure.json) is required", ProviderName)
		}
		cfg, err := config.Load(r)
		if err != nil {
			return nil, fmt.Errorf("cloud provider %s: %w", ProviderName, err)
		}
		return NewCloud(context.Background(), cfg)
	})
}

// NewCloud builds the cloud from a loaded configuration.
func NewCloud(ctx context.Context, cfg *config.Config) (*Cloud, error) {
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "azlb-controller-manager"})
	if err != nil {
		return nil, err
	}
	store, err := lbstore.New(lbstore.Options{Config: cfg, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	if err != nil {
		return nil, err
	}
	p, err := New(Options{Config: cfg, Clients: clients, Store: store})
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Azure cloud provider ready", "config", cfg.String())
	return &Cloud{Provider: p, Config: cfg, Clients: clients, Store: store}, nil
}

// Initialize wires the event recorder and starts the store's writer. It is
// called once by the framework, on the elected leader, before any controller
// starts; stop closes when leadership ends, and with it every write.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	client := clientBuilder.ClientOrDie("azlb-cloud-provider")
	c.client = client
	c.ctx = wait.ContextForChannel(stop)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartStructuredLogging(0)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	c.recorder = broadcaster.NewRecorder(recordScheme(), v1.EventSource{Component: "azlb-controller-manager"})
	go c.Store.Run(c.ctx)
	go func() {
		<-stop
		broadcaster.Shutdown()
	}()
}

// SetInformers gives placement a namespace lister and starts the
// extensions. An extension that fails to start stops the controller
// manager: running without it would silently lose a feature azure.json
// asked for.
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	slices := f.Discovery().V1().EndpointSlices()
	var listSlices discoverylisters.EndpointSliceLister
	var synced func() bool
	if c.Config.UseMultipleStandardLoadBalancers() {
		listSlices, synced = slices.Lister(), slices.Informer().HasSynced
	}
	c.SetListers(f.Core().V1().Namespaces().Lister(), f.Core().V1().Nodes().Lister(), listSlices, synced)
	for _, ext := range c.Extensions {
		if err := ext(c.ctx, c, f, c.client, c.recorder); err != nil {
			klog.Fatalf("Starting azlb controller: %v", err)
		}
	}
}

// LoadBalancer is supported.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.Provider, true }

// Instances is not supported.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 is not supported.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return nil, false }

// Zones is not supported.
func (c *Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not supported.
func (c *Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not supported.
func (c *Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName is "azure".
func (c *Cloud) ProviderName() string { return ProviderName }

// HasClusterID is true: azlb tags what it creates with the cluster name.
func (c *Cloud) HasClusterID() bool { return true }

func recordScheme() *runtime.Scheme { return scheme.Scheme }
