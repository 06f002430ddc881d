package nodeagent

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// proxyRig is one node's proxy over a fake clientset.
type proxyRig struct {
	t      *testing.T
	kube   *fake.Clientset
	p      *Proxy
	ip     netip.Addr
	svcs   corelisters.ServiceLister
	slices discoverylisters.EndpointSliceLister
}

func newProxyRig(t *testing.T, objs ...any) *proxyRig {
	t.Helper()
	kube := fake.NewClientset()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Service:
			_, err = kube.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discoveryv1.EndpointSlice:
			_, err = kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f := informers.NewSharedInformerFactory(kube, 0)
	svcs, slices := f.Core().V1().Services(), f.Discovery().V1().EndpointSlices()
	svcs.Informer()
	slices.Informer()
	stop := make(chan struct{})
	f.Start(stop)
	f.WaitForCacheSync(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	ip := testutil.Nth(testutil.LoopbackNet(t), 4)
	p, err := NewProxy("node-a", []string{ip.String(), "fd00::4", "10.240.0.4"}, svcs.Lister(), slices.Lister(), klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &proxyRig{t: t, kube: kube, p: p, ip: ip, svcs: svcs.Lister(), slices: slices.Lister()}
}

func (r *proxyRig) sync(running bool) {
	r.t.Helper()
	if err := r.p.Sync(running); err != nil {
		r.t.Fatal(err)
	}
}

// get sends GET / to the node's port; status 0 means the connection failed.
func (r *proxyRig) get(port int32, from netip.Addr) (int, string) {
	r.t.Helper()
	d := &net.Dialer{Timeout: 2 * time.Second}
	if from.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	resp, err := c.Get("http://" + netip.AddrPortFrom(r.ip, uint16(port)).String() + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func svc(name string, port, nodePort int32, mutate ...func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			Ports: []v1.ServicePort{{Port: port, NodePort: nodePort, Protocol: v1.ProtocolTCP}}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func slice(name string, nodes ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name + "-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: name}}, AddressType: discoveryv1.AddressTypeIPv4}
	for i, n := range nodes {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.0." + strconv.Itoa(i+1)},
			NodeName: ptr.To(n), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return es
}

func ports(t *testing.T) (int32, int32) {
	t.Helper()
	a := testutil.Nth(testutil.LoopbackNet(t), 1)
	return int32(testutil.FreePort(t, a)), int32(testutil.FreePort(t, a))
}

func TestProxyServesTheNodePortAndTheFloatingIPPort(t *testing.T) {
	port, nodePort := ports(t)
	r := newProxyRig(t, svc("web", port, nodePort), slice("web", "node-b"))
	r.sync(true)
	for _, p := range []int32{nodePort, port} {
		if code, body := r.get(p, netip.Addr{}); code != http.StatusOK || body != "node-a\n" {
			t.Fatalf("port %d: %d %q", p, code, body)
		}
	}
	if code, _ := r.get(ProxyHealthPort, netip.Addr{}); code != http.StatusOK {
		t.Fatalf("kube-proxy healthz: %d", code)
	}
	r.sync(false) // the node stops
	if code, body := r.get(nodePort, netip.Addr{}); code != 0 {
		t.Fatalf("a stopped node answered: %d %q", code, body)
	}
	r.sync(true)
	if code, _ := r.get(nodePort, netip.Addr{}); code != http.StatusOK {
		t.Fatalf("the restarted node: %d", code)
	}
}

func TestProxyWithoutFloatingIPServesOnlyTheNodePort(t *testing.T) {
	port, nodePort := ports(t)
	r := newProxyRig(t, svc("web", port, nodePort, func(s *v1.Service) {
		s.Annotations = map[string]string{annotationDisableFloatingIP: "true"}
	}), slice("web", "node-a"))
	r.sync(true)
	if code, _ := r.get(nodePort, netip.Addr{}); code != http.StatusOK {
		t.Fatalf("node port: %d", code)
	}
	if code, _ := r.get(port, netip.Addr{}); code != 0 {
		t.Fatalf("the Service port is served without floating IP: %d", code)
	}
}

func TestProxyLocalServiceFollowsLocalEndpoints(t *testing.T) {
	port, nodePort := ports(t)
	hc := int32(testutil.FreePort(t, testutil.Nth(testutil.LoopbackNet(t), 1)))
	local := func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	}
	r := newProxyRig(t, svc("api", port, nodePort, local), slice("api", "node-b"))
	r.sync(true)
	if code, body := r.get(hc, netip.Addr{}); code != http.StatusServiceUnavailable {
		t.Fatalf("health check without a local endpoint: %d %q", code, body)
	}
	if code, _ := r.get(nodePort, netip.Addr{}); code != 0 {
		t.Fatalf("traffic of a Local Service on a node without endpoints: %d, want a reset", code)
	}
	es := slice("api", "node-a", "node-b")
	if _, err := r.kube.DiscoveryV1().EndpointSlices("demo").Update(context.Background(), es, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "the health check answering 200", func() bool {
		code, _ := r.get(hc, netip.Addr{})
		return code == http.StatusOK
	})
	if code, body := r.get(nodePort, netip.Addr{}); code != http.StatusOK || body != "node-a\n" {
		t.Fatalf("traffic with a local endpoint: %d %q", code, body)
	}
}

func TestProxyResetsTrafficOfAServiceWithoutEndpoints(t *testing.T) {
	port, nodePort := ports(t)
	r := newProxyRig(t, svc("web", port, nodePort))
	r.sync(true)
	_, err := net.DialTimeout("tcp4", netip.AddrPortFrom(r.ip, uint16(nodePort)).String(), time.Second)
	if err != nil {
		t.Fatalf("the port is not open: %v", err)
	}
	if code, msg := r.get(nodePort, netip.Addr{}); code != 0 {
		t.Fatalf("a Service without endpoints answered %d %q", code, msg)
	}
}

// Two floating-IP Services on one port: the connection's source (the data
// plane connects from the frontend's address) picks the Service.
func TestProxyTellsFloatingIPServicesApartByFrontend(t *testing.T) {
	port, _ := ports(t)
	lo := testutil.LoopbackNet(t)
	a, b := testutil.Nth(lo, 1), testutil.Nth(lo, 2)
	ingress := func(ip netip.Addr) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip.String()}}
		}
	}
	r := newProxyRig(t, svc("has-endpoints", port, 0, ingress(a)), svc("empty", port, 0, ingress(b)), slice("has-endpoints", "node-z"))
	r.sync(true)
	if code, _ := r.get(port, a); code != http.StatusOK {
		t.Fatalf("through the frontend of the Service with endpoints: %d", code)
	}
	if code, _ := r.get(port, b); code != 0 {
		t.Fatalf("through the frontend of the Service without endpoints: %d, want a reset", code)
	}
}

func TestNewProxyNeedsItsInputs(t *testing.T) {
	if _, err := NewProxy("", nil, nil, nil, klog.Background()); err == nil {
		t.Fatal("NewProxy accepted no node and no listers")
	}
}

// The Agent runs the node's kube-proxy: its ports are open while the VM
// runs and closed while it does not; a node without a VM always serves and
// is not registered by the Agent.
func TestAgentServesTheNodesPortsWhileItsVMRuns(t *testing.T) {
	ctx := context.Background()
	port, nodePort := ports(t)
	r := newProxyRig(t, svc("web", port, nodePort), slice("web", "node-b"))
	power := &fakePower{state: "running", found: true}
	o := Options{Client: r.kube, Power: power, Clock: clocktesting.NewFakeClock(time.Now()), Services: r.svcs, EndpointSlices: r.slices}
	a, err := New(Node{Name: "node-a", ProviderID: "azure:///vm-a", IPs: []string{r.ip.String()}}, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.proxy.Close)
	step := func(ag *Agent) {
		t.Helper()
		if err := ag.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step(a)
	if code, body := r.get(nodePort, netip.Addr{}); code != http.StatusOK || body != "node-a\n" {
		t.Fatalf("a running node: %d %q", code, body)
	}
	power.set("deallocated", true)
	step(a)
	if code, _ := r.get(nodePort, netip.Addr{}); code != 0 {
		t.Fatalf("a deallocated node answered %d", code)
	}

	other := testutil.Nth(testutil.LoopbackNet(t), 5)
	b, err := New(Node{Name: "node-b", IPs: []string{other.String()}}, Options{Client: r.kube, Services: r.svcs, EndpointSlices: r.slices})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.proxy.Close)
	step(b)
	r.ip = other
	if code, body := r.get(nodePort, netip.Addr{}); code != http.StatusOK || body != "node-b\n" {
		t.Fatalf("a node without a VM: %d %q", code, body)
	}
	if _, err := r.kube.CoreV1().Nodes().Get(ctx, "node-b", metav1.GetOptions{}); err == nil {
		t.Fatal("the Agent registered a node without a VM")
	}
	if _, err := New(Node{Name: "node-c", ProviderID: "azure:///vm-c"}, Options{Client: r.kube}); err == nil {
		t.Fatal("a node with a VM and no power source was accepted")
	}
}
