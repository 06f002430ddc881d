package servicegateway

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/informers"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/testutil"
)

func TestMain(m *testing.M) {
	// The engine logs every step and retry; keep test output readable (set
	// AZLB_TEST_LOGS=1 to see them).
	if os.Getenv("AZLB_TEST_LOGS") == "" {
		klog.SetLogger(logr.Discard())
	}
	goleak.VerifyTestMain(m)
}

const waitFor = 10 * time.Second

// harness runs a Controller against FakeARM (load balancers through a real
// lbstore.Store, public IPs, the service gateway), a fake clientset and a
// fake clock.
type harness struct {
	t      testing.TB
	arm    *testutil.FakeARM
	cfg    *config.Config
	cs     *fake.Clientset
	clk    *testclock.FakeClock
	events *testutil.EventLog
	lb     *Balancer
	engine *Controller
	opts   func(*Options)

	stop func()
	// clients, when set, reach the ARM emulator instead of FakeARM.
	clients *azure.Clients
	// realClock runs the engine on the real clock (benchmarks: retries
	// happen without a test stepping time).
	realClock bool
	// sliceInformer, when set, replaces the clientset's EndpointSlice
	// informer (the coalescing benchmark feeds it directly).
	sliceInformer discoveryinformers.EndpointSliceInformer

	hookMu sync.Mutex
	before func(testutil.Call)
	fail   func(testutil.Call) error
}

// setBefore runs fn at the start of every ARM call (nil: nothing).
func (h *harness) setBefore(fn func(testutil.Call)) {
	h.hookMu.Lock()
	h.before = fn
	h.hookMu.Unlock()
}

// holdFirst makes the first ARM call with op (from now on) wait until
// release is called; reached is closed when it has started waiting.
func (h *harness) holdFirst(op string) (reached <-chan struct{}, release func()) {
	at, free := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h.setBefore(func(c testutil.Call) {
		if c.Op != op {
			return
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(at)
			<-free
		}
	})
	release = sync.OnceFunc(func() { close(free) })
	h.t.Cleanup(release) // a failed test must not leave the call waiting
	return at, release
}

// setFail fails ARM calls fn returns an error for (nil: none).
func (h *harness) setFail(fn func(testutil.Call) error) {
	h.hookMu.Lock()
	h.fail = fn
	h.hookMu.Unlock()
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	h := &harness{
		t:      t,
		arm:    testutil.NewFakeARM(),
		cfg:    testutil.FakeConfig(t, devenv.PodIP),
		cs:     fake.NewSimpleClientset(), //nolint:staticcheck // SA1019: NewClientset tracks managed fields, which costs the benchmarks most of their time; the engine uses no apply
		clk:    testclock.NewFakeClock(time.Unix(1_700_000_000, 0)),
		events: &testutil.EventLog{},
		lb:     NewBalancer(),
	}
	// The API server deletes an object marked for deletion once its last
	// finalizer is gone; the fake clientset does not.
	h.cs.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc, ok := a.(k8stesting.UpdateAction).GetObject().(*v1.Service)
		if !ok || svc.DeletionTimestamp == nil || len(svc.Finalizers) > 0 {
			return false, nil, nil
		}
		err := h.cs.Tracker().Delete(v1.SchemeGroupVersion.WithResource("services"), svc.Namespace, svc.Name)
		return true, svc, err
	})
	h.cs.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p, ok := a.(k8stesting.UpdateAction).GetObject().(*v1.Pod)
		if !ok || p.DeletionTimestamp == nil || len(p.Finalizers) > 0 {
			return false, nil, nil
		}
		err := h.cs.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name)
		return true, p, err
	})
	h.arm.Before = func(c testutil.Call) {
		h.hookMu.Lock()
		fn := h.before
		h.hookMu.Unlock()
		if fn != nil {
			fn(c)
		}
	}
	h.arm.Fail = func(c testutil.Call) error {
		h.hookMu.Lock()
		fn := h.fail
		h.hookMu.Unlock()
		if fn != nil {
			return fn(c)
		}
		return nil
	}
	t.Cleanup(h.shutdown)
	return h
}

// start builds and runs an engine (with a new store, as a new process
// would) and waits until it has initialized.
func (h *harness) start() {
	h.t.Helper()
	e := h.run()
	select {
	case <-e.Initialized():
	case <-time.After(waitFor):
		h.t.Fatal("engine did not initialize")
	}
}

// run builds and runs an engine without waiting for it to initialize.
func (h *harness) run() *Controller {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	lbs, pools, pips, gw := h.arm.LoadBalancers(), h.arm.Pools(), h.arm.PublicIPs(), h.arm.ServiceGateway()
	if h.clients != nil {
		lbs, pools, pips, gw = h.clients.LoadBalancer, h.clients.BackendPool, h.clients.PublicIP, h.clients.ServiceGateway
	}
	store, err := lbstore.New(lbstore.Options{Config: h.cfg, LoadBalancers: lbs, Pools: pools, Clock: h.clk})
	if err != nil {
		h.t.Fatal(err)
	}
	f := informers.NewSharedInformerFactory(h.cs, 0)
	o := Options{
		Config: h.cfg, Store: store, PublicIPs: pips, Gateway: gw, Client: h.cs,
		Services: f.Core().V1().Services(), EndpointSlices: f.Discovery().V1().EndpointSlices(), Nodes: f.Core().V1().Nodes(),
		Recorder: h.events, Clock: h.clk, OpTimeout: 5 * time.Second,
	}
	if h.sliceInformer != nil {
		o.EndpointSlices = h.sliceInformer
	}
	if h.clients != nil {
		o.Pods, o.NatGateways = f.Core().V1().Pods(), h.clients.NatGateway
	}
	if h.realClock {
		o.Clock = clock.RealClock{}
	}
	if h.opts != nil {
		h.opts(&o)
	}
	e, err := NewController(o)
	if err != nil {
		h.t.Fatal(err)
	}
	h.engine = e
	h.lb.Attach(e)
	var wg sync.WaitGroup
	wg.Go(func() { store.Run(ctx) })
	f.Start(ctx.Done())
	if h.sliceInformer != nil {
		wg.Go(func() { h.sliceInformer.Informer().RunWithContext(ctx) })
	}
	wg.Go(func() {
		if err := e.Run(ctx, DefaultWorkers); err != nil {
			h.t.Errorf("Run: %v", err)
		}
	})
	h.stop = func() {
		cancel()
		wg.Wait()
		f.Shutdown()
	}
	return e
}

func (h *harness) shutdown() {
	if h.stop != nil {
		h.stop()
		h.stop = nil
	}
}

// restart stops the engine and starts a new one on the same cluster and
// Azure.
func (h *harness) restart() {
	h.t.Helper()
	h.shutdown()
	h.lb = NewBalancer()
	h.start()
}

// service creates a LoadBalancer Service (UUID UID) and hands it to
// EnsureLoadBalancer as the service controller would.
func (h *harness) service(ns, name string, opts ...func(*v1.Service)) *v1.Service {
	h.t.Helper()
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uuid.NewUUID()},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}},
		},
	}
	for _, o := range opts {
		o(svc)
	}
	created, err := h.cs.CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return created
}

// ensure calls EnsureLoadBalancer with the Service as the API holds it.
func (h *harness) ensure(svc *v1.Service) error {
	h.t.Helper()
	return ensureErr(h.lb.EnsureLoadBalancer(context.Background(), "kubernetes", h.get(svc), nil))
}

func ensureErr(_ *v1.LoadBalancerStatus, err error) error { return err }

// get reads a Service as the API holds it (nil when gone).
func (h *harness) get(svc *v1.Service) *v1.Service {
	h.t.Helper()
	cur, err := h.cs.CoreV1().Services(svc.Namespace).Get(context.Background(), svc.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cur
}

// remove deletes a Service the way the API server does with finalizers:
// it sets the deletion timestamp; the Service goes when the finalizers do.
func (h *harness) remove(svc *v1.Service) {
	h.t.Helper()
	cur := h.get(svc)
	now := metav1.Now()
	cur.DeletionTimestamp = &now
	if _, err := h.cs.CoreV1().Services(svc.Namespace).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if err := h.lb.EnsureLoadBalancerDeleted(context.Background(), "kubernetes", cur); err != nil {
		h.t.Fatal(err)
	}
}

// node creates a node with InternalIPs.
func (h *harness) node(name string, ips ...string) {
	h.t.Helper()
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	if _, err := h.cs.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// ep is one endpoint of a slice.
type ep struct {
	node  string
	addrs []string
	ready *bool
}

func readyOn(node string, addrs ...string) ep { return ep{node: node, addrs: addrs} }
func notReadyOn(node string, addrs ...string) ep {
	return ep{node: node, addrs: addrs, ready: ptr.To(false)}
}

// slice creates or replaces the EndpointSlice <service>-<suffix> of a
// Service, owned by it.
func (h *harness) slice(svc *v1.Service, suffix string, typ discoveryv1.AddressType, eps ...ep) {
	h.t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace, Name: svc.Name + "-" + suffix,
			Labels:          map[string]string{discoveryv1.LabelServiceName: svc.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}},
		},
		AddressType: typ,
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: e.addrs, NodeName: ptr.To(e.node), Conditions: discoveryv1.EndpointConditions{Ready: e.ready}})
	}
	ctx := context.Background()
	if _, err := h.cs.DiscoveryV1().EndpointSlices(svc.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		if _, err := h.cs.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *harness) deleteSlice(svc *v1.Service, suffix string) {
	h.t.Helper()
	if err := h.cs.DiscoveryV1().EndpointSlices(svc.Namespace).Delete(context.Background(), svc.Name+"-"+suffix, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// uid is a Service's engine key.
func uid(svc *v1.Service) string { return uidKey(svc.UID) }

// waitAddresses waits until the gateway holds exactly these lines (see
// FakeARM.Addresses).
func (h *harness) waitAddresses(want ...string) {
	h.t.Helper()
	slices.Sort(want)
	var got []string
	testutil.Poll(h.t, waitFor, fmt.Sprintf("addresses %q", want), func() bool {
		got = h.arm.Addresses()
		return slices.Equal(got, want)
	})
}

// waitReady waits until the Service is provisioned: registered, with its
// ingress IP.
func (h *harness) waitReady(svc *v1.Service) string {
	h.t.Helper()
	var ip string
	testutil.Poll(h.t, waitFor, "Service "+svc.Name+" ready", func() bool {
		cur := h.get(svc)
		if cur == nil || len(cur.Status.LoadBalancer.Ingress) == 0 || !h.registered(svc) {
			return false
		}
		ip = cur.Status.LoadBalancer.Ingress[0].IP
		return ip != ""
	})
	return ip
}

// registered reports whether the gateway holds the Service (FakeARM), or
// the engine knows it does (against the emulator).
func (h *harness) registered(svc *v1.Service) bool {
	if h.clients == nil {
		return h.arm.GatewayService(uid(svc)) != nil
	}
	h.engine.mu.Lock()
	defer h.engine.mu.Unlock()
	_, ok := h.engine.tracker.Registered(uid(svc))
	return ok
}

// waitGone waits until the Service and its Azure resources are gone.
func (h *harness) waitGone(svc *v1.Service) {
	h.t.Helper()
	testutil.Poll(h.t, waitFor, "Service "+svc.Name+" torn down", func() bool {
		return h.get(svc) == nil && h.arm.LB(uid(svc)) == nil && h.arm.PublicIP(uid(svc)+"-pip") == nil &&
			h.arm.GatewayService(uid(svc)) == nil
	})
}

// idle waits until the engine has nothing queued or running.
func (h *harness) idle() {
	h.t.Helper()
	testutil.Poll(h.t, waitFor, "engine idle", func() bool {
		e := h.engine
		return e.svcQueue.Len() == 0 && e.epQueue.Len() == 0 && e.locQueue.Len() == 0 && e.regQueue.Len() == 0 && e.egQueue.Len() == 0 &&
			!e.busy() && !e.registrationsPending()
	})
}

// writes are the ARM calls that change something.
func writes(calls []testutil.Call) []testutil.Call {
	var out []testutil.Call
	for _, c := range calls {
		if strings.HasSuffix(c.Op, ".put") || strings.HasSuffix(c.Op, ".delete") || strings.HasPrefix(c.Op, "sgw.update") {
			out = append(out, c)
		}
	}
	return out
}

func ops(calls []testutil.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Op
	}
	return out
}

// locationRequests returns the bodies of every updateAddressLocations.
func (h *harness) locationRequests() []*armnetwork.ServiceGatewayUpdateAddressLocationsRequest {
	var out []*armnetwork.ServiceGatewayUpdateAddressLocationsRequest
	for _, c := range h.arm.Calls() {
		if c.Op == "sgw.update_locations" {
			out = append(out, c.Body.(*armnetwork.ServiceGatewayUpdateAddressLocationsRequest))
		}
	}
	return out
}

// newTestStore is a store on the harness's FakeARM that is not running.
func newTestStore(t *testing.T, h *harness) *lbstore.Store {
	t.Helper()
	s, err := lbstore.New(lbstore.Options{Config: h.cfg, LoadBalancers: h.arm.LoadBalancers(), Pools: h.arm.Pools()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
