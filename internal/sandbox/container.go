package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
)

// ContainerAzureJSON is the container sandbox's azure.json: pod-based load
// balancing (serviceGatewayEnabled, podIP pools, the service SKU).
func ContainerAzureJSON(url, caFile string) []byte {
	var m map[string]any
	_ = json.Unmarshal(devenv.ConfigJSON(url, caFile), &m) // ConfigJSON is always a JSON object
	m["serviceGatewayEnabled"] = true
	m["loadBalancerBackendPoolConfigurationType"] = "podIP"
	m["loadBalancerSku"] = "service"
	b, _ := json.MarshalIndent(m, "", "  ") // maps of JSON values always marshal
	return append(b, '\n')
}

// containerDemoNodes: three nodes, dual-stack.
var containerDemoNodes = []demoNode{
	{"aks-nodepool1-0", "10.240.0.4", "fd00:10::4", "nodepool1"},
	{"aks-nodepool1-1", "10.240.0.5", "fd00:10::5", "nodepool1"},
	{"aks-nodepool1-2", "10.240.0.6", "fd00:10::6", "nodepool1"},
}

// containerDemoPods are the ready endpoints of the demo Services: Service
// -> node -> pod IP.
var containerDemoPods = map[string]map[string]string{
	"web": {"aks-nodepool1-0": "10.244.0.10", "aks-nodepool1-1": "10.244.1.10", "aks-nodepool1-2": "10.244.2.10"},
	"api": {"aks-nodepool1-0": "10.244.0.20", "aks-nodepool1-2": "10.244.2.20"},
}

// createContainerDemo creates the nodes, the namespace, the Services "web"
// (port 80 to 8080) and "api" (port 8080) and their EndpointSlices (the
// sandbox runs no EndpointSlice controller or kubelet).
func createContainerDemo(ctx context.Context, cs kubernetes.Interface) error {
	for _, d := range containerDemoNodes {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.name, Labels: map[string]string{"kubernetes.azure.com/agentpool": d.pool, v1.LabelHostname: d.name}}}
		n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: d.ip}, {Type: v1.NodeInternalIP, Address: d.ipv6}, {Type: v1.NodeHostName, Address: d.name}}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", d.name, err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, d := range []struct {
		name       string
		port, pods int32
	}{{"web", 80, 8080}, {"api", 8080, 8080}} {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: d.name},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": d.name},
				Ports: []v1.ServicePort{{Name: "http", Port: d.port, TargetPort: intstr.FromInt32(d.pods), Protocol: v1.ProtocolTCP}}},
		}
		created, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, svc, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = cs.CoreV1().Services(DemoNamespace).Get(ctx, d.name, metav1.GetOptions{})
		}
		if err != nil {
			return fmt.Errorf("create service %s: %w", d.name, err)
		}
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: DemoNamespace, Name: d.name + "-1",
				Labels:          map[string]string{discoveryv1.LabelServiceName: d.name, discoveryv1.LabelManagedBy: "azlb-sandbox"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: d.name, UID: created.UID}}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(d.pods), Protocol: ptr.To(v1.ProtocolTCP)}},
		}
		for _, n := range containerDemoNodes {
			if ip, ok := containerDemoPods[d.name][n.name]; ok {
				slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, NodeName: ptr.To(n.name),
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
			}
		}
		if _, err := cs.DiscoveryV1().EndpointSlices(DemoNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create endpointslice %s: %w", slice.Name, err)
		}
	}
	return nil
}

// waitGatewayAddresses waits until the service gateway holds every demo pod
// and returns how many addresses it holds.
func waitGatewayAddresses(ctx context.Context, env *devenv.Env, pods map[string]map[string]string) (int, error) {
	want := 0
	for _, p := range pods {
		want += len(p)
	}
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "azlb-sandbox"})
	if err != nil {
		return 0, err
	}
	defer clients.Close()
	got := 0
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		locs, err := clients.ServiceGateway.GetAddressLocations(ctx, devenv.ResourceGroup, names.ServiceGateway)
		if err != nil {
			return false, nil
		}
		got = 0
		for _, l := range locs {
			got += len(l.Addresses)
		}
		return got >= want, nil
	})
	return got, err
}
