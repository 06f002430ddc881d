package placement

import (
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// Node labels carrying the agent pool (VM set) name. AKS sets the first; the
// second is the older spelling still found on some clusters.
const (
	AgentPoolLabel       = "kubernetes.azure.com/agentpool"
	LegacyAgentPoolLabel = "agentpool"
)

// NodeInfo is what PlaceNode needs to know about a node.
type NodeInfo struct {
	// Name is the node name; it only appears in errors.
	Name string
	// Labels are the node's labels, matched against nodeSelector.
	Labels map[string]string
	// VMSet is the VM set (agent pool) the node belongs to, "" if unknown;
	// compared case-insensitively with primaryVMSet. See VMSetOfNode.
	VMSet string
	// Current is the configuration whose cluster backend pool holds the node
	// now, "" if none.
	Current string
}

// VMSetOfNode returns the VM set name of a node from its labels: the value
// of kubernetes.azure.com/agentpool when that label is present and not
// blank, else the value of agentpool, else "". Surrounding spaces are
// trimmed. primaryVMSet must therefore be written as the agent pool name that
// these labels carry.
func VMSetOfNode(nodeLabels map[string]string) string {
	if v := strings.TrimSpace(nodeLabels[AgentPoolLabel]); v != "" {
		return v
	}
	return strings.TrimSpace(nodeLabels[LegacyAgentPoolLabel])
}

// VMSetFromProviderID returns the scale set name from a Uniform VMSS
// instance provider ID
// (azure:///subscriptions/…/virtualMachineScaleSets/<name>/virtualMachines/<id>),
// or "" for any other form (standalone and Flexible-orchestration VMs do not
// carry their VM set in the ID). The path is matched case-insensitively.
func VMSetFromProviderID(providerID string) string {
	parts := strings.Split(providerID, "/")
	for i := 0; i+3 < len(parts); i++ {
		if strings.EqualFold(parts[i], "virtualMachineScaleSets") &&
			strings.EqualFold(parts[i+2], "virtualMachines") &&
			parts[i+1] != "" && parts[i+3] != "" {
			return parts[i+1]
		}
	}
	return ""
}

// PlaceNode returns the configuration whose cluster backend pool the node
// belongs in.
//
// nodeCounts maps configuration name (any case) to the number of nodes
// already in its cluster backend pool; missing names count as zero.
//
// Targets are chosen by the first rule that yields any:
//  1. the configuration whose primaryVMSet is the node's VMSet (only that);
//  2. every configuration with a nodeSelector that matches the node's
//     labels (an empty, non-nil nodeSelector matches every node);
//  3. every configuration without a nodeSelector.
//
// If Current is a target the node stays (a restart or resync moves nothing).
// Otherwise the target with the fewest nodes wins, ties going to the
// earliest in configuration order. No target is a
// *NoEligibleNodeLoadBalancerError.
func (p *Placer) PlaceNode(n NodeInfo, nodeCounts map[string]int) (string, error) {
	targets := p.nodeTargets(n)
	if len(targets) == 0 {
		return "", p.noNodeTarget(n)
	}
	if n.Current != "" {
		if cur, ok := p.lookup(n.Current); ok {
			for _, i := range targets {
				if i == cur {
					return p.configs[i].name, nil
				}
			}
		}
	}
	return p.configs[p.pickFewest(targets, lowerCounts(nodeCounts))].name, nil
}

// NodeTargets returns the configuration names PlaceNode would choose among,
// in configuration order (empty when the node has no target).
func (p *Placer) NodeTargets(n NodeInfo) []string {
	targets := p.nodeTargets(n)
	out := make([]string, len(targets))
	for k, i := range targets {
		out[k] = p.configs[i].name
	}
	return out
}

func (p *Placer) nodeTargets(n NodeInfo) []int {
	if vs := strings.TrimSpace(n.VMSet); vs != "" {
		for i, c := range p.configs {
			if c.primaryVMSet != "" && strings.EqualFold(c.primaryVMSet, vs) {
				return []int{i}
			}
		}
	}
	set := labels.Set(n.Labels)
	var matched, selectorless []int
	for i, c := range p.configs {
		switch {
		case c.nodeSel == nil:
			selectorless = append(selectorless, i)
		case c.nodeSel.Matches(set):
			matched = append(matched, i)
		}
	}
	if len(matched) > 0 {
		return matched
	}
	return selectorless
}

func (p *Placer) noNodeTarget(n NodeInfo) error {
	rejections := make([]Rejection, 0, len(p.configs))
	for _, c := range p.configs {
		var reasons []string
		if c.primaryVMSet != "" {
			reasons = append(reasons, "primaryVMSet "+quote(c.primaryVMSet)+" is not the node's VM set")
		}
		if c.nodeSel != nil {
			reasons = append(reasons, "node labels do not match nodeSelector "+quote(c.nodeSel.String()))
		}
		rejections = append(rejections, Rejection{Config: c.name, Reasons: reasons})
	}
	return &NoEligibleNodeLoadBalancerError{Node: n.Name, VMSet: n.VMSet, Rejections: rejections}
}
