package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/placement"
)

// Event reasons azlb records on Services and nodes. Admin-state and
// local-service reasons live with their controllers.
const (
	EventReasonInvalidAnnotation       = "InvalidLoadBalancerAnnotation"
	EventReasonPlacementFailed         = "LoadBalancerPlacementFailed"
	EventReasonNodePlacementFailed     = "LoadBalancerNodePlacementFailed"
	EventReasonRuleLimitExceeded       = "LoadBalancerRuleLimitExceeded"
	EventReasonUnsupportedAnnotation   = "UnsupportedLoadBalancerAnnotation"
	EventReasonPublicIPNotFound        = "PublicIPNotFound"
	EventReasonBackendPoolUpdateFailed = "ClusterBackendPoolUpdateFailed"
)

// LockName labels the service-reconcile lock in
// cloudprovider_azure_lock_wait_duration_seconds.
const LockName = "service_reconcile"

// ReconcileLock is the one service-reconcile lock. Every read-modify-write
// of a load balancer or backend pool, from any controller, happens under it;
// Lock records how long the caller waited.
type ReconcileLock struct {
	mu    sync.Mutex
	clock clock.PassiveClock
}

// Lock blocks until the lock is held, recording the wait under caller.
func (l *ReconcileLock) Lock(caller string) {
	metrics.LockWithWaitMetricClock(l.clock, &l.mu, LockName, caller)
}

// Unlock releases the lock.
func (l *ReconcileLock) Unlock() { l.mu.Unlock() }

// Options are the collaborators of a Provider. Clients and Config are
// required.
type Options struct {
	Config  *config.Config
	Clients *azure.Clients
	// Recorder records Service and node events; nil drops them.
	Recorder record.EventRecorder
	// Clock drives the load balancer cache. Default: the real clock.
	Clock clock.Clock
	// Namespaces lets Service placement read namespace labels (multiple-SLB
	// serviceNamespaceSelector). nil: namespaces have no labels.
	Namespaces corelisters.NamespaceLister
	// Nodes gives pool writes the latest taints (admin state). nil: the
	// nodes the service controller passes in are used as they are.
	Nodes corelisters.NodeLister
}

// Provider implements cloudprovider.LoadBalancer for Azure Standard Load
// Balancers with IP-based (nodeIP) backend pools, in single or multiple
// Standard load balancer mode. It is safe for concurrent use: the cloud
// provider's service controller calls it from --concurrent-service-syncs
// workers.
type Provider struct {
	cfg       *config.Config
	clients   *azure.Clients
	recorder  record.EventRecorder
	clock     clock.Clock
	cache     *lbCache
	members   *membership
	pools     azure.BackendPoolClient // tracks membership of what it writes
	lock      *ReconcileLock
	placer    *placement.Placer // nil in single load balancer mode
	state     *placement.State
	committer *committer

	namespaces corelisters.NamespaceLister
	nodes      corelisters.NodeLister // nil: trust the nodes passed in
	local      LocalServices          // nil: no dedicated pools for Local Services

	perService keyMutex   // one reconcile per Service at a time
	nodeMu     sync.Mutex // serialises node placement
	rebuildMu  sync.Mutex
	rebuilt    bool
}

// New builds a Provider.
func New(opts Options) (*Provider, error) {
	if opts.Config == nil || opts.Clients == nil {
		return nil, errors.New("provider: Config and Clients are required")
	}
	cfg := opts.Config
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	rec := opts.Recorder
	if rec == nil {
		rec = &record.FakeRecorder{} // a nil channel: events are dropped
	}
	p := &Provider{
		cfg:      cfg,
		clients:  opts.Clients,
		recorder: rec,
		clock:    clk,
		cache:    newLBCache(clk, time.Duration(cfg.LoadBalancerCacheTTLInSeconds)*time.Second),
		members:  newMembership(clk, time.Duration(cfg.LoadBalancerCacheTTLInSeconds)*time.Second),
		lock:     &ReconcileLock{clock: clk},
		state:    placement.NewState(),

		namespaces: opts.Namespaces,
		nodes:      opts.Nodes,
	}
	if cfg.UseMultipleStandardLoadBalancers() {
		placer, err := placement.New(cfg.MultipleStandardLoadBalancerConfigurations, cfg.DefaultLoadBalancerName())
		if err != nil {
			return nil, fmt.Errorf("provider: %w", err)
		}
		p.placer = placer
	}
	p.pools = trackingPools{BackendPoolClient: opts.Clients.BackendPool, m: p.members}
	p.committer = newCommitter(p)
	return p, nil
}

// Lock is the service-reconcile lock shared with the admin-state controller
// and the local service updater.
func (p *Provider) Lock() *ReconcileLock { return p.lock }

// InvalidateCache forgets a cached load balancer, so the next reader GETs
// it. Other controllers call it before writing a pool of that load balancer.
func (p *Provider) InvalidateCache(lbName string) {
	p.cache.invalidate(p.lbResourceGroup(), lbName)
}

func (p *Provider) lbResourceGroup() string {
	if p.cfg.LoadBalancerResourceGroup != "" {
		return p.cfg.LoadBalancerResourceGroup
	}
	return p.cfg.ResourceGroup
}

func (p *Provider) ref(lbName string) lbRef {
	return lbRef{subscription: p.cfg.SubscriptionID, resourceGroup: p.lbResourceGroup(), name: lbName}
}

func (p *Provider) clusterName() string { return p.cfg.ClusterName }

func (p *Provider) vnetID() string {
	rg := p.cfg.VnetResourceGroup
	if rg == "" {
		rg = p.cfg.ResourceGroup
	}
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
		p.cfg.SubscriptionID, rg, p.cfg.VnetName)
}

func (p *Provider) subnetID(subnet string) string {
	return p.vnetID() + "/subnets/" + subnet
}

// configNames are the load balancer names azlb manages (public ones; each
// may have an internal twin).
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

// managedLBNames lists every load balancer name azlb may own: each public
// name and its internal twin.
func (p *Provider) managedLBNames() []string {
	var out []string
	for _, n := range p.configNames() {
		out = append(out, n, internalLBName(n))
	}
	return out
}

// getLB reads a load balancer through the cache. A missing load balancer
// is (nil, nil).
func (p *Provider) getLB(ctx context.Context, name string) (*armnetwork.LoadBalancer, error) {
	rg := p.lbResourceGroup()
	if lb, ok := p.cache.get(rg, name); ok {
		return lb, nil
	}
	lb, err := p.clients.LoadBalancer.Get(ctx, rg, name)
	if err != nil {
		if azure.Classify(err) == azure.ClassStale {
			p.cache.set(rg, name, nil)
			p.members.setLB(name, nil)
			return nil, nil
		}
		return nil, fmt.Errorf("get load balancer %s/%s: %w", rg, name, err)
	}
	p.cache.set(rg, name, lb)
	p.members.setLB(name, lb)
	return lb, nil
}

// forgetOnConflict drops the cache entry when ARM says our copy is stale.
func (p *Provider) forgetOnConflict(name string, err error) {
	if err == nil {
		return
	}
	if c := azure.Classify(err); c == azure.ClassConflict || c == azure.ClassStale {
		p.cache.invalidate(p.lbResourceGroup(), name)
	}
}

func (p *Provider) event(obj *v1.Service, eventType, reason, format string, args ...any) {
	p.recorder.Eventf(obj, eventType, reason, format, args...)
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
