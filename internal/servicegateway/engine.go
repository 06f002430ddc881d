package servicegateway

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cmhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/health"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
)

// ControllerName is the engine's name for --controllers and /healthz.
const ControllerName = "service-gateway"

// Defaults of Options.
const (
	DefaultWorkers   = 10
	DefaultOpTimeout = 5 * time.Minute
	// DefaultResync is how often every address is compared again, so that
	// a batch NRP refused is retried even if nothing changes.
	DefaultResync = 5 * time.Minute
)

// Queue names (workqueue metrics).
const (
	serviceQueueName   = "servicegateway_services"
	endpointsQueueName = "servicegateway_endpoints"
	locationsQueueName = "servicegateway_locations"
	// locationsKey is the one key of the locations queue: at most one
	// updateAddressLocations is in flight, and changes that arrive while it
	// is share the next one.
	locationsKey = "addressLocations"
)

// Options are the controller's collaborators. All but Recorder, Clock,
// OpTimeout and Resync are required.
type Options struct {
	Config *config.Config
	// Store reads and writes the per-Service load balancers (SKU Service).
	Store *lbstore.Store
	// PublicIPs and Gateway reach ARM.
	PublicIPs azure.PublicIPClient
	Gateway   azure.ServiceGatewayClient
	// Client writes finalizers and Service status.
	Client         kubernetes.Interface
	Services       coreinformers.ServiceInformer
	EndpointSlices discoveryinformers.EndpointSliceInformer
	Nodes          coreinformers.NodeInformer
	// Pods (egress pods; a label-filtered informer is enough) and
	// NatGateways turn egress on; without either it is off.
	Pods        coreinformers.PodInformer
	NatGateways azure.NatGatewayClient
	// Recorder records Service events; nil drops them.
	Recorder record.EventRecorder
	// Clock drives retries, parking and the resync. Default: the real clock.
	Clock clock.WithTicker
	// OpTimeout bounds one attempt of one Service operation and one address
	// update (DefaultOpTimeout).
	OpTimeout time.Duration
	// Resync is how often every address is compared again (DefaultResync).
	Resync time.Duration
}

func (o *Options) validate() error {
	var missing []string
	for _, f := range []struct {
		name string
		nil  bool
	}{{"Config", o.Config == nil}, {"Store", o.Store == nil}, {"PublicIPs", o.PublicIPs == nil}, {"Gateway", o.Gateway == nil},
		{"Client", o.Client == nil}, {"Services", o.Services == nil}, {"EndpointSlices", o.EndpointSlices == nil}, {"Nodes", o.Nodes == nil}} {
		if f.nil {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("servicegateway: options %v are required", missing)
	}
	if !o.Config.PodIPMode() {
		return errors.New("servicegateway: the configuration does not select pod-based backend pools (serviceGatewayEnabled)")
	}
	return nil
}

// presence is what the engine knows of an Azure resource.
type presence int8

const (
	unknown presence = iota
	absent
	present
)

// Park reasons (metric label and state).
const (
	parkTerminal = "terminal"
	parkCooldown = "cooldown"
)

// svcState is the engine's record of one Service (by UID): what it wants,
// what Azure holds as far as the engine knows, and its scheduling.
type svcState struct {
	uid      string
	ns, name string // empty for an orphan (no Service left)
	// desired is the load balancer to have; nil when there is nothing to
	// apply (a Service refused at start-up keeps what it has).
	desired *lbSpec
	gen     int64 // moves when desired changes
	// deleting: tear everything down; recreate: then start again with
	// desired (the Service became a LoadBalancer again meanwhile);
	// draining: the deletion waits for the gateway to drop its addresses.
	deleting, recreate, draining bool
	// withheld: the Service asks for a source restriction azlb cannot
	// enforce here, so none of its addresses are sent (fail closed) while
	// its load balancer, public IP and registration stay.
	withheld bool

	pip          presence
	pipID, pipIP string
	pipFamily    v1.IPFamily
	lb           presence
	applied      *lbSpec // the load balancer Azure holds matches this

	parked    string
	parkedGen int64
	started   time.Time // the current operation's first attempt ("" when idle)
	op        string
}

// Controller provisions pod-based load balancing: per Service a public IP, a
// load balancer of SKU Service and a service gateway registration, and
// keeps the gateway's address locations equal to the Services' ready
// endpoints. See the package documentation.
type Controller struct {
	cfg      *config.Config
	store    *lbstore.Store
	pips     azure.PublicIPClient
	gw       azure.ServiceGatewayClient
	client   kubernetes.Interface
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	bySvc    sliceSource
	nodes    corelisters.NodeLister
	pods     corelisters.PodLister
	nats     azure.NatGatewayClient
	recorder record.EventRecorder
	// told remembers the annotations each Service was told pod-based load
	// balancing ignores (UnsupportedAnnotation).
	told      *annotations.Reported
	clock     clock.WithTicker
	opTimeout time.Duration
	resync    time.Duration
	rg        string // the gateway's and the public IPs' resource group
	vnetID    string
	health    *health.Worker
	synced    []cache.InformerSynced

	svcQueue workqueue.TypedRateLimitingInterface[string]
	epQueue  workqueue.TypedRateLimitingInterface[string]
	locQueue workqueue.TypedRateLimitingInterface[string]
	// egQueue holds egress identities (egress.go).
	egQueue workqueue.TypedRateLimitingInterface[string]
	// regQueue has one key: the registrar (registrations.go).
	regQueue workqueue.TypedDelayingInterface[string]
	// regBatch is the most services one updateServices carries.
	regBatch int

	// mu guards everything below. No ARM or Kubernetes call is made while
	// it is held.
	mu       sync.Mutex
	states   map[string]*svcState
	byName   map[string]string              // namespace/name -> uid
	nodeSvcs map[string]map[string]struct{} // node name -> Service keys with endpoints there
	svcNodes map[string]map[string]struct{} // Service key -> node names
	nodeLocs map[string][2]netip.Addr       // node name -> locations last seen
	tracker  *diffTracker
	// refreshNRP: the mirror of the address locations may be wrong (NRP
	// refused to unregister a service it still maps); read them again.
	refreshNRP bool
	// regPending are the updateServices entries to send, oldest first;
	// regWaiting the Services with one queued or in flight (by kind);
	// regFailures the refusals and failures their operations have not read
	// yet.
	regPending  []regEntry
	regWaiting  map[string]regKind
	regFailures map[string]regFailure
	// egress: the egress identities (egress.go); podIdentity the pods seen
	// with one; podWarned the pod events already recorded.
	egress      map[string]*egressState
	podIdentity map[types.UID]egressPod
	podWarned   map[string]struct{}

	initOnce    sync.Once
	initialized chan struct{}
	// working counts the work items being processed; svcBusy those of
	// the Service workers.
	working atomic.Int32
	svcBusy atomic.Int32
	// egBusy counts the egress workers processing an identity.
	egBusy atomic.Int32
}

// busy reports whether a worker is processing an item.
func (e *Controller) busy() bool { return e.working.Load() > 0 }

// NewController builds the engine and registers its informer handlers; call Run.
func NewController(o Options) (*Controller, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	rec := o.Recorder
	if rec == nil {
		rec = &record.FakeRecorder{}
	}
	e := &Controller{
		cfg:         o.Config,
		store:       o.Store,
		pips:        o.PublicIPs,
		gw:          o.Gateway,
		client:      o.Client,
		services:    o.Services.Lister(),
		slices:      o.EndpointSlices.Lister(),
		nodes:       o.Nodes.Lister(),
		recorder:    rec,
		told:        annotations.NewReported(annotations.MaxReported),
		clock:       clk,
		opTimeout:   o.OpTimeout,
		resync:      o.Resync,
		rg:          o.Config.ResourceGroup,
		vnetID:      names.VirtualNetworkID(o.Config.NetworkSubscriptionID(), vnetRG(o.Config), o.Config.VnetName),
		health:      &health.Worker{Clock: clk},
		states:      map[string]*svcState{},
		byName:      map[string]string{},
		nodeSvcs:    map[string]map[string]struct{}{},
		svcNodes:    map[string]map[string]struct{}{},
		nodeLocs:    map[string][2]netip.Addr{},
		tracker:     newDiffTracker(),
		regBatch:    o.Config.UpdateServicesBatchSize(),
		regWaiting:  map[string]regKind{},
		regFailures: map[string]regFailure{},
		egress:      map[string]*egressState{},
		podIdentity: map[types.UID]egressPod{},
		podWarned:   map[string]struct{}{},
		nats:        o.NatGateways,
		initialized: make(chan struct{}),
	}
	if o.Pods != nil && o.NatGateways != nil {
		e.pods = o.Pods.Lister()
	}
	if e.opTimeout <= 0 {
		e.opTimeout = DefaultOpTimeout
	}
	if e.resync <= 0 {
		e.resync = DefaultResync
	}
	e.svcQueue = workqueue.NewTypedRateLimitingQueueWithConfig[string](newBackoff(serviceBackoffBase, serviceBackoffCap),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: serviceQueueName, Clock: clk})
	e.epQueue = workqueue.NewTypedRateLimitingQueueWithConfig[string](newBackoff(serviceBackoffBase, serviceBackoffCap),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: endpointsQueueName, Clock: clk})
	e.locQueue = workqueue.NewTypedRateLimitingQueueWithConfig[string](newBackoff(locationsBackoffBase, locationsBackoffCap),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: locationsQueueName, Clock: clk})
	e.egQueue = workqueue.NewTypedRateLimitingQueueWithConfig[string](newBackoff(serviceBackoffBase, serviceBackoffCap),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: egressQueueName, Clock: clk})
	e.regQueue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: registrationsQueueName, Clock: clk})
	shutdown := e.shutDownQueues
	// A Service's slices are found through an index, not by scanning the
	// namespace; an informer already running cannot take one.
	e.bySvc = listerSlices{e.slices}
	if err := o.EndpointSlices.Informer().AddIndexers(cache.Indexers{byServiceIndex: sliceServiceKey}); err == nil {
		e.bySvc = indexedSlices{o.EndpointSlices.Informer().GetIndexer()}
	} else if !strings.Contains(err.Error(), "conflict") {
		klog.Background().V(2).Info("EndpointSlice index not added; listing by label", "err", err)
	}
	sliceReg, err := o.EndpointSlices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.onSlice,
		UpdateFunc: func(old, cur any) { e.onSlice(old); e.onSlice(cur) },
		DeleteFunc: e.onSlice,
	})
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("servicegateway: register EndpointSlice handler: %w", err)
	}
	nodeReg, err := o.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.onNode,
		UpdateFunc: func(_, cur any) { e.onNode(cur) },
		DeleteFunc: e.onNode,
	})
	if err != nil {
		shutdown()
		return nil, fmt.Errorf("servicegateway: register Node handler: %w", err)
	}
	e.synced = []cache.InformerSynced{sliceReg.HasSynced, nodeReg.HasSynced, o.Services.Informer().HasSynced}
	if e.pods != nil {
		podReg, err := o.Pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    e.onPod,
			UpdateFunc: func(_, cur any) { e.onPod(cur) },
			DeleteFunc: e.onPodDeleted,
		})
		if err != nil {
			shutdown()
			return nil, fmt.Errorf("servicegateway: register Pod handler: %w", err)
		}
		e.synced = append(e.synced, podReg.HasSynced)
	}
	return e, nil
}

func vnetRG(c *config.Config) string {
	if c.VnetResourceGroup != "" {
		return c.VnetResourceGroup
	}
	return c.ResourceGroup
}

// Name is ControllerName.
func (e *Controller) Name() string { return ControllerName }

// HealthChecker reports the engine unhealthy until it has initialized, and
// when one piece of work runs longer than health.StuckAfter.
func (e *Controller) HealthChecker() cmhealthz.UnnamedHealthChecker { return e.health }

// Initialized is closed once the engine has read the state of Azure and
// the cluster and is serving.
func (e *Controller) Initialized() <-chan struct{} { return e.initialized }

// Run waits for the informers, initializes from Azure's state (retrying
// until it can), then works on up to workers Services at once
// (DefaultWorkers when not positive) until ctx ends. It returns when every
// worker has stopped (an ARM call in flight is waited for).
func (e *Controller) Run(ctx context.Context, workers int) error {
	if workers <= 0 {
		workers = DefaultWorkers
	}
	log := klog.FromContext(ctx).WithName("servicegateway")
	ctx = klog.NewContext(ctx, log)
	defer e.shutDownQueues()
	if !cache.WaitForNamedCacheSyncWithContext(ctx, e.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("servicegateway: informers did not sync")
	}
	if !e.initialize(ctx) {
		return nil
	}
	log.Info("Starting pod-based load balancing (service gateway)", "gateway", e.rg+"/"+names.ServiceGateway, "workers", workers)
	e.health.Start()
	defer e.health.Stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for e.processNextService(ctx) {
			}
		})
	}
	wg.Go(func() {
		for e.processNextEndpoints(ctx) {
		}
	})
	wg.Go(func() {
		for e.processNextLocations(ctx) {
		}
	})
	wg.Go(func() {
		for e.processNextRegistrations(ctx) {
		}
	})
	for range workers {
		wg.Go(func() {
			for e.processNextEgress(ctx) {
			}
		})
	}
	wg.Go(func() { e.housekeeping(ctx) })
	<-ctx.Done()
	e.shutDownQueues()
	wg.Wait()
	log.Info("Stopped pod-based load balancing")
	return nil
}

// shutDownQueues stops every work queue.
func (e *Controller) shutDownQueues() {
	e.svcQueue.ShutDown()
	e.epQueue.ShutDown()
	e.locQueue.ShutDown()
	e.regQueue.ShutDown()
	e.egQueue.ShutDown()
}

// housekeeping refreshes the gauges every 30 s and marks every address for
// comparison every Resync.
func (e *Controller) housekeeping(ctx context.Context) {
	gauges := e.clock.NewTicker(gaugeInterval)
	defer gauges.Stop()
	resync := e.clock.NewTicker(e.resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-gauges.C():
			e.refreshGauges()
		case <-resync.C():
			e.mu.Lock()
			e.tracker.Resync()
			e.mu.Unlock()
			e.locQueue.Add(locationsKey)
		}
	}
}

const gaugeInterval = 30 * time.Second

// onSlice queues the Service of an EndpointSlice (tombstones included).
func (e *Controller) onSlice(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s == nil {
		return
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		e.epQueue.Add(serviceKey(s.Namespace, name))
	}
}

// onNode queues the Services with endpoints on a node whose locations
// changed (added, deleted, InternalIPs changed).
func (e *Controller) onNode(obj any) {
	deleted := false
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	n, ok := obj.(*v1.Node)
	if !ok || n == nil {
		return
	}
	var locs [2]netip.Addr
	if !deleted && n.DeletionTimestamp == nil {
		if _, err := e.nodes.Get(n.Name); err == nil {
			locs = locationsOf(n)
		}
	}
	e.mu.Lock()
	prev, known := e.nodeLocs[n.Name]
	if locs == ([2]netip.Addr{}) {
		delete(e.nodeLocs, n.Name)
	} else {
		e.nodeLocs[n.Name] = locs
	}
	var keys []string
	if !known || prev != locs {
		for k := range e.nodeSvcs[n.Name] {
			keys = append(keys, k)
		}
	}
	e.mu.Unlock()
	for _, k := range keys {
		e.epQueue.Add(k)
	}
	if !known || prev != locs {
		e.queueAllEgress()
	}
}
