package adminstate

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/lbstore"
)

// ConditionLoadBalancerDrained is the node condition the admin-state
// controller maintains when it has a client for it (WithDrainedCondition):
// True once AdminState Down has been in effect on every backend pool entry
// of the node (or no pool holds it) for the pools' drain period; False once
// the node is back in service (None applied) after having been True.
const ConditionLoadBalancerDrained v1.NodeConditionType = "LoadBalancerDrained"

// Reasons of the LoadBalancerDrained condition.
const (
	// DrainedReasonAdminStateDown (True): every entry of the node is Down
	// and the drain period has passed.
	DrainedReasonAdminStateDown = "AdminStateDown"
	// DrainedReasonNotInBackendPools (True): the node is out of service and
	// no backend pool holds it, and the drain period has passed.
	DrainedReasonNotInBackendPools = "NotInBackendPools"
	// DrainedReasonInService (False): the node is back in service (None).
	DrainedReasonInService = "InService"
)

// Option configures a Controller.
type Option func(*Controller)

// WithDrainedCondition has the controller maintain the LoadBalancerDrained
// condition of nodes through kube (the controller's own identity, which
// needs patch on nodes/status). Without it no condition is written.
func WithDrainedCondition(kube kubernetes.Interface) Option {
	return func(c *Controller) { c.kube = kube }
}

// drainedStatus is the status of the node's LoadBalancerDrained condition
// (ConditionUnknown: absent): the one the controller last wrote for the
// node's UID, otherwise the informer's.
func (c *Controller) drainedStatus(n *v1.Node) v1.ConditionStatus {
	c.mu.Lock()
	s, ok := c.drained[n.UID]
	c.mu.Unlock()
	if ok {
		return s
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == ConditionLoadBalancerDrained {
			return cond.Status
		}
	}
	return v1.ConditionUnknown
}

// syncDrained brings the node's LoadBalancerDrained condition in line with
// the state just applied (successfully) for it:
//
//   - Down: True, once the drain period has passed since Down took effect
//     (the node is requeued for then); a node already True is left alone,
//     so a restart, which re-verifies Down, writes nothing.
//   - None: False, only if the condition is True; a node that never had it
//     gets none.
//
// A node deleted or replaced meanwhile is left alone (its patch carries its
// UID as a precondition).
func (c *Controller) syncDrained(ctx context.Context, node *v1.Node, s State) {
	if c.kube == nil {
		return
	}
	var cond v1.NodeCondition
	if sameState(s, StateDown) {
		rec, ok := c.downRecord(node)
		if !ok || c.drainedStatus(node) == v1.ConditionTrue {
			return
		}
		due := rec.since.Add(c.mgr.DrainPeriod())
		if wait := due.Sub(c.clock.Now()); wait > 0 {
			c.queue.AddAfter(node.Name, wait)
			return
		}
		cond = drainedCondition(rec, due, c.mgr.DrainPeriod())
	} else {
		if c.drainedStatus(node) != v1.ConditionTrue {
			return
		}
		cond = v1.NodeCondition{Type: ConditionLoadBalancerDrained, Status: v1.ConditionFalse, Reason: DrainedReasonInService,
			Message: "The node is back in load balancer rotation (AdminState None)", LastTransitionTime: metav1.NewTime(c.clock.Now())}
	}
	cond.LastHeartbeatTime = metav1.NewTime(c.clock.Now())
	log := klog.FromContext(ctx)
	if err := c.patchCondition(ctx, node, cond); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
			// Deleted or replaced (the UID precondition): not ours any more.
			log.V(2).Info("Node gone or replaced; condition not written", "node", node.Name, "err", err)
			return
		}
		log.Error(err, "Writing the node's LoadBalancerDrained condition failed; retrying with backoff", "node", node.Name)
		c.requeue(node.Name, err)
		return
	}
	c.wrote(node, cond.Status)
	log.Info("Node condition written", "node", node.Name, "condition", cond.Type, "status", cond.Status, "reason", cond.Reason,
		"lastTransitionTime", cond.LastTransitionTime.Time)
}

// drainedCondition is the True condition of a node Down since rec.since,
// drained at due.
func drainedCondition(rec nodeRecord, due time.Time, drain time.Duration) v1.NodeCondition {
	cond := v1.NodeCondition{Type: ConditionLoadBalancerDrained, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(due)}
	since := rec.since.UTC().Format(time.RFC3339)
	if len(rec.pools) == 0 {
		cond.Reason = DrainedReasonNotInBackendPools
		cond.Message = fmt.Sprintf("No backend pool holds the node; out of service since %s (taints: %s), drain period %s passed",
			since, strings.Join(rec.reasons, ", "), drain)
	} else {
		pools := make([]string, len(rec.pools))
		for i, p := range rec.pools {
			pools[i] = p.String()
		}
		cond.Reason = DrainedReasonAdminStateDown
		cond.Message = fmt.Sprintf("AdminState Down since %s on %d backend pool(s): %s (taints: %s), drain period %s passed",
			since, len(pools), strings.Join(pools, ", "), strings.Join(rec.reasons, ", "), drain)
	}
	cond.Message = truncate(cond.Message)
	return cond
}

// patchCondition sets one condition of the node's status with a strategic
// merge patch of the status subresource: conditions merge by type, so the
// kubelet's and other controllers' conditions are untouched and no
// resourceVersion is needed. The node's UID is a precondition.
func (c *Controller) patchCondition(ctx context.Context, node *v1.Node, cond v1.NodeCondition) error {
	patch := map[string]any{
		"metadata": map[string]any{"uid": node.UID},
		"status":   map[string]any{"conditions": []v1.NodeCondition{cond}},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Nodes().Patch(ctx, node.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
	return err
}

// downRecord returns the node's out-of-service record, if it is the
// node's current incarnation.
func (c *Controller) downRecord(node *v1.Node) (nodeRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.states[node.UID]
	return r, ok && c.uids[node.Name] == node.UID
}

// wrote remembers the status written for the node, if it is still the
// node's current incarnation (a forgotten node is not remembered).
func (c *Controller) wrote(node *v1.Node, s v1.ConditionStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uids[node.Name] == node.UID {
		c.drained[node.UID] = s
	}
}

// poolRefs copies a result's pools for the node record.
func poolRefs(r Result) []lbstore.PoolRef { return append([]lbstore.PoolRef(nil), r.Pools...) }
