package placement

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// ConfigurationsAnnotation is the Service annotation naming the load balancer
// configurations the Service may be placed on, comma separated.
const ConfigurationsAnnotation = "service.beta.kubernetes.io/azure-load-balancer-configurations"

// ServiceInfo is what PlaceService needs to know about a Service.
type ServiceInfo struct {
	// Key is "namespace/name"; it only appears in errors.
	Key string
	// NamespaceLabels are the labels of the Service's namespace.
	NamespaceLabels map[string]string
	// ServiceLabels are the Service's own labels.
	ServiceLabels map[string]string
	// Requested are the configuration names from the
	// azure-load-balancer-configurations annotation (see
	// annotations.ServiceSpec.LoadBalancerConfigurations). Names are matched
	// case-insensitively after trimming spaces; empty entries are ignored.
	// Empty means every configuration is a candidate.
	Requested []string
	// Current is the configuration the Service is on now, "" if none.
	Current string
}

// PlaceService returns the configuration the Service belongs on.
//
// ruleCounts maps configuration name (any case) to the number of
// load-balancing rules on the load balancer the Service would use (the
// public one, or "<name>-internal" for internal Services); missing names
// count as zero.
//
// Rules, in order:
//  1. Candidates are the requested configurations, or all when none is
//     requested. A requested name that is not configured is an
//     *UnknownConfigurationError.
//  2. A candidate matches when its namespace and Service selectors match
//     (no selector, or an empty one, matches every Service). The candidates
//     that match with a selector that is not empty (namespace or Service
//     labels) come first: when there is one that allows placement, or the
//     Service is on one now, only they are considered; the candidates that
//     match without such a selector are considered only when none is, as
//     in the Azure cloud provider (its users steer Services with selectors).
//  3. If Current is one of the candidates considered, the Service stays,
//     whatever allowServicePlacement says and whatever the rule counts are.
//  4. Otherwise the ones considered that allow placement are eligible; the
//     one with the fewest rules wins, ties going to the earliest in
//     configuration order.
//  5. No eligible candidate is a *NoEligibleLoadBalancerError.
func (p *Placer) PlaceService(s ServiceInfo, ruleCounts map[string]int) (string, error) {
	candidates, requested, err := p.serviceCandidates(s)
	if err != nil {
		return "", err
	}
	nsLabels := labels.Set(s.NamespaceLabels)
	svcLabels := labels.Set(s.ServiceLabels)

	current := -1
	if s.Current != "" {
		if i, ok := p.lookup(s.Current); ok {
			current = i
		}
	}

	// tiers[0]: matched by a selector that is not empty; tiers[1]: by
	// none. Each holds the candidates that allow placement, and current.
	var tiers [2][]int
	var rejections []Rejection
	for _, i := range candidates {
		c := p.configs[i]
		var reasons []string
		if c.namespaceSel != nil && !c.namespaceSel.Matches(nsLabels) {
			reasons = append(reasons, fmt.Sprintf("namespace labels do not match serviceNamespaceSelector %q", c.namespaceSel.String()))
		}
		if c.serviceSel != nil && !c.serviceSel.Matches(svcLabels) {
			reasons = append(reasons, fmt.Sprintf("service labels do not match serviceLabelSelector %q", c.serviceSel.String()))
		}
		if !c.allowPlacement && i != current {
			// Existing Services stay while the selectors still match, even
			// on a load balancer being drained (allowServicePlacement=false).
			reasons = append(reasons, "allowServicePlacement is false")
		}
		if len(reasons) == 0 {
			tier := 1
			if c.selects() {
				tier = 0
			}
			tiers[tier] = append(tiers[tier], i)
			continue
		}
		if i == current {
			reasons = append([]string{"current load balancer"}, reasons...)
		}
		rejections = append(rejections, Rejection{Config: c.name, Reasons: reasons})
	}
	eligible := tiers[0]
	if len(eligible) == 0 {
		eligible = tiers[1]
	}
	if slices.Contains(eligible, current) {
		return p.configs[current].name, nil
	}
	if len(eligible) == 0 {
		return "", &NoEligibleLoadBalancerError{Service: s.Key, Requested: requested, Rejections: rejections}
	}
	return p.configs[p.pickFewest(eligible, lowerCounts(ruleCounts))].name, nil
}

// serviceCandidates returns candidate indexes in configuration order and
// whether they came from the annotation.
func (p *Placer) serviceCandidates(s ServiceInfo) ([]int, bool, error) {
	chosen := make([]bool, len(p.configs))
	var unknown []string
	requested := false
	for _, name := range s.Requested {
		if strings.TrimSpace(name) == "" {
			continue
		}
		requested = true
		if i, ok := p.lookup(name); ok {
			chosen[i] = true
		} else {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return nil, true, &UnknownConfigurationError{Service: s.Key, Unknown: unknown, Known: p.ConfigNames()}
	}
	out := make([]int, 0, len(p.configs))
	for i := range p.configs {
		if !requested || chosen[i] {
			out = append(out, i)
		}
	}
	return out, requested, nil
}
