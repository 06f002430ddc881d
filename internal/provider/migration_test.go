package provider

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/migration"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// basicHarness is a cluster an earlier cloud provider ran with Basic load
// balancers (devenv.SeedBasicCluster), now handed to azlb with
// loadBalancerSku standard.
type basicHarness struct {
	env      *devenv.Env
	clients  *azure.Clients
	cs       *fake.Clientset
	seeded   *devenv.BasicCluster
	services []devenv.BasicService
	nodes    []*v1.Node
	events   *testutil.EventLog
	p        *Provider
}

// The Services of the demo: every kind the migration must keep the IP of.
var basicServices = []devenv.BasicService{
	{Name: "web", Port: 80, Dynamic: true},
	{Name: "api", Port: 8080},
	{Name: "ilb", Port: 443, Internal: true},
	{Name: "byo", Port: 81, UserPIP: "my-ip"},
	{Name: "byaddr", Port: 82, UserPIP: "my-other-ip", ByAddress: true},
}

func newBasicHarness(t testing.TB, poolType string, services []devenv.BasicService) *basicHarness {
	return newBasicHarnessWith(t, emulator.Options{}, poolType, devenv.BasicOptions{Services: services})
}

// newBasicHarnessWith seeds the Basic cluster o (namespace "demo").
func newBasicHarnessWith(t testing.TB, eo emulator.Options, poolType string, o devenv.BasicOptions) *basicHarness {
	t.Helper()
	ctx := context.Background()
	env := testutil.StartEmulator(t, eo, func(c *config.Config) { c.LoadBalancerBackendPoolConfigurationType = poolType })
	h := &basicHarness{env: env, clients: testutil.Clients(t, env, azure.ClientOptions{}), cs: fake.NewClientset(), events: &testutil.EventLog{}}
	o.Namespace = "demo"
	services := o.Services
	seeded, err := env.SeedBasicCluster(ctx, h.cs, o)
	if err != nil {
		t.Fatal(err)
	}
	h.seeded, h.services = seeded, services
	for _, vm := range seeded.Nodes {
		n := testutil.Node(vm.Name, testutil.InternalIPs(vm.IPs...))
		n.Spec.ProviderID = vm.ProviderID
		h.nodes = append(h.nodes, n)
	}
	h.restart(t)
	env.Emulator().ResetRequests()
	return h
}

// restart builds a new provider, as a restarted controller has: a new
// store (empty cache), inventory and migration state.
func (h *basicHarness) restart(t testing.TB) {
	t.Helper()
	p := newComputeProvider(t, h.env.Config, h.clients, h.events)
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, n := range h.nodes {
		if err := nodes.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	p.nodes = corelisters.NewNodeLister(nodes)
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	list, err := h.cs.CoreV1().Services("demo").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		if err := svcs.Add(&list.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	p.SetServiceLister(corelisters.NewServiceLister(svcs))
	h.p = p
}

func (h *basicHarness) svc(t testing.TB, name string) *v1.Service {
	t.Helper()
	s, err := h.cs.CoreV1().Services("demo").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ensure reconciles a Service as the service controller does and writes
// its status on success.
func (h *basicHarness) ensure(t testing.TB, name string) (string, error) {
	t.Helper()
	s := h.svc(t, name)
	st, err := h.p.EnsureLoadBalancer(context.Background(), "kubernetes", s, h.nodes)
	if err != nil {
		return "", err
	}
	if len(st.Ingress) != 1 {
		t.Fatalf("%s: ingress %+v", name, st.Ingress)
	}
	s.Status.LoadBalancer = *st
	if _, err := h.cs.CoreV1().Services("demo").UpdateStatus(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return st.Ingress[0].IP, nil
}

// ensureAll reconciles every Service and checks it kept its IP.
func (h *basicHarness) ensureAll(t *testing.T) {
	t.Helper()
	for name, want := range h.seeded.IPs {
		ip, err := h.ensure(t, name)
		if err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
		if ip != want {
			t.Errorf("service %s has IP %s after the migration, had %s", name, ip, want)
		}
	}
}

func (h *basicHarness) lbOrNil(t testing.TB, name string) *armnetwork.LoadBalancer {
	t.Helper()
	lb, err := h.clients.LoadBalancer.Get(context.Background(), devenv.ResourceGroup, name)
	if azure.Classify(err) == azure.ClassStale {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// requests returns "METHOD path" of the ARM requests since the last reset
// that match re.
func (h *basicHarness) requests(re string) []string {
	var out []string
	rx := regexp.MustCompile(re)
	for _, r := range h.env.Emulator().Requests() {
		if line := r.Method + " " + r.Path; r.Kind == "arm" && rx.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}

// checkMigrated asserts the end state: no managed Basic load balancer,
// Standard ones holding the Services with their old addresses, every
// public IP Standard, Static, same id and address, the nodes in both
// Standard pools.
func (h *basicHarness) checkMigrated(t testing.TB, nicPools bool) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{"kubernetes", "kubernetes-internal"} {
		lb := h.lbOrNil(t, name)
		if lb == nil || *lb.SKU.Name != armnetwork.LoadBalancerSKUNameStandard {
			t.Fatalf("load balancer %s: %+v, want Standard", name, lb)
		}
		if len(lb.Properties.OutboundRules) != 0 {
			t.Errorf("%s has outbound rules: outbound connectivity is the user's", name)
		}
		pool := findPool(lb, "kubernetes")
		members := 0
		if nicPools {
			members = len(pool.Properties.BackendIPConfigurations)
		} else {
			members = len(pool.Properties.LoadBalancerBackendAddresses)
		}
		if members != len(h.nodes) {
			t.Errorf("%s's pool has %d members, want the %d nodes", name, members, len(h.nodes))
		}
	}
	for svc, name := range h.seeded.PublicIPs {
		pip, err := h.clients.PublicIP.Get(ctx, devenv.ResourceGroup, name)
		if err != nil {
			t.Fatalf("public IP %s of %s: %v", name, svc, err)
		}
		if *pip.SKU.Name != armnetwork.PublicIPAddressSKUNameStandard || *pip.Properties.PublicIPAllocationMethod != armnetwork.IPAllocationMethodStatic ||
			ptr.Deref(pip.Properties.IPAddress, "") != h.seeded.IPs[svc] || pip.Properties.IPConfiguration == nil {
			t.Errorf("public IP %s of %s: sku %s %s address %s, want Standard Static %s in use", name, svc, *pip.SKU.Name,
				*pip.Properties.PublicIPAllocationMethod, ptr.Deref(pip.Properties.IPAddress, ""), h.seeded.IPs[svc])
		}
	}
	ilb := h.lbOrNil(t, "kubernetes-internal")
	for _, s := range h.services {
		if !s.Internal {
			continue
		}
		fe := findFrontend(ilb, names.Frontend(h.svc(t, s.Name), v1.IPv4Protocol))
		if fe == nil || *fe.Properties.PrivateIPAllocationMethod != armnetwork.IPAllocationMethodStatic || *fe.Properties.PrivateIPAddress != h.seeded.IPs[s.Name] {
			t.Errorf("internal frontend of %s: %+v, want Static %s", s.Name, fe, h.seeded.IPs[s.Name])
		}
	}
}

// The whole migration through the Service reconciles, NIC-based pools: it
// deletes only the managed Basic load balancers, after taking every node
// out of their pools; each Service keeps its IP (Dynamic public IPs made
// Static first; public IPs upgraded in one PUT each after the delete, the
// user's too, none created or deleted; the internal one by its status);
// the nodes join the Standard pools; a restart writes nothing.
func TestBasicMigrationKeepsEveryIP(t *testing.T) {
	h := newBasicHarness(t, config.BackendPoolNodeIPConfiguration, basicServices)
	ctx := context.Background()
	// Not azlb's: a Basic load balancer of another name and a Standard one.
	other, err := h.clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "other-basic", armnetwork.LoadBalancer{Location: to.Ptr(devenv.Location),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameBasic)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	h.env.Emulator().ResetRequests()

	h.ensureAll(t)
	h.checkMigrated(t, true)
	if h.lbOrNil(t, "other-basic") == nil || ptr.Deref(other.SKU.Name, "") != armnetwork.LoadBalancerSKUNameBasic {
		t.Error("a Basic load balancer azlb does not manage was deleted")
	}

	// Order: Compute and NIC writes (the decoupling) before the deletes,
	// the public IP upgrades after them.
	writes := h.requests(`^(PUT|DELETE|POST|PATCH) `)
	firstDelete, lastDecouple, firstUpgrade := -1, -1, -1
	for i, w := range writes {
		switch {
		case strings.HasPrefix(w, "DELETE ") && strings.Contains(w, "/loadBalancers/"):
			if firstDelete < 0 {
				firstDelete = i
			}
		case strings.Contains(w, "Microsoft.Compute") && firstDelete < 0:
			lastDecouple = i
		case strings.Contains(w, "/publicIPAddresses/") && firstDelete >= 0 && firstUpgrade < 0:
			firstUpgrade = i
		}
	}
	if lastDecouple < 0 || firstDelete < lastDecouple || firstUpgrade < firstDelete {
		t.Errorf("order of writes (decouple %d, delete %d, upgrade %d):\n%s", lastDecouple, firstDelete, firstUpgrade, strings.Join(writes, "\n"))
	}
	// The decoupling writes the scale set model once and each VM once,
	// though each is in both Basic load balancers' pools.
	decoupling := 0
	for _, w := range writes[:max(firstDelete, 0)] {
		if strings.HasPrefix(w, "PUT ") && strings.Contains(w, "Microsoft.Compute") {
			decoupling++
		}
	}
	if want := 1 + len(h.seeded.Nodes); decoupling != want {
		t.Errorf("%d Compute writes to decouple, want %d (the model and each VM once):\n%s", decoupling, want, strings.Join(writes, "\n"))
	}
	if n := len(h.requests(`^DELETE .*/loadBalancers/`)); n != 2 {
		t.Errorf("%d load balancer DELETEs, want the two Basic ones", n)
	}
	if got := h.requests(`^DELETE .*/publicIPAddresses/`); len(got) != 0 {
		t.Errorf("public IPs deleted: %v", got)
	}
	// One PUT per public IP to upgrade it, one more for the Dynamic one
	// (made Static while still associated).
	if got := h.requests(`^PUT .*/publicIPAddresses/`); len(got) != len(h.seeded.PublicIPs)+1 {
		t.Errorf("public IP writes %v, want one per public IP and one for the Dynamic one", got)
	}
	for _, want := range []struct{ svc, reason string }{
		{"web", migration.EventReasonMigrating}, {"ilb", migration.EventReasonMigrating}, {"web", migration.EventReasonPublicIPStatic},
		{"web", migration.EventReasonPublicIPUpgraded}, {"byo", migration.EventReasonPublicIPUpgraded}, {"byaddr", migration.EventReasonPublicIPUpgraded},
	} {
		if len(h.events.Find("demo/"+want.svc, want.reason)) == 0 {
			t.Errorf("no %s event on %s: %v", want.reason, want.svc, h.events.All())
		}
	}
	if n := h.events.Count(migration.EventReasonMigrationFailed) + h.events.Count(migration.EventReasonPublicIPUpgradeFailed); n != 0 {
		t.Errorf("failure events: %v", h.events.All())
	}

	// A restart: nothing left to migrate, nothing to write.
	h.restart(t)
	h.env.Emulator().ResetRequests()
	h.ensureAll(t)
	if w := h.requests(`^(PUT|DELETE|POST|PATCH) `); len(w) != 0 {
		t.Errorf("writes after a restart: %v", w)
	}
}

// With IP-based pools the nodes join as IP entries after the Basic pools
// (always NIC-based) were decoupled.
func TestBasicMigrationToIPBasedPools(t *testing.T) {
	h := newBasicHarness(t, config.BackendPoolNodeIP, basicServices[:3])
	h.ensureAll(t)
	h.checkMigrated(t, false)
	for _, vm := range []string{"0", "1", "2"} {
		ss, err := h.clients.ScaleSetVM.Get(context.Background(), devenv.ResourceGroup, "aks-basic", vm)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ss.Properties.NetworkProfileConfiguration.NetworkInterfaceConfigurations {
			for _, ic := range c.Properties.IPConfigurations {
				if len(ic.Properties.LoadBalancerBackendAddressPools) != 0 {
					t.Errorf("VM %s still lists pools %v", vm, ic.Properties.LoadBalancerBackendAddressPools)
				}
			}
		}
	}
}

// A failure (or a crash) at any step loses nothing and the next reconcile
// (here after a restart) finishes the migration from where it stopped.
func TestBasicMigrationResumesAfterEachStep(t *testing.T) {
	h := newBasicHarness(t, config.BackendPoolNodeIPConfiguration, basicServices)
	emu := h.env.Emulator()
	steps := []struct {
		name, method, path string
		// check runs while the step fails.
		check func(t *testing.T)
	}{
		{"keep addresses", http.MethodPut, `/publicIPAddresses/`, func(t *testing.T) {
			if h.lbOrNil(t, "kubernetes") == nil {
				t.Error("the Basic load balancer is gone although its Dynamic public IP could not be made Static")
			}
		}},
		{"decouple the scale set VMs", http.MethodPut, `/virtualMachines/`, nil},
		{"delete the Basic load balancer", http.MethodDelete, `/loadBalancers/kubernetes$`, nil},
		{"upgrade the public IPs", http.MethodPut, `/publicIPAddresses/`, func(t *testing.T) {
			if h.lbOrNil(t, "kubernetes") != nil {
				t.Error("the Basic load balancer is still there")
			}
		}},
		{"create the Standard load balancer", http.MethodPut, `/loadBalancers/kubernetes$`, nil},
		{"the nodes join", http.MethodPut, `/virtualMachineScaleSets/aks-basic$`, nil},
	}
	for _, st := range steps {
		id, err := emu.AddFault(emulator.Fault{Method: st.method, PathRegex: st.path, Status: http.StatusBadRequest, Code: "InjectedFailure"})
		if err != nil {
			t.Fatal(err)
		}
		for name := range h.seeded.IPs {
			_, _ = h.ensure(t, name) // the step fails for those that reach it
		}
		if fired := emu.Faults()[0].Fired; fired == 0 {
			t.Fatalf("%s: the fault never fired", st.name)
		}
		if st.check != nil {
			st.check(t)
		}
		emu.RemoveFault(id)
		h.restart(t)
	}
	h.ensureAll(t)
	h.checkMigrated(t, true)
	if h.events.Count(migration.EventReasonMigrationFailed) == 0 {
		t.Error("no BasicLoadBalancerMigrationFailed event")
	}
}

// Without Basic load balancers (or with loadBalancerSku service) nothing
// is deleted and no public IP is written; the check costs one listing.
func TestNoBasicLoadBalancerNoMigration(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	svc := testutil.Service("demo", "web")
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{testNode("n1", "10.240.0.4")}); err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, r := range h.env.Emulator().Requests() {
		if r.Method == http.MethodDelete {
			t.Errorf("DELETE %s", r.Path)
		}
		if r.Method == http.MethodGet && strings.HasSuffix(r.Path, "/loadBalancers") {
			lists++
		}
	}
	if lists != 2 {
		t.Errorf("%d load balancer listings, want 2 (the migration check and the store's discovery)", lists)
	}
	for _, sku := range []string{config.LoadBalancerSKUBasic, config.LoadBalancerSKUService} {
		if migration.Applies(&config.Config{LoadBalancerSKU: sku}) {
			t.Errorf("migration applies with loadBalancerSku %s", sku)
		}
	}
}

// A Basic public IP that cannot be upgraded is left as it is: one in use
// by something else, or one that is Dynamic (and so holds no address).
// The reconcile fails with a Warning event; nothing is written or deleted.
func TestBasicPublicIPThatCannotBeUpgraded(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	for _, name := range []string{"dyn", "used"} {
		if _, err := h.clients.PublicIP.CreateOrUpdate(ctx, devenv.ResourceGroup, name, armnetwork.PublicIPAddress{Location: to.Ptr(devenv.Location),
			SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameBasic)}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	// "used" is taken by a NIC.
	if _, err := h.clients.Interface.CreateOrUpdate(ctx, devenv.ResourceGroup, "nic", armnetwork.Interface{Location: to.Ptr(devenv.Location),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("c"),
			Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Subnet:          &armnetwork.Subnet{ID: to.Ptr(names.SubnetID(names.VirtualNetworkID(devenv.SubscriptionID, devenv.ResourceGroup, devenv.VnetName), devenv.SubnetName))},
				PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr("/subscriptions/" + devenv.SubscriptionID + "/resourceGroups/" + devenv.ResourceGroup + "/providers/Microsoft.Network/publicIPAddresses/used")},
			}}}}}, ""); err != nil {
		t.Fatal(err)
	}
	events := &testutil.EventLog{}
	h.p.recorder = events
	h.env.Emulator().ResetRequests()
	for _, tc := range []struct{ pip, why string }{{"dyn", "Dynamic"}, {"used", "in use by"}} {
		svc := testutil.Service("demo", tc.pip, testutil.Annotations("service.beta.kubernetes.io/azure-pip-name", tc.pip))
		_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, []*v1.Node{testNode("n1", "10.240.0.4")})
		if err == nil || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want an error saying %q", tc.pip, err, tc.why)
		}
		if msgs := events.Messages("demo/"+tc.pip, migration.EventReasonPublicIPUpgradeFailed); len(msgs) != 1 || !strings.Contains(msgs[0], tc.why) {
			t.Errorf("%s: events %v", tc.pip, events.All())
		}
	}
	if w := h.writes(); w != 0 {
		t.Errorf("%d writes for public IPs azlb cannot upgrade: %v", w, h.env.Emulator().Requests())
	}
}

// An internal Service whose frontend is created anew takes the address
// of its status when it lies in the subnet; an address it asks for wins;
// one outside the subnet is not taken. If the address was taken meanwhile,
// the write fails and the next reconcile tries again.
func TestInternalFrontendKeepsItsStatusIP(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	internal := testutil.Annotations("service.beta.kubernetes.io/azure-load-balancer-internal", "true")
	withStatus := func(s *v1.Service, ip string) *v1.Service {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		return s
	}
	cases := []struct {
		name, status, requested, want string
	}{
		{"status in the subnet", "10.240.7.7", "", "10.240.7.7"},
		{"requested wins", "10.240.7.8", "10.240.7.9", "10.240.7.9"},
		{"status outside the subnet", "192.168.1.1", "", ""},
	}
	for _, tc := range cases {
		s := withStatus(testutil.Service("demo", strings.ReplaceAll(tc.name, " ", "-"), internal), tc.status)
		s.Spec.LoadBalancerIP = tc.requested
		st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		fe := findFrontend(h.lb(t, "kubernetes-internal"), names.Frontend(s, v1.IPv4Protocol))
		static := *fe.Properties.PrivateIPAllocationMethod == armnetwork.IPAllocationMethodStatic
		if tc.want != "" && (st.Ingress[0].IP != tc.want || !static) || tc.want == "" && static {
			t.Errorf("%s: ingress %s, frontend %s %s; want %q", tc.name, st.Ingress[0].IP, *fe.Properties.PrivateIPAllocationMethod, *fe.Properties.PrivateIPAddress, tc.want)
		}
	}

	// The address is taken by a NIC before the frontend comes back.
	s := withStatus(testutil.Service("demo", "taken", internal), "10.240.9.9")
	subnet := names.SubnetID(names.VirtualNetworkID(devenv.SubscriptionID, devenv.ResourceGroup, devenv.VnetName), devenv.SubnetName)
	squat := func(ip string) {
		if _, err := h.clients.Interface.CreateOrUpdate(ctx, devenv.ResourceGroup, "squatter", armnetwork.Interface{Location: to.Ptr(devenv.Location),
			Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("c"),
				Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{Subnet: &armnetwork.Subnet{ID: to.Ptr(subnet)},
					PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: to.Ptr(ip)}}}}}, ""); err != nil {
			t.Fatal(err)
		}
	}
	squat("10.240.9.9")
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err == nil || !strings.Contains(err.Error(), "PrivateIPAddressInUse") {
		t.Fatalf("the old address taken meanwhile: %v", err)
	}
	squat("10.240.9.10") // gives the address back
	if st, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err != nil || st.Ingress[0].IP != "10.240.9.9" {
		t.Fatalf("once the address is free again: %v %v", st, err)
	}
}
