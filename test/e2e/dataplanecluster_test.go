package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/testutil"
)

// dataPlaneCluster is a cluster whose Services carry traffic: an emulator
// with its data plane, nodes on a loopback range (the virtual network's
// subnet) each running the simulated kube-proxy (nodeagent) over the API
// server's Services and EndpointSlices, and the controller.
type dataPlaneCluster struct {
	env *devenv.Env
	// public is the range of the Services' public IPs.
	public netip.Prefix
	nodes  []string
	addrs  map[string]netip.Addr
	ns     string
}

// startDataPlaneCluster starts a cluster of n nodes named prefix-n1, ...
// Everything stops when the test ends.
func startDataPlaneCluster(t *testing.T, prefix string, n int) *dataPlaneCluster {
	return startDataPlaneClusterWith(t, prefix, n, clusterOptions{proxies: true})
}

// clusterOptions are what a data plane cluster's tests change.
type clusterOptions struct {
	// features are the subscription's registered features.
	features []string
	// config is added to the controller's azure.json.
	config map[string]any
	// proxies runs the simulated kube-proxy on each node; without it the
	// test serves the node ports itself.
	proxies bool
}

func startDataPlaneClusterWith(t *testing.T, prefix string, n int, o clusterOptions) *dataPlaneCluster {
	t.Helper()
	ctx := context.Background()
	public, nodeNet := testutil.LoopbackNet(t), testutil.LoopbackNet(t)
	// The nodes are the subnet, so the subnet's NSG (where the controller
	// writes the Services' rules) governs their flows.
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: public.String(), Features: o.features},
		nil, devenv.WithNetwork(devenv.NodeNetwork(nodeNet)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() }) // after the controller stops
	notThrottled(t, env)
	c := &dataPlaneCluster{env: env, public: public, addrs: map[string]netip.Addr{}}
	var agents []nodeagent.Node
	for i := range n {
		name, ip := fmt.Sprintf("%s-n%d", prefix, i+1), testutil.Nth(nodeNet, i+1)
		createNode(t, name, ip.String(), nil)
		c.nodes = append(c.nodes, name)
		c.addrs[name] = ip
		agents = append(agents, nodeagent.Node{Name: name, IPs: []string{ip.String()}})
	}
	if o.proxies {
		runProxies(t, agents)
	}
	startController(t, "a", writeConfigFor(t, env, o.config), false)
	c.ns = createNamespace(t)
	return c
}

// runProxies runs the simulated kube-proxy of nodes (registered by the
// test: the agents have no VM) until the test ends.
func runProxies(t *testing.T, nodes []nodeagent.Node) {
	t.Helper()
	f := informers.NewSharedInformerFactory(suite.cs, 0)
	svcs, slices := f.Core().V1().Services(), f.Discovery().V1().EndpointSlices()
	svcs.Informer()
	slices.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := nodeagent.RunAll(ctx, nodes, nodeagent.Options{Client: suite.cs,
			Services: svcs.Lister(), EndpointSlices: slices.Lister(), Interval: 200 * time.Millisecond}); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		f.Shutdown()
	})
}

// createService creates svc with an EndpointSlice of one ready endpoint
// on each of the nodes, and returns it as created (with its node ports).
// The Service is gone before the controller stops: one left behind with
// its finalizer would join the next test's load balancer.
func (c *dataPlaneCluster) createService(t *testing.T, svc *v1.Service, endpointNodes ...string) *v1.Service {
	t.Helper()
	ctx := context.Background()
	created, err := suite.cs.CoreV1().Services(c.ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteServiceAndWait(t, c.ns, svc.Name) })
	if _, err := suite.cs.DiscoveryV1().EndpointSlices(c.ns).Create(ctx, endpointSlice(c.ns, svc.Name, endpointNodes...), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return created
}

// frontend waits for the Service's ingress IP and returns it with the
// Service's (first) port.
func (c *dataPlaneCluster) frontend(t *testing.T, svc *v1.Service) netip.AddrPort {
	t.Helper()
	ip, err := netip.ParseAddr(ingressIP(t, svc.Namespace, svc.Name))
	if err != nil {
		t.Fatal(err)
	}
	if !c.public.Contains(ip) {
		t.Fatalf("ingress IP %s is not in the data plane's range %s", ip, c.public)
	}
	return netip.AddrPortFrom(ip, uint16(svc.Spec.Ports[0].Port))
}

// ruleStatus is the data plane's view of the rules on a frontend (served,
// probe, members' health), for failure messages.
func (c *dataPlaneCluster) ruleStatus(fe netip.AddrPort) string {
	st, _ := c.env.Emulator().DataPlaneStatus()
	var out []string
	for _, r := range st.Rules {
		if r.Frontend != fe.String() {
			continue
		}
		b, _ := json.Marshal(r) // a RuleStatus always marshals
		out = append(out, string(b))
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "no rule on " + fe.String()
	}
	return strings.Join(out, "; ")
}

// nodePortWeb creates the Service "web" (floating IP off: the backend port
// is the node port) on every node of the cluster, without endpoints, and a
// test backend on each node's node port, named after the node. It returns
// the frontend once the ingress IP is the range's first public IP and
// every node is probed up in the data plane.
func (c *dataPlaneCluster) nodePortWeb(t *testing.T) (netip.AddrPort, map[string]*testutil.Backend) {
	t.Helper()
	ingress := testutil.Nth(c.public, 1)
	svc := loadBalancerService(c.ns, "web", int32(testutil.FreePort(t, ingress)))
	svc.Annotations = map[string]string{annotations.KeyDisableFloatingIP: "true"}
	svc, err := suite.cs.CoreV1().Services(c.ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Gone before the controller stops (cleanups run last first): a
	// Service left behind with its finalizer would join the next test's
	// load balancer.
	t.Cleanup(func() { deleteServiceAndWait(t, c.ns, "web") })
	nodePort := uint16(svc.Spec.Ports[0].NodePort)
	backends := map[string]*testutil.Backend{}
	for _, name := range c.nodes {
		backends[name] = testutil.StartBackend(t, name, netip.AddrPortFrom(c.addrs[name], nodePort))
	}
	if ip := ingressIP(t, c.ns, "web"); ip != ingress.String() {
		t.Fatalf("ingress IP %s, want %s", ip, ingress)
	}
	eventually(t, 30*time.Second, "every node probed up in the data plane", func(context.Context) (bool, error) {
		st, _ := c.env.Emulator().DataPlaneStatus()
		if len(st.Rules) != 1 || len(st.Rules[0].Members) != len(c.nodes) {
			return false, nil
		}
		for _, m := range st.Rules[0].Members {
			if !m.Eligible {
				return false, nil
			}
		}
		return true, nil
	})
	return netip.AddrPortFrom(ingress, uint16(svc.Spec.Ports[0].Port)), backends
}
