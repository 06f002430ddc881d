package backendpool

import (
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
)

// The durable signals that take a node out of load balancer rotation.
// Cordoning (spec.unschedulable, node.kubernetes.io/unschedulable) is
// deliberately not one of them: it toggles often and does not mean "stop
// traffic now".
const (
	// TaintOutOfService is the GA out-of-service taint, applied by operators
	// or maintenance automation. Any value and effect counts.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// TaintShutdown is applied by the cloud node lifecycle controller when the
	// cloud reports the node shut down. Any value and effect counts.
	TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// TaintDraining with value TaintDrainingSpotEviction marks a Spot VM
	// about to be evicted. azlb adds it on the first PreemptScheduled event;
	// operators may add it by hand. Only this value counts.
	TaintDraining             = "cloudprovider.azure.microsoft.com/draining"
	TaintDrainingSpotEviction = "spot-eviction"
)

// OutOfServiceReasons returns the supported taints present on the node, in
// a fixed order; empty means the node is in service.
func OutOfServiceReasons(node *v1.Node) []string {
	if node == nil {
		return nil
	}
	var out []string
	for _, key := range []string{TaintOutOfService, TaintShutdown, TaintDraining} {
		for _, t := range node.Spec.Taints {
			if t.Key != key {
				continue
			}
			if key == TaintDraining && t.Value != TaintDrainingSpotEviction {
				continue
			}
			out = append(out, key)
			break
		}
	}
	return out
}

// IsOutOfService reports whether any supported taint is on the node.
func IsOutOfService(node *v1.Node) bool { return len(OutOfServiceReasons(node)) > 0 }

// DesiredState is the backend AdminState every pool entry of the node must
// have: Down while any supported taint is present, None otherwise. Policy
// applies it only while enableLoadBalancerAdminState is on.
func DesiredState(node *v1.Node) armnetwork.LoadBalancerBackendAddressAdminState {
	if IsOutOfService(node) {
		return armnetwork.LoadBalancerBackendAddressAdminStateDown
	}
	return armnetwork.LoadBalancerBackendAddressAdminStateNone
}
