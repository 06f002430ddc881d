package migration_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/migration"
	"github.com/azlb/azlb/internal/nicpool"
	"github.com/azlb/azlb/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	dev     *devenv.Env
	clients *azure.Clients
	cs      *fake.Clientset
	store   *lbstore.Store
	w       *nicpool.Writer
	events  *testutil.EventLog
}

// newEnv seeds a Basic cluster (clusterName "kubernetes") with a Dynamic
// and a Static public IP and an internal Service; mutate edits azure.json.
func newEnv(t *testing.T, mutate func(*config.Config)) *env {
	t.Helper()
	ctx := context.Background()
	dev := testutil.StartEmulator(t, emulator.Options{}, mutate)
	e := &env{dev: dev, clients: testutil.Clients(t, dev, azure.ClientOptions{}), cs: fake.NewClientset(), events: &testutil.EventLog{}}
	if _, err := dev.SeedBasicCluster(ctx, e.cs, devenv.BasicOptions{Namespace: "demo", Nodes: 2, Services: []devenv.BasicService{
		{Name: "web", Port: 80, Dynamic: true}, {Name: "api", Port: 8080}, {Name: "ilb", Port: 443, Internal: true},
	}}); err != nil {
		t.Fatal(err)
	}
	inv := testutil.Inventory(t, compute.ClientsOf(e.clients), nil)
	var err error
	if e.w, err = nicpool.New(nicpool.Options{Inventory: inv, ScaleSets: e.clients.ScaleSet, ScaleSetVMs: e.clients.ScaleSetVM,
		Interfaces: e.clients.Interface, ResourceGroup: devenv.ResourceGroup}); err != nil {
		t.Fatal(err)
	}
	e.store = testutil.StartStore(t, lbstore.Options{Config: dev.Config, LoadBalancers: e.clients.LoadBalancer, Pools: e.clients.BackendPool, Decoupler: decoupler{e.w}})
	return e
}

type decoupler struct{ w *nicpool.Writer }

func (d decoupler) Decouple(ctx context.Context, lb *armnetwork.LoadBalancer, id string) error {
	_, err := d.w.Decouple(ctx, lb, id)
	return err
}

func (e *env) migrator(t *testing.T, dec migration.Decoupler) *migration.Migrator {
	t.Helper()
	m, err := migration.New(migration.Options{Config: e.dev.Config, Store: e.store, PublicIPs: e.clients.PublicIP, Decoupler: dec, Recorder: e.events,
		Services: func() []*v1.Service {
			l, err := e.cs.CoreV1().Services("demo").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Error(err)
				return nil
			}
			out := make([]*v1.Service, 0, len(l.Items))
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out
		}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (e *env) lbExists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.clients.LoadBalancer.Get(context.Background(), devenv.ResourceGroup, name)
	if azure.Classify(err) == azure.ClassStale {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func (e *env) writes() []string {
	var out []string
	for _, r := range e.dev.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// Run deletes the Basic load balancers named after clusterName or
// loadBalancerName (with -internal), nothing else, and tells each Service
// on them; a second Run finds nothing and writes nothing.
func TestRunDeletesOnlyManagedBasicLoadBalancers(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.LoadBalancerName = "mylb" })
	ctx := context.Background()
	for _, lb := range []struct {
		name string
		sku  armnetwork.LoadBalancerSKUName
	}{{"mylb-internal", armnetwork.LoadBalancerSKUNameBasic}, {"kubernetes-2", armnetwork.LoadBalancerSKUNameBasic}, {"aks-basic", armnetwork.LoadBalancerSKUNameBasic}, {"other", armnetwork.LoadBalancerSKUNameStandard}} {
		if _, err := e.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, lb.name, armnetwork.LoadBalancer{Location: to.Ptr(devenv.Location),
			SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(lb.sku)}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	e.dev.Emulator().ResetRequests()
	res, err := e.migrator(t, e.w).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.LoadBalancers, ","); got != "kubernetes,kubernetes-internal,mylb-internal" {
		t.Errorf("deleted %s", got)
	}
	if len(res.StaticPublicIPs) != 1 || res.Decoupled == 0 {
		t.Errorf("result %+v: want one public IP made Static and decoupling writes", res)
	}
	for _, name := range []string{"kubernetes-2", "aks-basic", "other"} {
		if !e.lbExists(t, name) {
			t.Errorf("%s, which azlb does not manage, was deleted", name)
		}
	}
	for _, svc := range []string{"demo/web", "demo/api", "demo/ilb"} {
		if len(e.events.Find(svc, migration.EventReasonMigrating)) != 1 {
			t.Errorf("%s: events %v", svc, e.events.All())
		}
	}
	if len(e.events.Find("demo/web", migration.EventReasonPublicIPStatic)) != 1 {
		t.Errorf("no PublicIPMadeStatic on web: %v", e.events.All())
	}
	e.dev.Emulator().ResetRequests()
	if res, err := e.migrator(t, e.w).Run(ctx); err != nil || len(res.LoadBalancers) != 0 {
		t.Fatalf("second run: %+v %v", res, err)
	}
	if w := e.writes(); len(w) != 0 {
		t.Errorf("a second run wrote %v", w)
	}
}

// Without a way to take the nodes out of the Basic pools nothing is
// written or deleted, and the error says why.
func TestRunWithoutDecouplerDeletesNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.dev.Emulator().ResetRequests()
	_, err := e.migrator(t, nil).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "needs the VM inventory") || !strings.Contains(err.Error(), "nothing was lost") {
		t.Fatalf("Run: %v", err)
	}
	for _, w := range e.writes() {
		if strings.Contains(w, "/loadBalancers/") {
			t.Errorf("wrote %s", w)
		}
	}
	if !e.lbExists(t, "kubernetes") || len(e.events.Find("demo/web", migration.EventReasonMigrationFailed)) != 1 {
		t.Fatalf("the Basic load balancer is gone or no failure event: %v", e.events.All())
	}
}
