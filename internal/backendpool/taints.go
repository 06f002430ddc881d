package backendpool

import (
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/config"
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
	// TaintKarpenterDisrupted is Karpenter's deletion taint (effect
	// NoSchedule), one of the default loadBalancerAdminStateTaints, with
	// TaintToBeDeletedByClusterAutoscaler.
	TaintKarpenterDisrupted = config.TaintKarpenterDisrupted
)

// builtinTaints always take a node out of rotation, whatever azure.json
// says; loadBalancerAdminStateTaints adds to them.
var builtinTaints = []config.TaintSelector{
	{Key: TaintOutOfService},
	{Key: TaintShutdown},
	{Key: TaintDraining, Value: TaintDrainingSpotEviction},
}

// defaultTaints is what loadBalancerAdminStateTaints adds when unset.
var defaultTaints = (&config.Config{}).AdminStateTaints()

// taintMatches reports whether the node's taint t is one sel selects: the
// same key, and the same value and effect where sel names them.
func taintMatches(sel config.TaintSelector, t v1.Taint) bool {
	return t.Key == sel.Key && (sel.Value == "" || t.Value == sel.Value) &&
		(sel.Effect == "" || string(t.Effect) == sel.Effect)
}

// OutOfServiceReasons returns the keys of the node's taints that take it
// out of rotation: the built-in ones first, in a fixed order, then the
// policy's (Policy.Taints, in their order), each key once; empty means the
// node is in service.
func (p Policy) OutOfServiceReasons(node *v1.Node) []string {
	if node == nil {
		return nil
	}
	extra := p.Taints
	if extra == nil {
		extra = defaultTaints
	}
	var out []string
	for _, list := range [][]config.TaintSelector{builtinTaints, extra} {
		for _, sel := range list {
			for _, t := range node.Spec.Taints {
				if taintMatches(sel, t) && !contains(out, sel.Key) {
					out = append(out, sel.Key)
					break
				}
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// DesiredState is the backend AdminState every pool entry of the node must
// have by its taints: Down while any of OutOfServiceReasons is present,
// None otherwise (State applies it only while AdminState is on).
func (p Policy) DesiredState(node *v1.Node) armnetwork.LoadBalancerBackendAddressAdminState {
	if len(p.OutOfServiceReasons(node)) > 0 {
		return armnetwork.LoadBalancerBackendAddressAdminStateDown
	}
	return armnetwork.LoadBalancerBackendAddressAdminStateNone
}

// OutOfServiceReasons is Policy.OutOfServiceReasons with the default
// loadBalancerAdminStateTaints (an azure.json that does not set them).
func OutOfServiceReasons(node *v1.Node) []string { return Policy{}.OutOfServiceReasons(node) }

// IsOutOfService reports whether any taint of the default policy that takes
// a node out of rotation is on the node.
func IsOutOfService(node *v1.Node) bool { return len(OutOfServiceReasons(node)) > 0 }

// DesiredState is Policy.DesiredState with the default
// loadBalancerAdminStateTaints.
func DesiredState(node *v1.Node) armnetwork.LoadBalancerBackendAddressAdminState {
	return Policy{}.DesiredState(node)
}
