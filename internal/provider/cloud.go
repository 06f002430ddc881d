package provider

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
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
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/leaderfence"
	"github.com/azlb/azlb/internal/nicpool"
	"github.com/azlb/azlb/internal/securitygroup"
)

// ProviderName is the cloud provider name azlb registers (--cloud-provider).
const ProviderName = "azure"

// Cloud is the cloudprovider.Interface azlb registers: LoadBalancer (the
// Service reconcile) and InstancesV2 (node initialization and lifecycle
// from the VMs' state). Instances, Zones, Clusters and Routes report
// unsupported (the route controller stays idle). azlb's own controllers
// are registered with the controller manager (cmd/azlb-controller-manager)
// and reach the cloud through Config, Store and Inventory.
type Cloud struct {
	*Provider
	Config  *config.Config
	Clients *azure.Clients
	// Store is the one reader and writer of load balancers and backend
	// pools; Initialize starts its writer.
	Store *lbstore.Store
	// SecurityGroups is the one writer of the NSG (nil: none configured);
	// Initialize starts it.
	SecurityGroups *securitygroup.Store
	// Inventory reads the VMs behind nodes.
	Inventory *compute.Inventory
	instances *Instances

	// podLB, when set, is the LoadBalancer of pod-based load balancing
	// (serviceGatewayEnabled) in place of the node-pool Provider.
	podLB cloudprovider.LoadBalancer
	// fence, when set, admits ARM writes only while this replica holds a
	// fresh leader lease (UseWriteFence).
	fence *leaderfence.Fence
}

var (
	_ cloudprovider.Interface    = (*Cloud)(nil)
	_ cloudprovider.InformerUser = (*Cloud)(nil)
)

// Register makes "azure" available to cloudprovider.InitCloudProvider: the
// factory loads azure.json from the --cloud-config reader and builds the ARM
// clients.
func Register() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(r io.Reader) (cloudprovider.Interface, error) {
		return LoadCloud(context.Background(), r, ClusterNameFlag{})
	})
}

// ClusterNameFlag is the controller manager's --cluster-name, and whether
// it was given on the command line.
type ClusterNameFlag struct {
	Name  string
	Given bool
}

// LoadCloud loads azure.json from r, lets --cluster-name name the cluster
// when azure.json has no clusterName (an error when both are set and
// differ: config.UseClusterNameFlag), and builds the cloud.
func LoadCloud(ctx context.Context, r io.Reader, clusterName ClusterNameFlag) (*Cloud, error) {
	if r == nil {
		return nil, fmt.Errorf("cloud provider %s: --cloud-config (azure.json) is required", ProviderName)
	}
	cfg, err := config.Load(r)
	if err != nil {
		return nil, fmt.Errorf("cloud provider %s: %w", ProviderName, err)
	}
	if cfg.CloudConfigType == config.CloudConfigTypeSecret {
		// This factory has azure.json only, no Kubernetes client to read
		// the Secret with (azlb-controller-manager reads it:
		// internal/cloudconfig).
		return nil, fmt.Errorf("cloud provider %s: cloudConfigType secret: the configuration is in a Secret this caller cannot read", ProviderName)
	}
	return LoadedCloud(ctx, cfg, clusterName)
}

// LoadedCloud builds the cloud from a loaded configuration (azure.json,
// with the Secret applied: internal/cloudconfig): it logs the fields it
// ignored and lets --cluster-name name the cluster when the configuration
// has no clusterName.
func LoadedCloud(ctx context.Context, cfg *config.Config, clusterName ClusterNameFlag) (*Cloud, error) {
	for _, w := range cfg.UnknownFieldWarnings() {
		klog.Warningf("azure.json: %s", w)
	}
	if err := cfg.UseClusterNameFlag(clusterName.Name, clusterName.Given); err != nil {
		return nil, fmt.Errorf("cloud provider %s: %w", ProviderName, err)
	}
	return NewCloud(ctx, cfg)
}

// NewCloud builds the cloud from a loaded configuration. It refuses what
// the controller does not run with (config.CheckController: loadBalancerSku
// basic).
func NewCloud(ctx context.Context, cfg *config.Config) (*Cloud, error) {
	if err := cfg.CheckController(); err != nil {
		return nil, err
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "azlb-controller-manager"})
	if err != nil {
		return nil, err
	}
	inv, err := NewInventory(cfg, clients)
	if err != nil {
		return nil, err
	}
	dec := &storeDecoupler{}
	// Pod-based load balancing puts no ip configuration in a pool, so its
	// per-Service load balancers are deleted without the decoupling reads.
	var decoupler lbstore.Decoupler = dec
	if cfg.PodIPMode() {
		decoupler = nil
	}
	store, err := lbstore.New(lbstore.Options{Config: cfg, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool, Decoupler: decoupler})
	if err != nil {
		return nil, err
	}
	var sg *securitygroup.Store
	if cfg.SecurityGroupName != "" && !cfg.PodIPMode() {
		if sg, err = newSecurityGroups(cfg, clients); err != nil {
			return nil, err
		}
	}
	p, err := New(Options{Config: cfg, Clients: clients, Store: store, Inventory: inv, PutVMSSVMBatchSize: cfg.PutVMSSVMBatchSize, SecurityGroups: sg})
	if err != nil {
		return nil, err
	}
	dec.w = p.nicPools
	klog.FromContext(ctx).Info("Azure cloud provider ready", "config", cfg.String())
	return &Cloud{Provider: p, Config: cfg, Clients: clients, Store: store, SecurityGroups: sg, Inventory: inv, instances: NewInstances(inv, 0)}, nil
}

// newSecurityGroups builds the writer of the NSG named in azure.json,
// applying azure.json tags to it (config.ResourceTags).
func newSecurityGroups(cfg *config.Config, clients *azure.Clients) (*securitygroup.Store, error) {
	opts := securitygroup.Options{Client: clients.SecurityGroup, ResourceGroup: cfg.SecurityGroupResourceGroup, Name: cfg.SecurityGroupName}
	if tags := cfg.ResourceTags(); !tags.Empty() {
		opts.Tags = func(cur map[string]*string) (map[string]*string, bool) { return tags.Apply(cur, nil) }
	}
	return securitygroup.New(opts)
}

// storeDecoupler lets the store take a load balancer's pools out of scale
// set models, VMs and NICs (the provider's NIC pool writer) before it
// deletes the load balancer.
type storeDecoupler struct{ w *nicpool.Writer }

func (d *storeDecoupler) Decouple(ctx context.Context, lb *armnetwork.LoadBalancer, scaleSetID string) error {
	if d.w == nil {
		return nil
	}
	_, err := d.w.Decouple(ctx, lb, scaleSetID)
	return err
}

// NewInventory builds the VM inventory of a configuration: the VM
// resource group, listings kept vmCacheTTLInSeconds.
func NewInventory(cfg *config.Config, clients *azure.Clients) (*compute.Inventory, error) {
	return compute.New(compute.Options{
		Clients:        compute.ClientsOf(clients),
		SubscriptionID: cfg.SubscriptionID, ResourceGroup: cfg.ResourceGroup,
		TTL: time.Duration(cfg.VMCacheTTLInSeconds) * time.Second,
	})
}

// Initialize wires the Service event recorder and starts the store's
// writer. It is called once by the framework, on the elected leader, before
// any controller starts; stop closes when leadership ends, and with it
// every write.
func (c *Cloud) Initialize(clientBuilder cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	ctx := wait.ContextForChannel(stop)
	client, err := clientBuilder.Client(CloudClientName)
	if err != nil {
		// Without a client there are no events; the load balancers are
		// still reconciled.
		klog.FromContext(ctx).Error(err, "Building the cloud provider's Kubernetes client; Service events are dropped")
	} else {
		c.recorder = NewRecorder(ctx, client, "azlb-controller-manager")
	}
	if c.fence != nil {
		c.fence.Start(ctx)
	}
	go c.Store.Run(ctx)
	if c.SecurityGroups != nil {
		go c.SecurityGroups.Run(ctx)
	}
	if !c.Config.PodIPMode() {
		// The Private Link Service writer (azure-pls-*), with the Service
		// event recorder; set before any controller starts.
		rec := c.recorder
		if rec == nil {
			rec = &record.FakeRecorder{} // no client: events are dropped, as above
		}
		pls, err := NewPrivateLinks(c.Config, c.Clients, rec)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Building the Private Link Service writer; Services asking for one fail until the controller restarts")
			return
		}
		c.pls = pls
		go pls.Run(ctx)
	}
}

// UseWriteFence makes every ARM write of the cloud's clients pass the
// fence: under leader election, a replica whose lease is not fresh (frozen,
// partitioned, replaced) writes nothing, even before its elector notices.
// Writes are refused until Initialize (on the elected replica) starts the
// fence. Call it before the controllers start.
func (c *Cloud) UseWriteFence(f *leaderfence.Fence) {
	c.fence = f
	c.Clients.SetWriteFence(f.Allow)
}

// CloudClientName is the client identity of the Service reconcile's events.
const CloudClientName = "azlb-cloud-provider"

// NewRecorder builds an event recorder writing through client, shut down
// when ctx ends.
func NewRecorder(ctx context.Context, client kubernetes.Interface, component string) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(0)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})
}

// SetInformers gives the Service reconcile the listers of the shared
// informers: namespaces (placement), nodes (latest taints), Services (the
// Basic migration's events) and, in multiple-SLB mode, EndpointSlices
// (Local Service pools).
func (c *Cloud) SetInformers(f informers.SharedInformerFactory) {
	var listSlices discoverylisters.EndpointSliceLister
	var synced func() bool
	if c.Config.UseMultipleStandardLoadBalancers() {
		slices := f.Discovery().V1().EndpointSlices()
		listSlices, synced = slices.Lister(), slices.Informer().HasSynced
	}
	c.SetListers(f.Core().V1().Namespaces().Lister(), f.Core().V1().Nodes().Lister(), listSlices, synced)
	c.SetServiceLister(f.Core().V1().Services().Lister())
}

// UseLoadBalancer makes lb the cloud's LoadBalancer in place of the
// node-pool Provider: pod-based load balancing (the command wires it when
// serviceGatewayEnabled is set; provider imports no controller). Call it
// before the controllers start.
func (c *Cloud) UseLoadBalancer(lb cloudprovider.LoadBalancer) { c.podLB = lb }

// LoadBalancer is supported: the node-pool Provider, or what
// UseLoadBalancer set.
func (c *Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	if c.podLB != nil {
		return c.podLB, true
	}
	return c.Provider, true
}

// Instances is not supported.
func (c *Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 is supported: the cloud node and cloud node lifecycle
// controllers run on it.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	return c.instances, c.instances != nil
}

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
