package localservice

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/provider"
)

// TestProviderIntegration wires the Updater into a multiple-SLB provider:
// the provider creates and fills the Service's dedicated pool, the Updater
// keeps it current from EndpointSlice changes, and the cluster pool is never
// touched by the Updater.
func TestProviderIntegration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{WriteBudget: 1 << 30}, func(c *config.Config) {
		c.MultipleStandardLoadBalancerConfigurations = []config.MultipleStandardLoadBalancerConfiguration{{Name: "kubernetes"}}
	})
	if err != nil {
		t.Fatalf("devenv: %v", err)
	}
	defer func() { _ = env.Close() }()
	fc := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	clients, err := env.Clients(ctx, azure.ClientOptions{Clock: fc, Source: "localservice-integration"})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	p, err := provider.New(provider.Options{Config: env.Config, Clients: clients, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}

	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	rec := newEventLog()
	u, err := NewUpdater(FromConfig(env.Config, Options{
		Clock: fc, Recorder: rec, Lock: p.Lock(), Pools: p, Source: "localservice-integration",
		Nodes: factory.Core().V1().Nodes(), Services: factory.Core().V1().Services(),
		EndpointSlices: factory.Discovery().V1().EndpointSlices(),
	}))
	if err != nil {
		t.Fatal(err)
	}
	p.SetLocalServices(u)
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer cancel()
	factory.WaitForCacheSync(ctx.Done())
	h := &harness{t: t, ctx: ctx, env: env, inspect: clients, clock: fc, kube: kube, factory: factory, rec: rec, u: u,
		source: "localservice-integration"}

	var nodes []*v1.Node
	for i, name := range []string{"n1", "n2", "n3"} {
		h.addNode(name, "10.240.0."+string(rune('4'+i)))
		n, _ := u.nodes.Get(name)
		nodes = append(nodes, n)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: types.UID("11111111-2222-3333-4444-555555555555")},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 32000,
			Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080}},
		},
	}
	if _, err := kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("service listed", func() bool { _, err := u.services.Services("default").Get("web"); return err == nil })
	h.setSlice("default", "web", "web-a", "n1")
	h.eventually("slice listed", func() bool { n, err := u.EndpointNodes(svc); return err == nil && n.Len() == 1 })

	if _, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	h.expectPool(webPool, "n1")
	others := h.otherPools(webPool)
	if _, ok := u.registered("default/web"); !ok {
		t.Fatal("the provider did not register the Service")
	}

	// Endpoints move to n2 and n3; n3 is shutting down (admin state Down).
	tainted := nodes[2].DeepCopy()
	tainted.Spec.Taints = []v1.Taint{{Key: adminstate.TaintShutdown, Effect: v1.TaintEffectNoSchedule}}
	if _, err := kube.CoreV1().Nodes().Update(ctx, tainted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("taint listed", func() bool { n, _ := u.nodes.Get("n3"); return len(n.Spec.Taints) == 1 })
	h.setSlice("default", "web", "web-a", "n2", "n3")
	h.waitQueued("default/web", "n2", "n3")
	env.Emulator().ResetRequests()
	fc.Step(u.Interval())
	u.process(ctx)
	if got := strings.Join(h.poolEntries(webPool), " "); got != "n2=10.240.0.5/None n3=10.240.0.6/Down" {
		t.Fatalf("local pool = %s", got)
	}
	if got := h.otherPools(webPool); got != others {
		t.Errorf("other pools changed:\n%s\nwas\n%s", got, others)
	}
	h.expectEvents("default/web " + reasonUpdated)
	for _, r := range env.Emulator().Requests() {
		if r.Method != "GET" && !strings.HasSuffix(r.Path, "/backendAddressPools/"+webPool) {
			t.Errorf("the updater wrote %s %s", r.Method, r.Path)
		}
	}
	if n := lockWaits(t, provider.LockName, LockCaller); n == 0 {
		t.Error("no lock wait recorded for caller " + LockCaller)
	}

	// The provider's next reconcile agrees with the Updater: no pool write.
	env.Emulator().ResetRequests()
	for i := range nodes {
		nodes[i], _ = u.nodes.Get(nodes[i].Name)
	}
	if err := p.UpdateLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatalf("UpdateLoadBalancer: %v", err)
	}
	for _, r := range env.Emulator().Requests() {
		if r.Method == "PUT" {
			t.Errorf("provider rewrote %s after the updater: they disagree", r.Path)
		}
	}

	// Deletion unregisters: later endpoint changes are not queued.
	if err := p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatalf("EnsureLoadBalancerDeleted: %v", err)
	}
	if _, ok := u.registered("default/web"); ok || u.QueueLen() != 0 {
		t.Fatal("the Service is still registered or queued after deletion")
	}
	p.Lock().Lock("test")
	u.Register("default/sentinel", "kubernetes", []v1.IPFamily{v1.IPv4Protocol})
	p.Lock().Unlock()
	h.setSlice("default", "web", "web-a", "n1", "n2")
	h.setSlice("default", "sentinel", "sentinel-a", "n1") // handled after the web event
	h.waitQueued("default/sentinel", "n1")
	if got := h.queueKeys(); len(got) != 1 {
		t.Fatalf("queue = %v: a deleted Service was queued", got)
	}
}

// otherPools describes every pool of the test load balancer but except.
func (h *harness) otherPools(except string) string {
	h.t.Helper()
	pools, err := h.inspect.BackendPool.List(h.ctx, h.rg(), testLB)
	if err != nil {
		h.t.Fatalf("list pools: %v", err)
	}
	var out []string
	for _, p := range pools {
		if strings.EqualFold(deref(p.Name), except) {
			continue
		}
		b, _ := json.Marshal(p.Properties.LoadBalancerBackendAddresses)
		out = append(out, deref(p.Name)+"="+string(b))
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// lockWaits counts observations of the lock-wait histogram for lock/caller.
func lockWaits(t *testing.T, lock, caller string) int {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != metrics.LockWaitDurationName {
			continue
		}
		for _, m := range mf.GetMetric() {
			var l, c bool
			for _, lp := range m.GetLabel() {
				l = l || (lp.GetName() == metrics.LabelLock && lp.GetValue() == lock)
				c = c || (lp.GetName() == metrics.LabelCaller && lp.GetValue() == caller)
			}
			if l && c {
				n += int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return n
}
