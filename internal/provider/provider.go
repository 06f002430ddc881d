package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/keymutex"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/migration"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nicpool"
	"github.com/azlb/azlb/internal/placement"
	"github.com/azlb/azlb/internal/securitygroup"
)

// Event reasons azlb records on Services and nodes. Admin-state and
// local-service reasons live with their controllers.
const (
	EventReasonInvalidAnnotation     = "InvalidLoadBalancerAnnotation"
	EventReasonPlacementFailed       = "LoadBalancerPlacementFailed"
	EventReasonNodePlacementFailed   = "LoadBalancerNodePlacementFailed"
	EventReasonRuleLimitExceeded     = "LoadBalancerRuleLimitExceeded"
	EventReasonUnsupportedAnnotation = "UnsupportedAnnotation"
	// EventReasonPublicIPTagsDropped: items of azure-pip-tags that are not
	// key=value pairs with a key are dropped, as the Azure cloud provider
	// drops them.
	EventReasonPublicIPTagsDropped = "PublicIPTagsDropped"
	// EventReasonProbeSettingsNotApplied: per-port probe settings of a
	// Local Service whose rules use its one health-check probe.
	EventReasonProbeSettingsNotApplied = "ProbeSettingsNotApplied"
	EventReasonPublicIPNotFound        = "PublicIPNotFound"
	// EventReasonUnsupportedProtocol: a port's protocol is not one Azure
	// Load Balancer rules carry (SCTP); the Service is refused.
	EventReasonUnsupportedProtocol = "UnsupportedProtocol"
	// EventReasonNoSourceOfFamily: the Service's source ranges are all of
	// the other IP family than one of its own: that family stays closed.
	EventReasonNoSourceOfFamily = "NoSourceRangeOfFamily"
)

// Options are the collaborators of a Provider. Config, Clients and Store
// are required.
type Options struct {
	Config  *config.Config
	Clients *azure.Clients
	// Store reads and writes load balancers and backend pools; its Run must
	// be running for writes to happen.
	Store *lbstore.Store
	// Recorder records Service and node events; nil drops them.
	Recorder record.EventRecorder
	// Clock tells how long a throttle's Retry-After is from now. Default:
	// the real clock.
	Clock clock.PassiveClock
	// Namespaces lets Service placement read namespace labels (multiple-SLB
	// serviceNamespaceSelector). nil: namespaces have no labels.
	Namespaces corelisters.NamespaceLister
	// Nodes gives pool writes the latest taints (admin state). nil: the
	// nodes the service controller passes in are used as they are.
	Nodes corelisters.NodeLister
	// EndpointSlices fill the dedicated pools of ExternalTrafficPolicy=Local
	// Services (multiple-SLB mode); SlicesSynced reports whether its
	// informer has synced. nil: Local Services use the cluster pool.
	EndpointSlices discoverylisters.EndpointSliceLister
	SlicesSynced   func() bool
	// Inventory reads the VMs behind nodes, and the clients of Clients
	// write their membership (NIC-based pools). nil: only IP-based pools
	// work.
	Inventory *compute.Inventory
	// SecurityGroups writes the inbound rules of Services into the NSG
	// named in azure.json (NewCloud sets it whenever securityGroupName is
	// set). nil: no rule is written, and a Service that restricts its
	// sources is refused.
	SecurityGroups *securitygroup.Store
	// PutVMSSVMBatchSize is how many VMs of an aks-managed-coordination
	// scale set join a NIC-based pool at once.
	PutVMSSVMBatchSize int
}

// Provider implements cloudprovider.LoadBalancer for Azure Standard Load
// Balancers with IP-based (nodeIP) backend pools, in single or multiple
// Standard load balancer mode. It is safe for concurrent use: the cloud
// provider's service controller calls it from --concurrent-service-syncs
// workers.
type Provider struct {
	cfg      *config.Config
	clients  *azure.Clients
	store    *lbstore.Store
	policy   backendpool.Policy
	recorder record.EventRecorder
	clock    clock.PassiveClock
	placer   *placement.Placer // nil in single load balancer mode
	state    *placement.State
	inflight *placement.InFlight // placements whose write has not landed
	// deadDests are the NSG destinations the last collection found no
	// frontend or node for (collectSecurityRules, with grace).
	deadMu    sync.Mutex
	deadDests map[string]bool
	// extras: the azure-additional-public-ips each Service's rules hold
	// (additionalips.go).
	extras heldExtras

	inventory *compute.Inventory
	nicPools  *nicpool.Writer
	sg        *securitygroup.Store // nil: no NSG configured
	pls       *PrivateLinks        // nil: no Private Link Service is written (privatelink.go)

	collectMu sync.Mutex
	collected bool

	nodeAddrs nodeAddressBook // every node address seen (knownNodeAddresses)

	// pipAddrs are the addresses of the public IPs read (lower-cased id
	// -> address): which shared frontend an address belongs to.
	pipAddrs sync.Map

	namespaces   corelisters.NamespaceLister
	nodes        corelisters.NodeLister // nil: trust the nodes passed in
	slices       discoverylisters.EndpointSliceLister
	slicesSynced func() bool

	services corelisters.ServiceLister // nil: the migration records no Service events
	class    lbclass.Class             // the load-balancer class azlb serves (SetLoadBalancerClass)

	migrator  *migration.Migrator // nil unless loadBalancerSku is standard
	migrateMu sync.Mutex
	migrated  bool

	unsupported *annotations.Reported
	// unprobedTold: which Services were told about ports without a node
	// port for their probe (NoHealthProbe).
	unprobedTold *annotations.Reported
	// affinityTold: which Services were told their ClientIP timeout is
	// not applied.
	affinityTold *annotations.Reported // which Services were told about their unsupported annotations
	// refusals: which Services were told they are refused, and why (one
	// Warning per generation and reason; plan.go).
	refusals *annotations.Reported
	// familyTold: which Services were told a family of theirs has no
	// source range.
	familyTold *annotations.Reported
	// tagsTold: which Services were told about azure-pip-tags items
	// dropped.
	tagsTold *annotations.Reported
	// probesTold: which Services were told their per-port probe settings
	// are not applied (a Local Service's health-check probe).
	probesTold *annotations.Reported

	tags config.ResourceTags // azure.json tags, tagsMap, systemTags
	arm  armReader           // region zones and public IP prefixes

	perService keymutex.Mutex // one reconcile per Service at a time (EnsureLoadBalancer from a Service sync and UpdateLoadBalancer from a node sync may come at once)
	// perAddress serialises the reconciles of Services that share an IP
	// (sharedip.go): each computes the others' security rules from the
	// load balancer as the previous one left it.
	perAddress keymutex.Mutex
	nodeMu     sync.Mutex // serialises node placement
	rebuildMu  sync.Mutex
	rebuilt    bool
}

// New builds a Provider.
func New(opts Options) (*Provider, error) {
	if opts.Config == nil || opts.Clients == nil || opts.Store == nil {
		return nil, errors.New("provider: Config, Clients and Store are required")
	}
	cfg := opts.Config
	rec := opts.Recorder
	if rec == nil {
		rec = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &Provider{
		clock:    clk,
		cfg:      cfg,
		clients:  opts.Clients,
		store:    opts.Store,
		policy:   backendpool.PolicyFromConfig(cfg),
		recorder: rec,
		state:    placement.NewState(),
		inflight: placement.NewInFlight(),

		unsupported:  annotations.NewReported(annotations.MaxReported),
		unprobedTold: annotations.NewReported(annotations.MaxReported),
		affinityTold: annotations.NewReported(annotations.MaxReported),
		refusals:     annotations.NewReported(annotations.MaxReported),
		familyTold:   annotations.NewReported(annotations.MaxReported),
		tagsTold:     annotations.NewReported(annotations.MaxReported),
		probesTold:   annotations.NewReported(annotations.MaxReported),
		tags:         cfg.ResourceTags(),

		namespaces:   opts.Namespaces,
		nodes:        opts.Nodes,
		slices:       opts.EndpointSlices,
		slicesSynced: opts.SlicesSynced,
		sg:           opts.SecurityGroups,
	}
	if opts.Inventory != nil {
		w, err := nicpool.New(nicpool.Options{Inventory: opts.Inventory, ScaleSets: opts.Clients.ScaleSet, ScaleSetVMs: opts.Clients.ScaleSetVM,
			Interfaces: opts.Clients.Interface, ResourceGroup: cfg.ResourceGroup, BatchSize: opts.PutVMSSVMBatchSize, Recorder: eventSink{p}})
		if err != nil {
			return nil, fmt.Errorf("provider: %w", err)
		}
		p.inventory, p.nicPools = opts.Inventory, w
	}
	m, err := p.newMigrator()
	if err != nil {
		return nil, fmt.Errorf("provider: %w", err)
	}
	p.migrator = m
	if cfg.UseMultipleStandardLoadBalancers() {
		placer, err := placement.New(cfg.MultipleStandardLoadBalancerConfigurations, cfg.DefaultLoadBalancerName())
		if err != nil {
			return nil, fmt.Errorf("provider: %w", err)
		}
		p.placer = placer
	}
	return p, nil
}

// SetListers plugs in the listers of the shared informers (the framework
// hands them over after the Provider is built).
func (p *Provider) SetListers(namespaces corelisters.NamespaceLister, nodes corelisters.NodeLister,
	slices discoverylisters.EndpointSliceLister, slicesSynced func() bool) {
	p.namespaces, p.nodes, p.slices, p.slicesSynced = namespaces, nodes, slices, slicesSynced
}

// SetServiceLister plugs in the Service lister (the migration tells the
// Services of a Basic load balancer what happens to them).
func (p *Provider) SetServiceLister(services corelisters.ServiceLister) { p.services = services }

// SetLoadBalancerClass sets the load-balancer class azlb serves
// (--load-balancer-class; lbclass). Call it before the controllers start.
func (p *Provider) SetLoadBalancerClass(c lbclass.Class) { p.class = c }

func (p *Provider) lbRef(lbName string) names.LoadBalancerRef {
	return names.LoadBalancerRef{Subscription: p.cfg.NetworkSubscriptionID(), ResourceGroup: p.store.ResourceGroup(), Name: lbName}
}

func (p *Provider) clusterName() string { return p.cfg.ClusterName }

func (p *Provider) subnetID(subnet string) string { return names.SubnetID(p.policy.VNetID, subnet) }

// configNames are the configured public load balancer names (each may have
// an internal twin).
func (p *Provider) configNames() []string {
	if p.placer == nil {
		return []string{p.cfg.DefaultLoadBalancerName()}
	}
	out := make([]string, 0, len(p.cfg.MultipleStandardLoadBalancerConfigurations))
	for _, c := range p.cfg.MultipleStandardLoadBalancerConfigurations {
		out = append(out, c.Name)
	}
	return out
}

// warn records a Warning event on the Service.
func (p *Provider) warn(obj *v1.Service, reason, format string, args ...any) {
	p.recorder.Eventf(obj, v1.EventTypeWarning, reason, format, args...)
}

func logger(ctx context.Context) klog.Logger { return klog.FromContext(ctx) }

// namespaceLabels returns a namespace's labels for placement.
func (p *Provider) namespaceLabels(_ context.Context, name string) (map[string]string, error) {
	if p.namespaces == nil {
		return nil, nil
	}
	ns, err := p.namespaces.Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read namespace %s: %w", name, err)
	}
	return ns.Labels, nil
}

// reportDroppedTags records a Warning event naming the azure-pip-tags
// items dropped (not key=value pairs with a key), once per generation of
// the Service and set of items.
func (p *Provider) reportDroppedTags(svc *v1.Service, dropped []string) {
	if !p.tagsTold.ShouldReport(svc, dropped) {
		return
	}
	p.warn(svc, EventReasonPublicIPTagsDropped, "%s: %s; the other tags are applied", annotations.KeyPIPTags, config.DroppedTags(dropped))
}

// reportIgnoredProbeSettings records a Warning event naming the per-port
// probe annotations a Local Service's health-check probe does not apply,
// once per generation of the Service and set of keys.
func (p *Provider) reportIgnoredProbeSettings(svc *v1.Service, keys []string) {
	if !p.probesTold.ShouldReport(svc, keys) {
		return
	}
	p.warn(svc, EventReasonProbeSettingsNotApplied,
		"externalTrafficPolicy Local: the rules use one probe of healthCheckNodePort %d with the service-wide probe settings; %s not applied (set the service-wide azure-load-balancer-health-probe-* annotations instead, or a port_{port}_health-probe_port of the port's own)",
		svc.Spec.HealthCheckNodePort, strings.Join(keys, ", "))
}

// reportUnsupported records a Warning event naming the annotations azlb
// does not implement, once per generation of the Service and set of keys.
func (p *Provider) reportUnsupported(svc *v1.Service, keys []string) {
	if !p.unsupported.ShouldReport(svc, keys) {
		return
	}
	p.warn(svc, EventReasonUnsupportedAnnotation,
		"Annotations azlb does not implement are ignored: %s (see docs/load-balancers.md for the supported keys)", strings.Join(keys, ", "))
}
