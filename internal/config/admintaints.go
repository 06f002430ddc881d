package config

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The admin-state taints and the backend pools' drain period
// (docs/admin-state.md, docs/configuration.md).

// Taint keys the cluster autoscaler and Karpenter put on a node they are
// about to remove.
const (
	// TaintClusterAutoscalerToBeDeleted: any value (the autoscaler writes a
	// Unix time), effect NoSchedule.
	TaintClusterAutoscalerToBeDeleted = "ToBeDeletedByClusterAutoscaler"
	// TaintKarpenterDisrupted: Karpenter v1, no value, effect NoSchedule.
	TaintKarpenterDisrupted = "karpenter.sh/disrupted"
)

// DefaultLoadBalancerBackendPoolDrainPeriodInSeconds is the drain period of
// the backend pools azlb owns when loadBalancerBackendPoolDrainPeriodInSeconds
// is unset: none, because Azure takes a drain period only from a
// subscription that registered the feature
// Microsoft.Network/SLBAllowConnectionDraining (docs/admin-state.md);
// MaxLoadBalancerBackendPoolDrainPeriodInSeconds bounds it (Azure
// documents no range: azlb's own bound, an hour).
const (
	DefaultLoadBalancerBackendPoolDrainPeriodInSeconds = 0
	MaxLoadBalancerBackendPoolDrainPeriodInSeconds     = 3600
)

// DefaultLoadBalancerAdminStateTaints is loadBalancerAdminStateTaints when
// unset: the cluster autoscaler's deletion taint (any value and effect) and
// Karpenter's (effect NoSchedule).
func DefaultLoadBalancerAdminStateTaints() []string {
	return []string{TaintClusterAutoscalerToBeDeleted, TaintKarpenterDisrupted + ":NoSchedule"}
}

// notTriggers are taint keys loadBalancerAdminStateTaints refuses, with
// why: the admin-state design keeps them out on purpose.
var notTriggers = map[string]string{
	"node.kubernetes.io/unschedulable": "cordoning never takes a node out of rotation: it toggles often and does not mean \"stop traffic now\"",
	"node.kubernetes.io/not-ready":     "a node condition, not a durable signal: the health probes handle a NotReady node",
	"node.kubernetes.io/unreachable":   "a node condition, not a durable signal: the health probes handle an unreachable node",
}

// taintEffects are the effects a taint selector may name.
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// TaintSelector is one entry of loadBalancerAdminStateTaints: a taint with
// Key matches, and also Value and Effect when they are set (empty: any).
type TaintSelector struct {
	Key, Value, Effect string
}

// String is the selector as azure.json writes it.
func (s TaintSelector) String() string {
	out := s.Key
	if s.Value != "" {
		out += "=" + s.Value
	}
	if s.Effect != "" {
		out += ":" + s.Effect
	}
	return out
}

// ParseTaintSelector reads "key", "key=value", "key:Effect" or
// "key=value:Effect" (the syntax of kubectl taint). The key is a qualified
// name, the value a label value (not empty once "=" is written: leave it
// out to match any value), the effect NoSchedule, PreferNoSchedule or
// NoExecute. The cordon and node-condition taints are refused.
func ParseTaintSelector(s string) (TaintSelector, error) {
	var sel TaintSelector
	rest := s
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		rest, sel.Effect = rest[:i], rest[i+1:]
		if !contains(taintEffects, sel.Effect) {
			return sel, fmt.Errorf("effect %q: %s", sel.Effect, oneOf(taintEffects))
		}
	}
	key, value, hasValue := strings.Cut(rest, "=")
	sel.Key, sel.Value = key, value
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return sel, fmt.Errorf("key %q: %s", key, strings.Join(errs, "; "))
	}
	if why, ok := notTriggers[key]; ok {
		return sel, fmt.Errorf("key %q cannot take a node out of rotation: %s", key, why)
	}
	if hasValue && value == "" {
		return sel, errors.New(`empty value after "=": leave "=value" out to match any value`)
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return sel, fmt.Errorf("value %q: %s", value, strings.Join(errs, "; "))
	}
	return sel, nil
}

// AdminStateTaints is loadBalancerAdminStateTaints parsed: the default when
// unset, none for an empty list. Entries that do not parse are left out
// (Validate reports them).
func (c *Config) AdminStateTaints() []TaintSelector {
	list := DefaultLoadBalancerAdminStateTaints()
	if c.LoadBalancerAdminStateTaints != nil {
		list = *c.LoadBalancerAdminStateTaints
	}
	out := make([]TaintSelector, 0, len(list))
	for _, s := range list {
		if sel, err := ParseTaintSelector(s); err == nil && !containsSelector(out, sel) {
			out = append(out, sel)
		}
	}
	return out
}

func containsSelector(list []TaintSelector, s TaintSelector) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// BackendPoolDrainPeriodInSeconds is the drainPeriodInSeconds the backend
// pools azlb owns carry: the default (0) when unset, 0 (leave it unset in Azure) when 0
// or negative, at most MaxLoadBalancerBackendPoolDrainPeriodInSeconds.
func (c *Config) BackendPoolDrainPeriodInSeconds() int32 {
	p := c.LoadBalancerBackendPoolDrainPeriodInSeconds
	if p == nil {
		return DefaultLoadBalancerBackendPoolDrainPeriodInSeconds
	}
	return int32(min(max(*p, 0), MaxLoadBalancerBackendPoolDrainPeriodInSeconds))
}

// adminStateTaints checks loadBalancerAdminStateTaints: each entry parses
// (ParseTaintSelector) and appears once.
func (v *validator) adminStateTaints(list *[]string) {
	if list == nil {
		return
	}
	const field = "loadBalancerAdminStateTaints"
	seen := map[TaintSelector]bool{}
	for i, s := range *list {
		at := fmt.Sprintf("%s[%d]", field, i)
		sel, err := ParseTaintSelector(s)
		switch {
		case err != nil:
			v.add(at, fmt.Sprintf(`%v; an entry is "key", "key=value", "key:Effect" or "key=value:Effect"`, err))
		case seen[sel]:
			v.add(at, fmt.Sprintf("duplicate %q", s))
		default:
			seen[sel] = true
		}
	}
}

// drainPeriod checks loadBalancerBackendPoolDrainPeriodInSeconds.
func (v *validator) drainPeriod(p *int) {
	if p != nil && (*p < 0 || *p > MaxLoadBalancerBackendPoolDrainPeriodInSeconds) {
		v.add("loadBalancerBackendPoolDrainPeriodInSeconds",
			fmt.Sprintf("must be between 0 (off) and %d", MaxLoadBalancerBackendPoolDrainPeriodInSeconds))
	}
}
