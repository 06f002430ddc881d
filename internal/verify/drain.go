package verify

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
)

// The deletion taints and the drain period (admin-state.md, What takes a
// node out of rotation; configuration.md, loadBalancerAdminStateTaints and
// loadBalancerBackendPoolDrainPeriodInSeconds).

// configuredTaints lists the node's taints that loadBalancerAdminStateTaints
// selects (by default the cluster autoscaler's ToBeDeletedByClusterAutoscaler,
// any value and effect, and Karpenter's karpenter.sh/disrupted with effect
// NoSchedule): a taint is selected by its key, and by its value and effect
// where the entry names them. Each key once.
func configuredTaints(cfg *config.Config, n *v1.Node) []string {
	var out []string
	for _, sel := range cfg.AdminStateTaints() {
		for _, t := range n.Spec.Taints {
			if t.Key != sel.Key || sel.Value != "" && t.Value != sel.Value || sel.Effect != "" && string(t.Effect) != sel.Effect {
				continue
			}
			if !contains(out, sel.Key) {
				out = append(out, sel.Key)
			}
			break
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

// mayLinger: a node that may still be in a pool although it no longer
// belongs (admin-state.md, Scale-down): the cluster autoscaler's taint is
// its only reason, and the taint itself starts no pool write, so the node
// leaves at the next write of each pool. Until then its entries follow its
// taints like any other's.
func mayLinger(cfg *config.Config, n *v1.Node) bool {
	_, why := poolEligible(cfg, n)
	return why == "tainted "+taintToBeDeleted
}

// drainPeriodDoc documents loadBalancerBackendPoolDrainPeriodInSeconds.
const drainPeriodDoc = "configuration.md#backend-pool-drain-period-loadbalancerbackendpooldrainperiodinseconds"

// drainPeriodWrong: a pool azlb owns carries the configured
// drainPeriodInSeconds (0 by default; 0 means unset, and unset and 0 are
// the same). It returns what the pool has and what is wanted, and whether
// they differ.
func drainPeriodWrong(cfg *config.Config, p *armnetwork.BackendAddressPool) (got, want int32, wrong bool) {
	want = cfg.BackendPoolDrainPeriodInSeconds()
	if p.Properties != nil {
		got = ptr.Deref(p.Properties.DrainPeriodInSeconds, 0)
	}
	return got, want, got != want
}

// checkDrainPeriod: a pool azlb owns and a rule uses carries the configured
// drain period.
func (m *nodeMode) checkDrainPeriod(lbName string, p *armnetwork.BackendAddressPool) {
	if got, want, wrong := drainPeriodWrong(m.cfg, p); wrong {
		m.r.add(fmt.Sprintf("pool %s/%s", lbName, ptr.Deref(p.Name, "")), drainPeriodDoc,
			"has drainPeriodInSeconds %d, want %d (loadBalancerBackendPoolDrainPeriodInSeconds; 0: unset)", got, want)
	}
}
