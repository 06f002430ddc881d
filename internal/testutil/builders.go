package testutil

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// NodeOption edits a node built by Node.
type NodeOption func(*v1.Node)

// Node builds a node with the name as UID ("uid-<name>") and the options
// applied.
func Node(name string, opts ...NodeOption) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}}}
	for _, o := range opts {
		o(n)
	}
	return n
}

// InternalIPs adds InternalIP addresses.
func InternalIPs(ips ...string) NodeOption {
	return func(n *v1.Node) {
		for _, ip := range ips {
			n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
		}
	}
}

// UID sets the node's UID.
func UID(uid types.UID) NodeOption { return func(n *v1.Node) { n.UID = uid } }

// Taints sets the node's taints.
func Taints(taints ...v1.Taint) NodeOption {
	return func(n *v1.Node) { n.Spec.Taints = append([]v1.Taint(nil), taints...) }
}

// Labels adds labels (key, value pairs).
func Labels(kv ...string) NodeOption {
	return func(n *v1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

// Taint is a NoExecute taint with the key and value.
func Taint(key, value string) v1.Taint {
	return v1.Taint{Key: key, Value: value, Effect: v1.TaintEffectNoExecute}
}

// ServiceOption edits a Service built by Service.
type ServiceOption func(*v1.Service)

// Service builds a LoadBalancer Service with one TCP port 80 (node port
// 30080) and the UID "uid-<namespace>-<name>".
func Service(namespace, name string, opts ...ServiceOption) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name)},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeLoadBalancer,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Local makes the Service ExternalTrafficPolicy=Local (health check node
// port 32000).
func Local(s *v1.Service) {
	s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32000
}

// Annotations adds annotations (key, value pairs).
func Annotations(kv ...string) ServiceOption {
	return func(s *v1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// Families sets the Service's IP families.
func Families(f ...v1.IPFamily) ServiceOption {
	return func(s *v1.Service) { s.Spec.IPFamilies = append([]v1.IPFamily(nil), f...) }
}

// Poll checks cond every few milliseconds until it holds, failing the test
// when timeout passes first.
func Poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 2*time.Millisecond, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
