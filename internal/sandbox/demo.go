package sandbox

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// DemoNamespace holds the demo Services.
const DemoNamespace = "demo"

// demoNode is one node of the demo cluster.
type demoNode struct {
	name, ip, ipv6, pool string
}

// DemoNodes: three nodes in pool1 (on load balancer "kubernetes") and two
// in pool2 (on "lb-pool2", whose nodeSelector matches them).
var demoNodes = []demoNode{
	{"aks-pool1-0", "10.240.0.4", "fd00:10::4", "pool1"},
	{"aks-pool1-1", "10.240.0.5", "fd00:10::5", "pool1"},
	{"aks-pool1-2", "10.240.0.6", "fd00:10::6", "pool1"},
	{"aks-pool2-0", "10.240.1.4", "fd00:10::104", "pool2"},
	{"aks-pool2-1", "10.240.1.5", "fd00:10::105", "pool2"},
}

// createDemo creates the demo nodes, namespace and Services: "web"
// (ExternalTrafficPolicy=Cluster, port 80, placed automatically) and "api"
// (ExternalTrafficPolicy=Local, port 8080, placed on lb-pool2 by annotation,
// with an EndpointSlice whose endpoints run on aks-pool1-1 and aks-pool2-0).
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
	api.Annotations = map[string]string{"service.beta.kubernetes.io/azure-load-balancer-configurations": "lb-pool2"}
	for _, svc := range []*v1.Service{web, api} {
		if _, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create service %s: %w", svc.Name, err)
		}
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: DemoNamespace, Name: "api-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "api", discoveryv1.LabelManagedBy: "azlb-sandbox"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.10"}, NodeName: ptr.To("aks-pool1-1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.3.10"}, NodeName: ptr.To("aks-pool2-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(DemoNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create endpointslice: %w", err)
	}
	return nil
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
