package adminstate_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nicpool"
	"github.com/azlb/azlb/internal/testutil"
	"github.com/azlb/azlb/internal/testutil/cputime"
)

// BenchmarkNICCutoverLatency is BenchmarkCutoverLatency on a NIC-based
// pool: the VMs of a scale set are members of the cluster pool (their
// entries NIC-derived, matched by their VM), with L = 25 ms per ARM call.
// Time from the taint acknowledged by the API server to Down on the node's
// entry (its Down event), one node at a time; the bounds are those of IP
// pools: p50 <= 2L + 10 ms, p99 <= 2L + 50 ms. pool=ip is the same cluster
// with an IP-based pool of the same nodes, measured in the same run for
// comparison on a loaded machine; 250 members is the pool size of the IP
// bound's layout (1,000 nodes placed on 4 load balancers), 1,000 the one
// load balancer NIC-based pools allow.
//
//	go test -run '^$' -bench BenchmarkNICCutoverLatency -benchtime 30x ./internal/adminstate/
func BenchmarkNICCutoverLatency(b *testing.B) {
	for _, size := range []int{250, 1000} {
		for _, nic := range []bool{true, false} {
			kind := "nic"
			if !nic {
				kind = "ip"
			}
			b.Run(fmt.Sprintf("vms=%d/pool=%s", size, kind), func(b *testing.B) { benchNICCutover(b, size, nic) })
		}
	}
}

func benchNICCutover(b *testing.B, size int, nic bool) {
	ctx := context.Background()
	// The setup's 1,000 VM writes would spend the default write budget.
	env, err := devenv.Start(ctx, b.TempDir(), emulator.Options{Throttle: emulator.NoThrottle}, func(c *config.Config) {
		c.LoadBalancerBackendPoolConfigurationType = config.BackendPoolNodeIP
		if nic {
			c.LoadBalancerBackendPoolConfigurationType = config.BackendPoolNodeIPConfiguration
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Close() })
	clients := testutil.Clients(b, env, azure.ClientOptions{PollFrequency: 5 * time.Millisecond, Source: "bench"})
	lbRef := names.LoadBalancerRef{Subscription: devenv.SubscriptionID, ResourceGroup: devenv.ResourceGroup, Name: "kubernetes"}
	if _, err := clients.LoadBalancer.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", armnetwork.LoadBalancer{
		Location: to.Ptr(devenv.Location), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}}},
	}, ""); err != nil {
		b.Fatal(err)
	}
	cmp, err := env.Compute(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cmp.Close()
	vms, err := cmp.CreateScaleSet(ctx, "pool1", size, devenv.ScaleSetOptions{Tags: map[string]string{nicpool.CoordinationTag: ""}})
	if err != nil {
		b.Fatal(err)
	}
	objs := make([]runtime.Object, 0, size)
	nodes := make([]*v1.Node, 0, size)
	for _, vm := range vms {
		n := adminstate.NewTestNode(vm.Name, types.UID("uid-"+vm.Name), vm.IPs)
		n.Spec.ProviderID = vm.ProviderID
		objs = append(objs, n)
		nodes = append(nodes, n)
	}
	inv := testutil.Inventory(b, compute.ClientsOf(clients), nil)
	var members adminstate.NodeMembers
	if nic {
		joinNICPool(ctx, b, inv, clients, lbRef, nodes)
		members = inv
	} else {
		seedIPPool(ctx, b, clients, nodes)
	}
	store := testutil.StartStore(b, lbstore.Options{Config: env.Config, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	mgr, err := adminstate.NewManager(store, adminstate.ManagerOptions{SubscriptionID: devenv.SubscriptionID, Source: adminstate.UniqueSource(b),
		Policy: backendpool.PolicyFromConfig(env.Config), Members: members})
	if err != nil {
		b.Fatal(err)
	}
	events := &adminstate.EventLog{}
	c, err := adminstate.NewController(factory.Core().V1().Nodes(), mgr, events, nil)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	factory.Start(runCtx.Done())
	wg.Go(func() { _ = c.Run(runCtx) })
	defer func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	}()
	cc := &ctrl{kube: kube, c: c, events: events}
	env.Emulator().SetLatency(benchLatency)
	// Warm-up: the startup verification of every node, then one cutover.
	cc.setTaints(b, nodes[0].Name, taintOOS)
	waitDown(b, cc, nodes[0].Name)
	env.Emulator().ResetRequests()
	if b.N > size-1 {
		b.Fatalf("at most %d iterations", size-1)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu := cputime.Start()
	for i := range b.N {
		name := nodes[1+i].Name
		_, acked := cc.setTaintsAt(b, name, taintOOS)
		lat = append(lat, waitDown(b, cc, name).Sub(acked))
	}
	b.StopTimer()
	cpuTime := cpu.Elapsed()
	slices.Sort(lat)
	calls, puts := 0, 0
	for _, r := range env.Emulator().Requests() {
		if r.Kind == "arm" {
			calls++
			if r.Method == http.MethodPut && strings.Contains(r.Path, "/backendAddressPools/") {
				puts++
			}
		}
	}
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(cpuTime)/float64(b.N), "cpu-ms/cutover")
	b.ReportMetric(float64(calls)/float64(b.N), "arm-calls/cutover")
	b.ReportMetric(float64(puts)/float64(b.N), "pool-puts/cutover")
	b.Logf("%d cutovers on a pool of %d VMs (NIC-based: %v): p50 %v p99 %v (bounds: p50 <= %v, p99 <= %v)", b.N, size, nic, p50, p99,
		2*benchLatency+10*time.Millisecond, 2*benchLatency+50*time.Millisecond)
}

// joinNICPool makes the VMs members of the pool as the Service reconcile
// does: model, then VMs.
func joinNICPool(ctx context.Context, b *testing.B, inv *compute.Inventory, clients *azure.Clients, lbRef names.LoadBalancerRef, nodes []*v1.Node) {
	w, err := nicpool.New(nicpool.Options{Inventory: inv, ScaleSets: clients.ScaleSet, ScaleSetVMs: clients.ScaleSetVM, Interfaces: clients.Interface,
		ResourceGroup: devenv.ResourceGroup, BatchSize: 100})
	if err != nil {
		b.Fatal(err)
	}
	if res, err := w.EnsureMembers(ctx, nicpool.Pool{ID: lbRef.Child("backendAddressPools", "kubernetes"), Family: v1.IPv4Protocol}, nodes); err != nil || len(res.Members) != len(nodes) {
		b.Fatalf("%d members: %v", len(res.Members), err)
	}
}

// seedIPPool puts every node in the pool by its address.
func seedIPPool(ctx context.Context, b *testing.B, clients *azure.Clients, nodes []*v1.Node) {
	vnet := &armnetwork.SubResource{ID: to.Ptr(names.VirtualNetworkID(devenv.SubscriptionID, devenv.ResourceGroup, devenv.VnetName))}
	pool := armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, n := range nodes {
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(n.Name), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress: to.Ptr(n.Status.Addresses[0].Address), VirtualNetwork: vnet,
				AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateNone)}})
	}
	if _, err := clients.BackendPool.CreateOrUpdate(ctx, devenv.ResourceGroup, "kubernetes", "kubernetes", pool, ""); err != nil {
		b.Fatal(err)
	}
}
