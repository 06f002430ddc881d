package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/nodeagent"
)

// DemoNamespace holds the demo Services.
const DemoNamespace = "demo"

// demoNode is one node of the demo cluster.
type demoNode struct {
	name, ip, ipv6, pool string
}

// DemoNodes: three nodes in pool1 (on load balancer "kubernetes") and two
// in pool2 (on "lb-pool2", whose nodeSelector matches them).
// Their IPv4 addresses are on loopback (the sandbox's subnet is
// 127.240.0.0/16), where the emulator's data plane reaches them.
var demoNodes = []demoNode{
	{"aks-pool1-0", "127.240.0.4", "fd00:10::4", "pool1"},
	{"aks-pool1-1", "127.240.0.5", "fd00:10::5", "pool1"},
	{"aks-pool1-2", "127.240.0.6", "fd00:10::6", "pool1"},
	{"aks-pool2-0", "127.240.1.4", "fd00:10::104", "pool2"},
	{"aks-pool2-1", "127.240.1.5", "fd00:10::105", "pool2"},
}

// demoAgentNodes are the demo nodes as the node agent runs them: without a
// VM (createDemo registers them), so only their kube-proxy runs.
func demoAgentNodes() []nodeagent.Node {
	out := make([]nodeagent.Node, 0, len(demoNodes))
	for _, d := range demoNodes {
		out = append(out, nodeagent.Node{Name: d.name, IPs: []string{d.ip, d.ipv6}})
	}
	return out
}

// RestrictedSource is the one client address the demo Service
// "restricted" admits (spec.loadBalancerSourceRanges): a client on the host
// picks it with `curl --interface 127.0.0.2`; a plain curl comes from
// 127.0.0.1, which the network security group denies.
const RestrictedSource = "127.0.0.2"

// annotationPIPName names the public IP a Service uses.
const annotationPIPName = "service.beta.kubernetes.io/azure-pip-name"

// annotationLBConfigurations places a Service on the load balancers of
// the multipleStandardLoadBalancerConfigurations it names.
const annotationLBConfigurations = "service.beta.kubernetes.io/azure-load-balancer-configurations"

// demoPlacement is the load balancer configuration each Service of the
// default demo is placed on (by annotation).
var demoPlacement = map[string]string{"web": "kubernetes", "restricted": "kubernetes", "api": "lb-pool2", "echo": "lb-pool2", "echo-tcp": "lb-pool2"}

// demoServices are the Services of the default demo, each answering
// through the data plane once the sandbox is ready.
var demoServices = []string{"web", "api", "restricted", "echo", "echo-tcp"}

// SharedIPName is the public IP the demo Services "echo" (UDP 53) and
// "echo-tcp" (TCP 53) share (azure-pip-name), the DNS pattern: one
// address, a Service per protocol (docs/load-balancers.md, Sharing an IP).
const SharedIPName = "sandbox-dns-ip"

// EchoPort is the port of the demo Service "echo": UDP, DNS-like. Each
// datagram is answered by the node that received it, with its name and the
// datagram echoed (nodeagent.UDPReply): `echo hi | nc -u -w1 IP 53`.
const EchoPort = 53

// demoSource is the client address a demo Service admits (the zero Addr:
// any, a plain client on the host).
func demoSource(svc string) netip.Addr {
	if svc == "restricted" {
		return netip.MustParseAddr(RestrictedSource)
	}
	return netip.Addr{}
}

// createDemo creates the demo nodes, namespace and Services: "web"
// (ExternalTrafficPolicy=Cluster, port 80), "api" (ExternalTrafficPolicy=Local,
// port 8080), "restricted" (like web, but only RestrictedSource may
// connect), "echo" (ExternalTrafficPolicy=Cluster, UDP port EchoPort, a
// DNS-like echo) and "echo-tcp" (TCP port EchoPort, on the same public IP
// as echo: SharedIPName), and their EndpointSlices, and "private"
// (privatelink.go: internal, published through a Private Link Service).
// Each Service is placed by
// annotation (annotationLBConfigurations): web and restricted on
// "kubernetes" (the pool1 nodes), api and echo on "lb-pool2" (the pool2
// nodes). Created together, Services left to automatic placement are
// spread across the load balancers in no fixed way, and the README (curl
// web, taint aks-pool1-1: never served by it) and the end-to-end test
// count on where each one is.
func createDemo(ctx context.Context, cs kubernetes.Interface) error {
	for _, d := range demoNodes {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.name, Labels: map[string]string{
			"kubernetes.azure.com/agentpool": d.pool,
			v1.LabelHostname:                 d.name,
		}}}
		n.Spec.ProviderID = fmt.Sprintf("azure:///subscriptions/sandbox/resourceGroups/azlb-rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-%s-vmss/virtualMachines/0", d.pool)
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: d.ip}, {Type: v1.NodeInternalIP, Address: d.ipv6}, {Type: v1.NodeHostName, Address: d.name}}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", d.name, err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	web := demoService("web", 80, v1.ServiceExternalTrafficPolicyCluster)
	api := demoService("api", 8080, v1.ServiceExternalTrafficPolicyLocal)
	restricted := demoService("restricted", 80, v1.ServiceExternalTrafficPolicyCluster)
	restricted.Spec.LoadBalancerSourceRanges = []string{RestrictedSource + "/32"}
	echo := demoService("echo", EchoPort, v1.ServiceExternalTrafficPolicyCluster)
	echo.Spec.Ports[0].Name, echo.Spec.Ports[0].Protocol = "dns", v1.ProtocolUDP
	echoTCP := demoService("echo-tcp", EchoPort, v1.ServiceExternalTrafficPolicyCluster)
	echoTCP.Spec.Ports[0].Name = "dns-tcp"
	for _, svc := range []*v1.Service{web, api, restricted, echo, echoTCP} {
		svc.Annotations = map[string]string{annotationLBConfigurations: demoPlacement[svc.Name]}
		if svc == echo || svc == echoTCP {
			svc.Annotations[annotationPIPName] = SharedIPName
		}
		if _, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s: %w", svc.Name, err)
		}
	}
	// The Services' pods: "web" on two nodes (traffic reaching any node is
	// forwarded to them), "api" on aks-pool1-1 and aks-pool2-0 (only those
	// answer its health probe), "restricted" and "echo" on two nodes as web.
	echoSlice := demoSlice("echo", EchoPort, map[string]string{"aks-pool1-1": "10.244.1.53", "aks-pool2-0": "10.244.3.53"})
	echoSlice.Ports[0].Name, echoSlice.Ports[0].Protocol = ptr.To("dns"), ptr.To(v1.ProtocolUDP)
	for _, sl := range []*discoveryv1.EndpointSlice{
		demoSlice("web", 80, map[string]string{"aks-pool1-0": "10.244.0.10", "aks-pool2-1": "10.244.4.10"}),
		demoSlice("api", 8080, map[string]string{"aks-pool1-1": "10.244.1.10", "aks-pool2-0": "10.244.3.10"}),
		demoSlice("restricted", 80, map[string]string{"aks-pool1-2": "10.244.2.30", "aks-pool2-1": "10.244.4.30"}),
		echoSlice,
		demoSlice("echo-tcp", EchoPort, map[string]string{"aks-pool1-1": "10.244.1.54", "aks-pool2-0": "10.244.3.54"}),
	} {
		if _, err := cs.DiscoveryV1().EndpointSlices(DemoNamespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create endpointslice %s: %w", sl.Name, err)
		}
	}
	// "private", published through a Private Link Service (privatelink.go).
	return createPrivateDemo(ctx, cs)
}

// demoSlice is an EndpointSlice of a demo Service with one ready endpoint
// per node (node name -> pod address).
func demoSlice(svc string, port int32, pods map[string]string) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: DemoNamespace, Name: svc + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "azlb-sandbox"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(port), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	nodes := make([]string, 0, len(pods))
	for n := range pods {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	for _, n := range nodes {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{pods[n]}, NodeName: ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return sl
}

func demoService(name string, port int32, policy v1.ServiceExternalTrafficPolicy) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: name},
		Spec: v1.ServiceSpec{
			Type:                  v1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy: policy,
			Selector:              map[string]string{"app": name},
			Ports:                 []v1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(port), Protocol: v1.ProtocolTCP}},
		},
	}
}
