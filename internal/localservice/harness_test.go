package localservice

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

const (
	testLB       = "kubernetes"
	otherLB      = "lb-2"
	testInterval = 30 * time.Second
	pollTimeout  = 10 * time.Second
)

// harness is an Updater wired to a seeded in-process ARM emulator (through
// real azure clients on a fake clock), a fake clientset with informers, a
// test lock and a capturing event recorder.
type harness struct {
	t       testing.TB
	ctx     context.Context
	env     *devenv.Env
	clients *azure.Clients // the updater's: fake clock, throttle gates
	inspect *azure.Clients // the test's: real clock, own gates
	clock   *clocktesting.FakeClock
	kube    *fake.Clientset
	factory informers.SharedInformerFactory
	rec     *eventLog
	pools   *hookedBackend
	store   *lbstore.Store
	u       *Updater
	source  string
}

type harnessOptions struct {
	maxRetries *int
	emulator   emulator.Options
	mutate     func(*Options)
}

var sourceSeq atomic.Int64

func newHarness(t testing.TB, ho harnessOptions) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if ho.emulator.Throttle == (emulator.Throttle{}) {
		// The updater's tests count calls, not limits: unlimited unless a
		// test asks for limits.
		ho.emulator.Throttle = emulator.NoThrottle
	}
	env, err := devenv.Start(ctx, t.TempDir(), ho.emulator, func(c *config.Config) {
		for _, lb := range []string{testLB, otherLB} {
			c.MultipleStandardLoadBalancerConfigurations = append(c.MultipleStandardLoadBalancerConfigurations,
				config.MultipleStandardLoadBalancerConfiguration{Name: lb})
		}
	})
	if err != nil {
		t.Fatalf("devenv: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	testutil.NotThrottled(t, env.Emulator(), ho.emulator)
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	source := fmt.Sprintf("localservice-test-%d", sourceSeq.Add(1))
	clients, err := env.Clients(ctx, azure.ClientOptions{Clock: fc, Source: source, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatalf("clients: %v", err)
	}
	t.Cleanup(clients.Close)
	inspect, err := env.Clients(ctx, azure.ClientOptions{Source: source + "-inspect"})
	if err != nil {
		t.Fatalf("inspect clients: %v", err)
	}
	t.Cleanup(inspect.Close)

	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	h := &harness{
		t: t, ctx: ctx, env: env, clients: clients, inspect: inspect, clock: fc, kube: kube, factory: factory,
		rec: newEventLog(), source: source,
	}
	h.pools = &hookedBackend{client: clients.BackendPool}
	h.store = testutil.StartStore(t, lbstore.Options{Config: env.Config, Clock: fc, LoadBalancers: clients.LoadBalancer, Pools: (*hookedPools)(h.pools)})
	opts := Options{
		Clock:          fc,
		Recorder:       h.rec,
		Store:          h.store,
		Nodes:          factory.Core().V1().Nodes(),
		Services:       factory.Core().V1().Services(),
		EndpointSlices: factory.Discovery().V1().EndpointSlices(),
		Source:         source,
	}
	opts = FromConfig(env.Config, opts)
	opts.Interval = testInterval
	opts.MaxRetries = ho.maxRetries
	if ho.mutate != nil {
		ho.mutate(&opts)
	}
	u, err := NewUpdater(opts)
	if err != nil {
		t.Fatalf("NewUpdater: %v", err)
	}
	t.Cleanup(u.queue.ShutDown) // tests that drive it by hand never Run it
	h.u = u
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer %v did not sync", typ)
		}
	}
	h.createLB(testLB)
	// The store lists the load balancers once, on first use; do it now, as
	// a running controller has long done.
	if _, err := h.store.Managed(ctx); err != nil {
		t.Fatalf("managed load balancers: %v", err)
	}
	env.Emulator().ResetRequests()
	return h
}

// createLB creates a load balancer with an internal frontend and the
// cluster pool, through the store (so its cache knows it).
func (h *harness) createLB(name string) {
	h.t.Helper()
	subnet := names.SubnetID(backendpool.PolicyFromConfig(h.env.Config).VNetID, devenv.SubnetName)
	_, err := h.store.UpdateLB(h.ctx, "test", name, lbstore.UpdateOptions{Create: true}, func(lb *armnetwork.LoadBalancer) (bool, error) {
		lb.Properties.FrontendIPConfigurations = []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe"),
			Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)},
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic)}}}
		lb.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{{Name: to.Ptr(h.env.Config.ClusterName)}}
		return true, nil
	})
	if err != nil {
		h.t.Fatalf("create load balancer %s: %v", name, err)
	}
}

func (h *harness) rg() string { return h.env.Config.ResourceGroup }

// setPools makes the load balancer hold exactly the pools (besides the
// cluster pool and any other Service's): what the Service reconcile does
// when it places, moves or removes a Local Service.
func (h *harness) setPools(lbName string, add, remove []string) {
	h.t.Helper()
	_, err := h.store.UpdateLB(h.ctx, "test", lbName, lbstore.UpdateOptions{}, func(lb *armnetwork.LoadBalancer) (bool, error) {
		changed := false
		for _, name := range remove {
			for i, p := range lb.Properties.BackendAddressPools {
				if strings.EqualFold(*p.Name, name) {
					lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools[:i:i], lb.Properties.BackendAddressPools[i+1:]...)
					changed = true
					break
				}
			}
		}
		for _, name := range add {
			found := false
			for _, p := range lb.Properties.BackendAddressPools {
				found = found || strings.EqualFold(*p.Name, name)
			}
			if !found {
				lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, &armnetwork.BackendAddressPool{Name: to.Ptr(name)})
				changed = true
			}
		}
		return changed, nil
	})
	if err != nil {
		h.t.Fatalf("pools of %s: %v", lbName, err)
	}
}

// poolEntries returns name=ip/adminState of every entry, sorted.
func (h *harness) poolEntries(pool string) []string {
	h.t.Helper()
	p, err := h.inspect.BackendPool.Get(h.ctx, h.rg(), h.poolLB(pool), pool)
	if err != nil {
		h.t.Fatalf("get pool %s: %v", pool, err)
	}
	var out []string
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		out = append(out, fmt.Sprintf("%s=%s/%s", ptr.Deref(a.Name, ""), ptr.Deref(a.Properties.IPAddress, ""), backendpool.AdminStateOf(a)))
	}
	sort.Strings(out)
	return out
}

// poolNodes returns the node names in the pool, sorted.
func (h *harness) poolNodes(pool string) []string {
	h.t.Helper()
	var out []string
	for _, e := range h.poolEntries(pool) {
		name, _, _ := strings.Cut(e, "=")
		out = append(out, name)
	}
	return out
}

// armCalls counts the ARM requests to the pool (GET and PUT) in the
// emulator log since the last reset.
func (h *harness) armCalls(pool string) (gets, puts int) {
	for _, r := range h.env.Emulator().Requests() {
		if r.Kind != "arm" || !strings.HasSuffix(strings.ToLower(r.Path), "/backendaddresspools/"+strings.ToLower(pool)) {
			continue
		}
		switch r.Method {
		case http.MethodGet:
			gets++
		case http.MethodPut:
			puts++
		}
	}
	return gets, puts
}

func (h *harness) resetRequests() { h.env.Emulator().ResetRequests() }

// fault injects an emulator fault on the pool.
func (h *harness) fault(method, pool string, f emulator.Fault) {
	h.t.Helper()
	f.Method = method
	f.PathRegex = "(?i)/backendAddressPools/" + pool + "$"
	if _, err := h.env.Emulator().AddFault(f); err != nil {
		h.t.Fatalf("add fault: %v", err)
	}
}

// --- Kubernetes objects ---

func (h *harness) addNode(name, ip string, mutate ...func(*v1.Node)) {
	h.t.Helper()
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.NodeSpec{ProviderID: "azure:///subscriptions/x/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/" + name},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}},
	}
	for _, m := range mutate {
		m(n)
	}
	if _, err := h.kube.CoreV1().Nodes().Create(h.ctx, n, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create node: %v", err)
	}
	h.eventually("node "+name+" in lister", func() bool { _, err := h.u.nodes.Get(name); return err == nil })
}

func (h *harness) addService(ns, name string, opts ...testutil.ServiceOption) {
	h.t.Helper()
	svc := testutil.Service(ns, name, append([]testutil.ServiceOption{testutil.Local}, opts...)...)
	if _, err := h.kube.CoreV1().Services(ns).Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create service: %v", err)
	}
	h.eventually("service in lister", func() bool { _, err := h.u.services.Services(ns).Get(name); return err == nil })
}

func (h *harness) deleteService(ns, name string) {
	h.t.Helper()
	if err := h.kube.CoreV1().Services(ns).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("delete service: %v", err)
	}
	h.eventually("service gone from lister", func() bool { _, err := h.u.services.Services(ns).Get(name); return err != nil })
}

// register does what the Service reconcile does when it places a Local
// Service: it creates the Service's pools on the load balancer.
func (h *harness) register(key, lb string, families ...v1.IPFamily) {
	h.t.Helper()
	if len(families) == 0 {
		families = []v1.IPFamily{v1.IPv4Protocol}
	}
	var pools []string
	for _, f := range families {
		pools = append(pools, poolOf(key, f))
	}
	h.setPools(lb, pools, nil)
}

// unregister removes the Service's pools from the load balancer (deleted,
// moved away, or now ExternalTrafficPolicy=Cluster).
func (h *harness) unregister(key, lb string) {
	h.t.Helper()
	h.setPools(lb, nil, []string{poolOf(key, v1.IPv4Protocol), poolOf(key, v1.IPv6Protocol)})
}

// poolOf is the Service's dedicated pool of the family.
func poolOf(key string, f v1.IPFamily) string {
	ns, name, _ := strings.Cut(key, "/")
	return names.LocalServicePool(ns, name, f)
}

// poolLB is where the store has the pool (the test load balancer if none).
func (h *harness) poolLB(pool string) string {
	if lb, ok, err := h.store.FindPool(h.ctx, pool); err == nil && ok {
		return lb
	}
	return testLB
}

// localService creates a placed Local Service with its pool.
func (h *harness) localService(ns, name string) string {
	h.t.Helper()
	h.addService(ns, name)
	key := ns + "/" + name
	h.register(key, testLB)
	return key
}

// setEndpoints makes the Service's one EndpointSlice hold a ready endpoint
// on each node, and waits for the updater to queue that desired state.
func (h *harness) setEndpoints(ns, name string, nodes ...string) {
	h.t.Helper()
	h.setSlice(ns, name, name+"-slice", nodes...)
	h.waitQueued(ns+"/"+name, nodes...)
}

// setSlice writes one EndpointSlice of the Service (without waiting).
func (h *harness) setSlice(ns, name, slice string, nodes ...string) {
	h.t.Helper()
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: slice, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range nodes {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.%d.%d", len(n), i+1)},
			NodeName:   to.Ptr(n),
			Conditions: discoveryv1.EndpointConditions{Ready: to.Ptr(true)},
		})
	}
	slices := h.kube.DiscoveryV1().EndpointSlices(ns)
	if cur, err := slices.Get(h.ctx, slice, metav1.GetOptions{}); err == nil {
		es.ResourceVersion = cur.ResourceVersion
		if _, err := slices.Update(h.ctx, es, metav1.UpdateOptions{}); err != nil {
			h.t.Fatalf("update slice: %v", err)
		}
		return
	}
	if _, err := slices.Create(h.ctx, es, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create slice: %v", err)
	}
}

// waitQueued waits until the updater has a pending change for the
// Service's IPv4 pool and the lister shows the endpoint nodes (an attempt
// reads them from there).
func (h *harness) waitQueued(key string, nodes ...string) {
	h.t.Helper()
	want := sets.New(nodes...)
	ns, name, _ := strings.Cut(key, "/")
	h.eventually("queued "+key+" = "+fmt.Sprint(nodes), func() bool {
		st := h.queued(key, poolOf(key, v1.IPv4Protocol))
		got, err := backendpool.EndpointNodes(h.u.slices, ns, name)
		return st != nil && st.pending && err == nil && got.Equal(want)
	})
}

// queued returns a copy of the pool's state, or nil.
func (h *harness) queued(key, pool string) *poolState {
	h.u.mu.Lock()
	defer h.u.mu.Unlock()
	if st, ok := h.u.pools[strings.ToLower(pool)]; ok && st.service == key {
		c := *st
		return &c
	}
	return nil
}

// queueList copies the pools' states, sorted by pool.
func (h *harness) queueList() []*poolState {
	h.u.mu.Lock()
	defer h.u.mu.Unlock()
	var out []*poolState
	for _, st := range h.u.pools {
		c := *st
		out = append(out, &c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pool < out[j].pool })
	return out
}

func (h *harness) queueKeys() []string {
	var out []string
	for _, st := range h.queueList() {
		out = append(out, st.service+"@"+st.pool)
	}
	return out
}

// process applies what is due now: it waits until a pool is due (the
// delaying queue hands keys over asynchronously), then runs one batch.
func (h *harness) process() {
	h.t.Helper()
	h.eventually("a pool due", func() bool { return h.u.queue.Len() > 0 })
	h.u.processNextWorkItem(h.ctx)
}

// tick advances the fake clock by d and applies what is then due (at least
// one pool must be).
func (h *harness) tick(d time.Duration) {
	h.t.Helper()
	h.clock.Step(d)
	h.process()
}

// quietTick advances the fake clock by d when nothing may be due: no pool
// is processed (one that became due by mistake is left for the next tick,
// whose ARM call counts then show it).
func (h *harness) quietTick(d time.Duration) {
	h.t.Helper()
	h.clock.Step(d)
	if n := h.u.queue.Len(); n != 0 {
		h.t.Fatalf("%d pool(s) due during a quiet tick", n)
	}
}

// eventually polls cond until it holds or the deadline passes (informers
// deliver asynchronously).
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, pollTimeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		h.t.Fatalf("timed out waiting for %s", what)
	}
}

// --- metrics ---

// opMetrics returns the number of observations and failures of the
// updater's operation metric for the harness's source.
func (h *harness) opMetrics() (observed, failed int) {
	return opMetricsFor(h.t, h.source)
}

func opMetricsFor(t testing.TB, source string) (observed, failed int) {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	match := func(m *dto.Metric) bool {
		var src, req bool
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case metrics.LabelSource:
				src = l.GetValue() == source
			case metrics.LabelRequest:
				req = l.GetValue() == MetricPrefix+"_"+MetricRequest
			}
		}
		return src && req
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if !match(m) {
				continue
			}
			switch mf.GetName() {
			case metrics.OpDurationName:
				observed += int(m.GetHistogram().GetSampleCount())
			case metrics.OpFailureCountName:
				failed += int(m.GetCounter().GetValue())
			}
		}
	}
	return observed, failed
}

// --- collaborators ---

// hookedBackend wraps the store's backend pool client: the real client,
// with an optional hook around every call, counting attempts.
type hookedBackend struct {
	client azure.BackendPoolClient
	mu     sync.Mutex
	hook   func(op, pool string, call func() error) error
	calls  map[string]int // "get"/"put" -> attempts
}

func (b *hookedBackend) setHook(hook func(op, pool string, call func() error) error) {
	b.mu.Lock()
	b.hook = hook
	b.mu.Unlock()
}

func (b *hookedBackend) attempts(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[op]
}

func (b *hookedBackend) run(op, pool string, call func() error) error {
	b.mu.Lock()
	if b.calls == nil {
		b.calls = map[string]int{}
	}
	b.calls[op]++
	hook := b.hook
	b.mu.Unlock()
	if hook == nil {
		return call()
	}
	return hook(op, pool, call)
}

type hookedPools hookedBackend

func (p *hookedPools) Get(ctx context.Context, rg, lb, pool string) (*armnetwork.BackendAddressPool, error) {
	var out *armnetwork.BackendAddressPool
	err := (*hookedBackend)(p).run("get", pool, func() error {
		var err error
		out, err = p.client.Get(ctx, rg, lb, pool)
		return err
	})
	return out, err
}

func (p *hookedPools) List(ctx context.Context, rg, lb string) ([]*armnetwork.BackendAddressPool, error) {
	return p.client.List(ctx, rg, lb)
}

func (p *hookedPools) CreateOrUpdate(ctx context.Context, rg, lb, pool string, bp armnetwork.BackendAddressPool, etag string) (*armnetwork.BackendAddressPool, error) {
	var out *armnetwork.BackendAddressPool
	err := (*hookedBackend)(p).run("put", pool, func() error {
		var err error
		out, err = p.client.CreateOrUpdate(ctx, rg, lb, pool, bp, etag)
		return err
	})
	return out, err
}

func (p *hookedPools) Delete(ctx context.Context, rg, lb, pool string) error {
	return p.client.Delete(ctx, rg, lb, pool)
}

// eventLog records events with the object they are about, and forwards
// them to a record.FakeRecorder (whose text format they keep).
type eventLog struct {
	fake   *record.FakeRecorder
	mu     sync.Mutex
	events []event
}

type event struct {
	object, typ, reason, message string
}

func (e event) String() string {
	return e.object + " " + e.typ + " " + e.reason + " " + e.message
}

func newEventLog() *eventLog { return &eventLog{fake: record.NewFakeRecorder(10000)} }

func (l *eventLog) add(obj runtime.Object, typ, reason, msg string) {
	key := ""
	if m, ok := obj.(metav1.Object); ok {
		key = m.GetNamespace() + "/" + m.GetName()
	}
	l.mu.Lock()
	l.events = append(l.events, event{object: key, typ: typ, reason: reason, message: msg})
	l.mu.Unlock()
}

func (l *eventLog) Event(obj runtime.Object, typ, reason, msg string) {
	l.add(obj, typ, reason, msg)
	l.fake.Event(obj, typ, reason, msg)
}

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	l.add(obj, typ, reason, fmt.Sprintf(format, args...))
	l.fake.Eventf(obj, typ, reason, format, args...)
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, typ, reason, format string, args ...any) {
	l.Eventf(obj, typ, reason, format, args...)
}

// take returns and clears the recorded events.
// count is the number of events not taken yet.
func (l *eventLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}

func (l *eventLog) take() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	for len(l.fake.Events) > 0 {
		<-l.fake.Events
	}
	return out
}

// reasons lists "object reason" of events.
func reasons(evs []event) []string {
	out := make([]string, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.object+" "+e.reason)
	}
	return out
}

// testConfig loads an azure.json for the harness's emulator with extra
// fields, through config.Load.
func testConfig(t testing.TB, env *devenv.Env, extra string) *config.Config {
	t.Helper()
	raw := strings.TrimSpace(string(devenv.ConfigJSON(env.Server.URL(), env.CAFile)))
	raw = strings.TrimSuffix(raw, "}") + "," + extra + "}"
	cfg, err := config.Load(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("config.Load: %v", err)
	}
	return cfg
}
