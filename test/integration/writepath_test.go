package integration

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/localservice"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/provider"
	"github.com/azlb/azlb/internal/testutil"
)

const waitFor = 20 * time.Second

// TestThreeWritersShareOnePool runs the three traces of the write path on
// one cluster: a Service reconcile (provider) that creates a Local
// Service's pool, the local service updater that follows its endpoints,
// and the admin-state manager that takes a tainted node out of rotation.
// Each writes through the same store; none undoes another's write.
func TestThreeWritersShareOnePool(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := testutil.StartEmulator(t, emulator.Options{Throttle: emulator.NoThrottle}, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	clients := testutil.Clients(t, env, azure.ClientOptions{Clock: fc, Source: "integration"})
	store := testutil.StartStore(t, lbstore.Options{Config: env.Config, Clock: fc, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})

	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	slices := factory.Discovery().V1().EndpointSlices()
	p, err := provider.New(provider.Options{Config: env.Config, Clients: clients, Store: store,
		Nodes: factory.Core().V1().Nodes().Lister(), EndpointSlices: slices.Lister(), SlicesSynced: slices.Informer().HasSynced})
	if err != nil {
		t.Fatal(err)
	}
	events := &testutil.EventLog{}
	u, err := localservice.NewUpdater(localservice.FromConfig(env.Config, localservice.Options{
		Clock: fc, Recorder: events, Store: store, Source: "integration",
		Nodes: factory.Core().V1().Nodes(), Services: factory.Core().V1().Services(), EndpointSlices: slices,
	}))
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := adminstate.NewManager(store, adminstate.ManagerOptions{Policy: backendpool.PolicyFromConfig(env.Config), Source: "integration"})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	factory.WaitForCacheSync(ctx.Done())
	updaterDone := make(chan struct{})
	go func() {
		defer close(updaterDone)
		if err := u.Run(ctx); err != nil {
			t.Errorf("updater: %v", err)
		}
	}()
	defer func() { cancel(); <-updaterDone }()

	var nodes []*v1.Node
	for i, name := range []string{"n1", "n2", "n3"} {
		n := testutil.Node(name, testutil.InternalIPs(fmt.Sprintf("10.240.0.%d", 4+i)))
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	svc := testutil.Service("default", "web", testutil.Local)
	if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster := testutil.Service("default", "api") // uses the cluster pool
	setSlice(t, kube, "default", "web", "n1")
	testutil.Poll(t, waitFor, "informers", func() bool {
		n, _ := backendpool.EndpointNodes(slices.Lister(), "default", "web")
		_, err := factory.Core().V1().Services().Lister().Services("default").Get("web")
		return n.Len() == 1 && err == nil
	})

	// Trace 1: Service -> rule (and the Local pool, filled from endpoints).
	for _, s := range []*v1.Service{svc, cluster} {
		if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err != nil {
			t.Fatalf("EnsureLoadBalancer(%s): %v", s.Name, err)
		}
	}
	local := names.LocalServicePool("default", "web", v1.IPv4Protocol)
	expectPool(t, clients, local, "n1=None")
	expectPool(t, clients, "kubernetes", "n1=None", "n2=None", "n3=None")

	// Trace 2: EndpointSlice -> PUT of the Local pool.
	setSlice(t, kube, "default", "web", "n2", "n3")
	tickUntil(t, fc, u, "the updater wrote the Local pool", func() bool { return poolString(t, clients, local) == "n2=None n3=None" })
	// Azure answers the updater's PUT before the store has installed the
	// result in its cache; the admin state reads the cache.
	testutil.Poll(t, waitFor, "the store's cache holds n3 in both pools", func() bool {
		refs, err := store.PoolsWith(ctx, []string{"10.240.0.6"}, lbstore.Cached)
		return err == nil && len(refs) == 2
	})

	// Trace 3: taint -> PUT, on both pools that hold the node.
	tainted, _ := kube.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
	tainted.Spec.Taints = []v1.Taint{{Key: backendpool.TaintShutdown, Effect: v1.TaintEffectNoSchedule}}
	if _, err := kube.CoreV1().Nodes().Update(ctx, tainted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := mgr.ApplyNodes(ctx, []adminstate.Target{{Node: "n3", UID: tainted.UID, IPs: []string{"10.240.0.6"}, State: "Down", Pooled: true}})
	if res[0].Err != nil || len(res[0].Pools) != 2 {
		t.Fatalf("admin state: %+v, want Down on both pools", res[0])
	}
	expectPool(t, clients, local, "n2=None", "n3=Down")
	expectPool(t, clients, "kubernetes", "n1=None", "n2=None", "n3=Down")

	// None of them undoes the others: another endpoint change and a Service
	// resync keep n3 Down and write nothing they need not.
	testutil.Poll(t, waitFor, "the taint in the lister", func() bool {
		n, err := factory.Core().V1().Nodes().Lister().Get("n3")
		return err == nil && len(n.Spec.Taints) == 1
	})
	setSlice(t, kube, "default", "web", "n1", "n3")
	tickUntil(t, fc, u, "the updater wrote the Local pool again", func() bool { return poolString(t, clients, local) == "n1=None n3=Down" })
	env.Emulator().ResetRequests()
	for _, s := range []*v1.Service{svc, cluster} {
		if err := p.UpdateLoadBalancer(ctx, "kubernetes", s, nodes); err != nil {
			t.Fatalf("UpdateLoadBalancer(%s): %v", s.Name, err)
		}
	}
	for _, r := range env.Emulator().Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("the Service reconcile wrote %s %s after the other writers: they disagree", r.Method, r.Path)
		}
	}
	expectPool(t, clients, "kubernetes", "n1=None", "n2=None", "n3=Down")

	// Deletion removes the Local pool; the updater then has nothing to do.
	if err := p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
	env.Emulator().ResetRequests()
	setSlice(t, kube, "default", "web", "n2")
	tickUntil(t, fc, u, "the queue drained", func() bool { return u.QueueLen() == 0 })
	for _, r := range env.Emulator().Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("wrote %s %s for a deleted Service", r.Method, r.Path)
		}
	}
	if got := events.Find("default/web", localservice.EventReasonPoolUpdated); len(got) != 2 {
		t.Errorf("updated events %v, want 2", got)
	}
}

// tickUntil steps the updater's clock an interval at a time (its ticker
// fires once per step) until cond holds: the endpoint change may reach the
// updater's queue after any given tick.
func tickUntil(t *testing.T, fc *clocktesting.FakeClock, u *localservice.Updater, what string, cond func() bool) {
	t.Helper()
	testutil.Poll(t, waitFor, what, func() bool {
		if cond() {
			return true
		}
		if fc.HasWaiters() {
			fc.Step(u.Interval())
		}
		return false
	})
}

func setSlice(t *testing.T, kube *fake.Clientset, ns, svc string, nodes ...string) {
	t.Helper()
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc + "-a",
		Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4}
	for i, n := range nodes {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.0.%d", i+1)}, NodeName: to.Ptr(n)})
	}
	c := kube.DiscoveryV1().EndpointSlices(ns)
	if cur, err := c.Get(context.Background(), es.Name, metav1.GetOptions{}); err == nil {
		es.ResourceVersion = cur.ResourceVersion
		if _, err := c.Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	if _, err := c.Create(context.Background(), es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// poolString is "node=adminState ..." of a pool of the kubernetes load
// balancer, sorted.
func poolString(t *testing.T, clients *azure.Clients, pool string) string {
	t.Helper()
	p, err := clients.BackendPool.Get(context.Background(), "azlb-rg", "kubernetes", pool)
	if err != nil {
		t.Fatalf("get pool %s: %v", pool, err)
	}
	var out []string
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		out = append(out, ptr.Deref(a.Name, "")+"="+string(backendpool.AdminStateOf(a)))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func expectPool(t *testing.T, clients *azure.Clients, pool string, want ...string) {
	t.Helper()
	if got := poolString(t, clients, pool); got != strings.Join(want, " ") {
		t.Fatalf("pool %s = %q, want %q", pool, got, strings.Join(want, " "))
	}
}
