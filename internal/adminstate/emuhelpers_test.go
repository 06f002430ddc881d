package adminstate_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/testutil"
)

const (
	emuSub      = devenv.SubscriptionID
	emuRG       = devenv.ResourceGroup
	emuLocation = devenv.Location
	emuVNet     = devenv.VnetName
	poolV4      = "kubernetes"
	poolV6      = "kubernetes-IPv6"
)

// emuEnv is a TLS emulator, real ARM clients configured for it through
// azure.json settings only, and a real provider in multiple-SLB mode.
type emuEnv struct {
	t       testing.TB
	srv     *emulator.Server
	emu     *emulator.Emulator
	cfg     *config.Config
	clients *azure.Clients
	store   *lbstore.Store
	lbs     []string
}

// newEmuEnv starts a seeded emulator (internal/devenv: resource group,
// virtual network) and a provider managing the named load balancers (each
// also has an internal twin, which does not exist).
func newEmuEnv(t testing.TB, eo emulator.Options, lbs ...string) *emuEnv {
	t.Helper()
	env, err := devenv.Start(context.Background(), t.TempDir(), eo, func(c *config.Config) {
		for _, lb := range lbs {
			c.MultipleStandardLoadBalancerConfigurations = append(c.MultipleStandardLoadBalancerConfigurations,
				config.MultipleStandardLoadBalancerConfiguration{Name: lb})
		}
	})
	if err != nil {
		t.Fatalf("devenv: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	testutil.NotThrottled(t, env.Emulator(), eo)
	clients, err := env.Clients(context.Background(), azure.ClientOptions{
		PollFrequency: 5 * time.Millisecond, RetryDelay: time.Millisecond, Source: "adminstate-test",
	})
	if err != nil {
		t.Fatalf("NewClients: %v", err)
	}
	t.Cleanup(clients.Close)
	store := testutil.StartStore(t, lbstore.Options{Config: env.Config, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	return &emuEnv{t: t, srv: env.Server, emu: env.Emulator(), cfg: env.Config, clients: clients, store: store, lbs: lbs}
}

func (env *emuEnv) vnetID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s", emuSub, emuRG, emuVNet)
}

// emuNode is a cluster node: name, UID and its IPv4/IPv6 InternalIPs.
type emuNode struct {
	name   string
	v4, v6 string
}

func emuNodes(n int) []emuNode {
	out := make([]emuNode, n)
	for i := range out {
		out[i] = emuNode{name: fmt.Sprintf("node-%04d", i),
			v4: fmt.Sprintf("10.1.%d.%d", i/250, i%250+4), v6: fmt.Sprintf("fd00::1:%x", i+4)}
	}
	return out
}

func (n emuNode) node(taints ...v1.Taint) *v1.Node {
	return adminstate.NewTestNode(n.name, types.UID("uid-"+n.name), []string{n.v4, n.v6}, taints...)
}

// seedLBs creates each managed load balancer with an IPv4 and an IPv6 pool
// holding every node, each entry with the given admin state ("" unset).
func (env *emuEnv) seedLBs(nodes []emuNode, state func(emuNode) adminstate.State) {
	env.seedPlaced(nodes, state, false)
}

// seedPlaced is seedLBs; with spread, node i is only in the pools of load
// balancer i mod len(lbs), as multiple-SLB node placement puts it.
func (env *emuEnv) seedPlaced(nodes []emuNode, state func(emuNode) adminstate.State, spread bool) {
	t := env.t
	vnet := &armnetwork.SubResource{ID: to.Ptr(env.vnetID())}
	for li, lbName := range env.lbs {
		var a4, a6 []*armnetwork.LoadBalancerBackendAddress
		for ni, n := range nodes {
			if spread && ni%len(env.lbs) != li {
				continue
			}
			var st *adminstate.State
			if s := state(n); s != "" {
				st = to.Ptr(s)
			}
			a4 = append(a4, &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(n.name),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(n.v4), VirtualNetwork: vnet, AdminState: st}})
			a6 = append(a6, &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(n.name),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(n.v6), VirtualNetwork: vnet, AdminState: st}})
		}
		_, err := env.clients.LoadBalancer.CreateOrUpdate(context.Background(), emuRG, lbName, armnetwork.LoadBalancer{
			Location: to.Ptr(emuLocation),
			SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
			Properties: &armnetwork.LoadBalancerPropertiesFormat{
				BackendAddressPools: []*armnetwork.BackendAddressPool{
					{Name: to.Ptr(poolV4), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: a4}},
					{Name: to.Ptr(poolV6), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{LoadBalancerBackendAddresses: a6}},
				},
			},
		}, "")
		if err != nil {
			t.Fatalf("seed load balancer %s: %v", lbName, err)
		}
	}
}

// states reads, through ARM, the admin state of a node's entries in every
// pool, keyed "lb/pool".
func (env *emuEnv) states(n emuNode) map[string]adminstate.State {
	out := map[string]adminstate.State{}
	for _, lb := range env.lbs {
		for _, pool := range []string{poolV4, poolV6} {
			p, err := env.clients.BackendPool.Get(context.Background(), emuRG, lb, pool)
			if err != nil {
				env.t.Fatalf("get %s/%s: %v", lb, pool, err)
			}
			ip := n.v4
			if pool == poolV6 {
				ip = n.v6
			}
			for _, a := range p.Properties.LoadBalancerBackendAddresses {
				if adminstate.CanonicalIP(*a.Properties.IPAddress) == adminstate.CanonicalIP(ip) {
					out[lb+"/"+pool] = adminstate.StateOf(a)
				}
			}
		}
	}
	return out
}

// allAre reports whether the node has state s in every pool (and is in
// every pool).
func (env *emuEnv) allAre(n emuNode, s adminstate.State) bool {
	st := env.states(n)
	if len(st) != 2*len(env.lbs) {
		return false
	}
	for _, v := range st {
		if !strings.EqualFold(string(v), string(s)) {
			return false
		}
	}
	return true
}

// poolWrites counts the backend pool PUTs the emulator served (any status),
// per pool path suffix "lb/pool".
func (env *emuEnv) poolWrites() map[string]int {
	out := map[string]int{}
	for _, r := range env.emu.Requests() {
		if r.Kind != "arm" || r.Method != http.MethodPut {
			continue
		}
		i := strings.Index(strings.ToLower(r.Path), "/loadbalancers/")
		if i < 0 {
			continue
		}
		rest := strings.Split(r.Path[i+len("/loadbalancers/"):], "/")
		if len(rest) == 3 && strings.EqualFold(rest[1], "backendAddressPools") {
			out[rest[0]+"/"+rest[2]]++
		}
	}
	return out
}

// writes counts every ARM write (PUT, PATCH, POST, DELETE) served.
func (env *emuEnv) writes() int {
	n := 0
	for _, r := range env.emu.Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && r.Method != http.MethodHead {
			n++
		}
	}
	return n
}

func (env *emuEnv) armCalls() int {
	n := 0
	for _, r := range env.emu.Requests() {
		if r.Kind == "arm" {
			n++
		}
	}
	return n
}

func (env *emuEnv) totalPoolWrites() int {
	n := 0
	for _, v := range env.poolWrites() {
		n += v
	}
	return n
}

// ctrl is a running admin-state controller over a fake clientset.
type ctrl struct {
	kube   *fake.Clientset
	c      *adminstate.Controller
	events *adminstate.EventLog
	source string // metrics source label
}

// runController starts an admin-state controller over the provider and a
// fake clientset holding objs; it stops at the end of the test.
func (env *emuEnv) runController(t testing.TB, objs ...runtime.Object) *ctrl {
	t.Helper()
	source := adminstate.UniqueSource(t)
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(kube, 0)
	mgr, err := adminstate.NewManager(env.store, adminstate.ManagerOptions{SubscriptionID: emuSub, Source: source,
		Policy: backendpool.PolicyFromConfig(env.cfg)})
	if err != nil {
		t.Fatal(err)
	}
	ev := &adminstate.EventLog{}
	c, err := adminstate.NewController(factory.Core().V1().Nodes(), mgr, ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	spot, err := adminstate.NewSpotController(kube, factory.Core().V1().Nodes(), factory.Core().V1().Events(), ev, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	factory.Start(ctx.Done())
	wg.Go(func() {
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	wg.Go(func() {
		if err := spot.Run(ctx, 1); err != nil {
			t.Errorf("spot Run: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})
	return &ctrl{kube: kube, c: c, events: ev, source: source}
}

func (c *ctrl) setTaints(t testing.TB, name string, taints ...v1.Taint) {
	t.Helper()
	c.setTaintsAt(t, name, taints...)
}

// setTaintsAt sets the node's taints and returns when the update was sent
// to the API server (after the read that prepares it) and when the API
// server acknowledged it: from then on the taint is visible to watchers.
func (c *ctrl) setTaintsAt(t testing.TB, name string, taints ...v1.Taint) (sent, acked time.Time) {
	t.Helper()
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = taints
	// The fake clientset keeps objects without resource versions; informers
	// treat a relisted object with an unchanged version as a resync, so give
	// every update a new one, as an API server would.
	n.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
	sent = time.Now()
	if _, err := c.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return sent, time.Now()
}

func (c *ctrl) hasTaint(t testing.TB, name, key string) bool {
	t.Helper()
	n, err := c.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range n.Spec.Taints {
		if tt.Key == key {
			return true
		}
	}
	return false
}

// nodeWrites counts the controllers' writes of nodes (patches; the tests
// themselves update nodes).
func (c *ctrl) nodeWrites() int {
	n := 0
	for _, a := range c.kube.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			n++
		}
	}
	return n
}

var (
	taintOOS      = v1.Taint{Key: backendpool.TaintOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute}
	taintShutdown = v1.Taint{Key: backendpool.TaintShutdown, Effect: v1.TaintEffectNoSchedule}
	taintSpot     = v1.Taint{Key: backendpool.TaintDraining, Value: backendpool.TaintDrainingSpotEviction, Effect: v1.TaintEffectNoSchedule}
	taintCordon   = v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
)

func preemptEvent(name, node, uid string, at time.Time) *v1.Event {
	return &v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name, Namespace: "default"},
		InvolvedObject: v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(uid)},
		Reason:         adminstate.ReasonPreemptScheduled,
		Type:           v1.EventTypeWarning,
		FirstTimestamp: metav1.NewTime(at),
		LastTimestamp:  metav1.NewTime(at),
		Count:          1,
	}
}

const (
	down = adminstate.StateDown
	none = adminstate.StateNone
)

// getsOfPools counts backend pool GETs served.
func (env *emuEnv) getsOfPools() int {
	n := 0
	for _, r := range env.emu.Requests() {
		if r.Kind == "arm" && r.Method == http.MethodGet && strings.Contains(strings.ToLower(r.Path), "/backendaddresspools/") {
			n++
		}
	}
	return n
}
