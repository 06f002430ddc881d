package accesscontrol

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/annotations"
)

// Annotation keys read here.
const (
	KeyAllowedIPRanges      = annotations.KeyAllowedIPRanges
	KeyLegacySourceRanges   = v1.AnnotationLoadBalancerSourceRangesKey // service.beta.kubernetes.io/load-balancer-source-ranges
	KeyAllowedServiceTags   = annotations.KeyAllowedServiceTags
	KeyDenyAllExceptRanges  = annotations.KeyDenyAllExceptRanges
	KeyDisableNSGRule       = annotations.KeyDisableNSGRule
	specSourceRangesField   = "spec.loadBalancerSourceRanges"
	internetTag             = "Internet"
	serviceTagRulePattern   = `^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$`
	maxServiceTagNameLength = 80
)

// Keys lists every annotation key this package interprets.
var Keys = []string{KeyAllowedIPRanges, KeyLegacySourceRanges, KeyAllowedServiceTags, KeyDenyAllExceptRanges, KeyDisableNSGRule}

var serviceTagRE = regexp.MustCompile(serviceTagRulePattern)

// Access is what a Service's settings say about who may connect.
type Access struct {
	// Public: the Service has a public frontend (not internal).
	Public bool
	// Ranges are the valid source ranges per family, merged (overlapping
	// and adjacent ranges joined), sorted.
	Ranges map[v1.IPFamily][]netip.Prefix
	// RangesSet: some source range was given (spec or annotations), valid
	// or not.
	RangesSet bool
	// Tags are the valid service tags, sorted, distinct.
	Tags []string
	// DenyAll: the Service's destinations get a deny-all rule after its
	// allows (the deny annotation, or an invalid value: fail closed).
	DenyAll bool
	// Disabled: azure-disable-load-balancer-nsg-rule; no rule at all.
	Disabled bool
	// InvalidRanges and InvalidTags name the values refused, each with its
	// source ("spec.loadBalancerSourceRanges[1]: \"10.0.0.1/24\" ...").
	InvalidRanges []string
	InvalidTags   []string
}

// InvalidError reports an access-control annotation whose value is not
// one the key takes; nothing is written for the Service.
type InvalidError struct{ Key, Value, Rule string }

func (e *InvalidError) Error() string {
	return fmt.Sprintf("annotation %s: %q %s", e.Key, e.Value, e.Rule)
}

// parseBool reads a true/false annotation (case-insensitive; unset or
// blank is false).
func parseBool(ann map[string]string, key string) (bool, error) {
	v, ok := ann[key]
	if !ok || strings.TrimSpace(v) == "" {
		return false, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, &InvalidError{Key: key, Value: v, Rule: "must be \"true\" or \"false\""}
}

// ConflictError reports settings that contradict each other; nothing is
// written for the Service.
type ConflictError struct{ Reason string }

func (e *ConflictError) Error() string { return "conflicting access configuration: " + e.Reason }

// Parse reads the Service's access settings. internal and floatingIP are
// the Service's validated load balancer annotations.
func Parse(svc *v1.Service, internal, floatingIP bool) (*Access, error) {
	a := &Access{Public: !internal, Ranges: map[v1.IPFamily][]netip.Prefix{}}
	ann := svc.Annotations
	disabled, err := parseBool(ann, KeyDisableNSGRule)
	if err != nil {
		return nil, err
	}
	deny, err := parseBool(ann, KeyDenyAllExceptRanges)
	if err != nil {
		return nil, err
	}
	a.Disabled = disabled
	var annRanges []string
	var annSources []string
	for _, k := range []string{KeyAllowedIPRanges, KeyLegacySourceRanges} {
		v, ok := ann[k]
		if !ok || strings.TrimSpace(v) == "" {
			continue // blank: unset
		}
		for i, s := range strings.Split(v, ",") {
			annRanges = append(annRanges, s)
			annSources = append(annSources, fmt.Sprintf("annotation %s entry %d", k, i+1))
		}
	}
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 && len(annRanges) > 0 {
		return nil, &ConflictError{Reason: fmt.Sprintf("%s and the annotation %s (or %s) are both set: use one of them",
			specSourceRangesField, KeyAllowedIPRanges, KeyLegacySourceRanges)}
	}
	raw, where := annRanges, annSources
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		raw, where = svc.Spec.LoadBalancerSourceRanges, nil
		for i := range raw {
			where = append(where, fmt.Sprintf("%s[%d]", specSourceRangesField, i))
		}
	}
	a.RangesSet = len(raw) > 0
	var v4, v6 []netip.Prefix
	for i, s := range raw {
		p, err := parseRange(s)
		if err != nil {
			a.InvalidRanges = append(a.InvalidRanges, fmt.Sprintf("%s: %q %v", where[i], s, err))
			continue
		}
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	if len(v4) > 0 {
		a.Ranges[v1.IPv4Protocol] = Merge(v4)
	}
	if len(v6) > 0 {
		a.Ranges[v1.IPv6Protocol] = Merge(v6)
	}
	if v, ok := ann[KeyAllowedServiceTags]; ok && strings.TrimSpace(v) != "" {
		seen := map[string]bool{}
		for i, s := range strings.Split(v, ",") {
			t := strings.TrimSpace(s)
			if !validTag(t) {
				a.InvalidTags = append(a.InvalidTags, fmt.Sprintf("annotation %s entry %d: %q is not a service tag (words joined by dots, e.g. AzureFrontDoor.Backend)", KeyAllowedServiceTags, i+1, s))
				continue
			}
			if !seen[t] {
				seen[t] = true
				a.Tags = append(a.Tags, t)
			}
		}
		sort.Strings(a.Tags)
	}
	if a.Disabled {
		return a, nil
	}
	// The deny annotation takes effect with sources to keep (as in the
	// Azure cloud provider); an invalid value always denies (fail closed).
	a.DenyAll = (deny && (a.RangesSet || len(a.Tags) > 0)) || len(a.InvalidRanges) > 0 || len(a.InvalidTags) > 0
	if a.DenyAll && !floatingIP {
		why := fmt.Sprintf("%s is \"true\"", KeyDenyAllExceptRanges)
		if !deny {
			why = "an invalid source range or service tag asks for a deny-all rule (fail closed)"
		}
		return nil, &ConflictError{Reason: why + " while floating IP is off (azure-disable-load-balancer-floating-ip): the deny rule would cover the nodes' own addresses on every port"}
	}
	return a, nil
}

// Restricted reports whether the Service limits its sources in any way
// (and so must not be served without a security group azlb writes).
func (a *Access) Restricted() bool {
	return !a.Disabled && (a.RangesSet || len(a.Tags) > 0 || len(a.InvalidTags) > 0 || a.DenyAll)
}

// NeedsRules reports whether the Service needs any rule in the NSG.
func (a *Access) NeedsRules() bool {
	return !a.Disabled && (a.Public || a.Restricted())
}

// Sources are the source sets allowed to reach the Service's destinations
// of the family: each one a rule's sources.
func (a *Access) Sources(fam v1.IPFamily) [][]string {
	if a.Disabled {
		return nil
	}
	var out [][]string
	if r := a.Ranges[fam]; len(r) > 0 {
		s := make([]string, len(r))
		for i, p := range r {
			s[i] = p.String()
		}
		sort.Strings(s)
		out = append(out, s)
	}
	for _, t := range a.Tags {
		out = append(out, []string{t})
	}
	invalid := len(a.InvalidRanges) > 0 || len(a.InvalidTags) > 0
	if a.Public && !a.RangesSet && len(a.Tags) == 0 && !invalid {
		out = append(out, []string{internetTag})
	}
	return out
}

// Describe is a one-line summary of the effective sources, for logs and
// events.
func (a *Access) Describe() string {
	if a.Disabled {
		return "no rule (" + KeyDisableNSGRule + ")"
	}
	var parts []string
	for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		for _, s := range a.Sources(fam) {
			parts = append(parts, strings.Join(s, ","))
		}
	}
	parts = dedupe(parts)
	if len(parts) == 0 {
		if a.Public {
			parts = []string{"nobody"}
		} else {
			parts = []string{"the virtual network"}
		}
	}
	s := strings.Join(parts, "; ")
	if a.DenyAll {
		s += "; everyone else denied"
	}
	return s
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	out := s[:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// parseRange accepts a CIDR with no host bits set.
func parseRange(s string) (netip.Prefix, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return netip.Prefix{}, fmt.Errorf("is empty")
	}
	p, err := netip.ParsePrefix(t)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("is not a CIDR (e.g. 203.0.113.0/24)")
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("has a zone")
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("has host bits set (did you mean %s?)", p.Masked())
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("is an IPv4-mapped IPv6 range")
	}
	return p, nil
}

func validTag(t string) bool {
	return len(t) <= maxServiceTagNameLength && serviceTagRE.MatchString(t)
}

// Merge joins overlapping and adjacent prefixes of one family into the
// fewest prefixes covering exactly the same addresses, sorted.
func Merge(in []netip.Prefix) []netip.Prefix {
	ps := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		ps = append(ps, p.Masked())
	}
	for {
		sort.Slice(ps, func(i, j int) bool {
			if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
				return c < 0
			}
			return ps[i].Bits() < ps[j].Bits()
		})
		out := ps[:0:0]
		changed := false
		for _, p := range ps {
			if n := len(out); n > 0 {
				last := out[n-1]
				if last.Contains(p.Addr()) && last.Bits() <= p.Bits() {
					changed = true // p inside last
					continue
				}
				if last.Bits() == p.Bits() && last.Bits() > 0 {
					parent, _ := last.Addr().Prefix(last.Bits() - 1)
					if parent.Contains(p.Addr()) && parent.Addr() == last.Addr() {
						out[n-1] = parent // siblings
						changed = true
						continue
					}
				}
			}
			out = append(out, p)
		}
		ps = out
		if !changed {
			return ps
		}
	}
}
