package integration

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/adminstate"
	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/provider"
	"github.com/azlb/azlb/internal/testutil"
)

// cutoverLatency is added to every ARM call, as in the admin-state
// benchmarks (L = 25 ms).
const cutoverLatency = 25 * time.Millisecond

// BenchmarkCutover measures what clients feel while a node leaves
// service: 200 new connections per second to a Cluster Service on four
// nodes, through the emulator's data plane (probe: azlb's default TCP probe
// on the node port, 5 s x 2), with azlb's provider and admin-state
// controller writing the load balancer. Each scenario runs on a fresh
// cluster, and the node leaves at a random point of the probe cycle (run
// with -count for the spread).
//
//	go test -run '^$' -bench BenchmarkCutover -benchtime 1x ./test/integration/
func BenchmarkCutover(b *testing.B) {
	for _, sc := range testutil.CutoverScenarios {
		b.Run(sc.Name, func(b *testing.B) {
			for range b.N {
				cl := startCutoverCluster(b, 4)
				c := cl.cutover("node-1")
				c.Jitter = 5 * time.Second // a random point of the 5 s probe cycle
				rep := testutil.RunCutover(b, sc, c)
				b.ReportMetric(float64(rep.Failed), "failed-conns")
				b.ReportMetric(float64(rep.Window.Milliseconds()), "window-ms")
				b.ReportMetric(float64(rep.Sent), "conns")
				if rep.EstablishedSurvived != nil {
					b.ReportMetric(boolMetric(*rep.EstablishedSurvived), "established-survived")
				}
				b.Log(rep)
				b.Logf("timeline (100 ms per character; # node-1, x failed, . other nodes, | event, S stop):\n%s", rep.Timeline("node-1", 100*time.Millisecond))
			}
		})
	}
}

func boolMetric(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}

// cutoverCluster is azlb's provider and admin-state controller over a
// fake clientset, the emulator with its data plane, and one backend per
// node on loopback.
type cutoverCluster struct {
	kube     *fake.Clientset
	frontend netip.AddrPort
	backends map[string]*testutil.Backend
}

func startCutoverCluster(t testing.TB, nodes int) *cutoverCluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	publicNet, nodeNet := testutil.LoopbackNet(t), testutil.LoopbackNet(t)
	// The nodes are the subnet, so its NSG (where the provider writes the
	// Service's allow rule) governs their flows.
	env := testutil.StartEmulator(t, emulator.Options{DataPlane: true, PublicIPv4CIDR: publicNet.String(), Latency: cutoverLatency, Throttle: emulator.NoThrottle}, nil,
		devenv.WithNetwork(devenv.NodeNetwork(nodeNet)))
	clients := testutil.Clients(t, env, azure.ClientOptions{Source: "cutover"})
	store := testutil.StartStore(t, lbstore.Options{Config: env.Config, LoadBalancers: clients.LoadBalancer, Pools: clients.BackendPool})
	sg := testutil.StartSecurityGroups(t, env.Config, clients.SecurityGroup)
	kube := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(kube, 0)
	p, err := provider.New(provider.Options{Config: env.Config, Clients: clients, Store: store, SecurityGroups: sg, Nodes: factory.Core().V1().Nodes().Lister()})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := adminstate.NewManager(store, adminstate.ManagerOptions{Policy: backendpool.PolicyFromConfig(env.Config), Source: "cutover"})
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := adminstate.NewController(factory.Core().V1().Nodes(), mgr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	factory.Start(ctx.Done())
	wg.Go(func() {
		if err := ctrl.Run(ctx); err != nil {
			t.Errorf("admin-state controller: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		factory.Shutdown()
	})

	cl := &cutoverCluster{kube: kube, backends: map[string]*testutil.Backend{}}
	nodePort := testutil.FreePort(t, testutil.Nth(nodeNet, 1))
	var objs []*v1.Node
	for i := 1; i <= nodes; i++ {
		name := fmt.Sprintf("node-%d", i)
		ip := testutil.Nth(nodeNet, i)
		n := testutil.Node(name, testutil.InternalIPs(ip.String()))
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, n)
		cl.backends[name] = testutil.StartBackend(t, name, netip.AddrPortFrom(ip, nodePort))
	}
	// The first public IP of the range is the Service's.
	ingress := testutil.Nth(publicNet, 1)
	svc := testutil.Service("default", "web", testutil.Annotations(annotations.KeyDisableFloatingIP, "true"))
	svc.Spec.Ports[0].Port = int32(testutil.FreePort(t, ingress))
	svc.Spec.Ports[0].NodePort = int32(nodePort)
	testutil.Poll(t, waitFor, "the node informer", func() bool {
		l, _ := factory.Core().V1().Nodes().Lister().List(labels.Everything())
		return len(l) == nodes
	})
	st, err := p.EnsureLoadBalancer(ctx, "kubernetes", svc, objs)
	if err != nil {
		t.Fatalf("EnsureLoadBalancer: %v", err)
	}
	if len(st.Ingress) == 0 || st.Ingress[0].IP != ingress.String() {
		t.Fatalf("ingress %+v, want %s", st.Ingress, ingress)
	}
	cl.frontend = netip.AddrPortFrom(ingress, uint16(svc.Spec.Ports[0].Port))
	testutil.Poll(t, 20*time.Second, "every node probed up", func() bool {
		s, _ := env.Emulator().DataPlaneStatus()
		if len(s.Rules) != 1 || len(s.Rules[0].Members) != nodes {
			return false
		}
		for _, m := range s.Rules[0].Members {
			if !m.Eligible {
				return false
			}
		}
		return true
	})
	return cl
}

// cutover is the RunCutover input for a node of the cluster.
func (cl *cutoverCluster) cutover(node string) testutil.Cutover {
	return testutil.Cutover{
		Frontend: cl.frontend,
		Node:     node,
		Stop:     cl.backends[node].Stop,
		Taint: func(ctx context.Context) error {
			n, err := cl.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: backendpool.TaintOutOfService, Value: "nodeshutdown", Effect: v1.TaintEffectNoExecute})
			// The fake clientset keeps no resource versions; informers need
			// a new one to see an update.
			n.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
			_, err = cl.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		},
	}
}
