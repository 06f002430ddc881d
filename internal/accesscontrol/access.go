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
	// InvalidSettings name the access annotations set to a blank value
	// (deny-all, no NSG rule): like an invalid value, each fails closed.
	InvalidSettings []string
}

// InvalidError reports an access-control annotation whose value is not
// one the key takes; nothing is written for the Service.
type InvalidError struct{ Key, Value, Rule string }

func (e *InvalidError) Error() string {
	return fmt.Sprintf("annotation %s: %q %s", e.Key, e.Value, e.Rule)
}

// blankRule is what a set but blank access annotation is told.
const blankRule = "is empty: an access annotation that is set must have a value (remove it, or give it one); until then the Service fails closed"

// parseBool reads a true/false annotation (case-insensitive; unset is
// false). blank reports one set to a blank value.
func parseBool(ann map[string]string, key string) (v bool, blank bool, err error) {
	raw, ok := ann[key]
	if !ok {
		return false, false, nil
	}
	if strings.TrimSpace(raw) == "" {
		return false, true, nil
	}
	b, err := parseBoolValue(key, raw)
	return b, false, err
}

func parseBoolValue(key, v string) (bool, error) {
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
	disabled, blankDisabled, err := parseBool(ann, KeyDisableNSGRule)
	if err != nil {
		return nil, err
	}
	deny, blankDeny, err := parseBool(ann, KeyDenyAllExceptRanges)
	if err != nil {
		return nil, err
	}
	// A blank boolean fails closed: no NSG rule is not turned off (azlb
	// writes the rules), deny-all is.
	if blankDisabled {
		a.InvalidSettings = append(a.InvalidSettings, fmt.Sprintf("annotation %s: %q %s", KeyDisableNSGRule, ann[KeyDisableNSGRule], blankRule))
	}
	if blankDeny {
		a.InvalidSettings = append(a.InvalidSettings, fmt.Sprintf("annotation %s: %q %s", KeyDenyAllExceptRanges, ann[KeyDenyAllExceptRanges], blankRule))
	}
	a.Disabled = disabled
	var annRanges []string
	var annSources []string
	blankRanges := false
	for _, k := range []string{KeyAllowedIPRanges, KeyLegacySourceRanges} {
		v, ok := ann[k]
		if !ok {
			continue
		}
		if strings.TrimSpace(v) == "" {
			// Set but blank (an empty Helm value, say): not "no
			// restriction", which would open the Service to everyone.
			a.InvalidRanges = append(a.InvalidRanges, fmt.Sprintf("annotation %s: %q %s", k, v, blankRule))
			blankRanges = true
			continue
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
	a.RangesSet = len(raw) > 0 || blankRanges
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
	a.parseTags(ann)
	if a.Disabled {
		return a, nil
	}
	// The deny annotation takes effect with sources to keep (as in the
	// Azure cloud provider); an invalid value always denies (fail closed).
	a.DenyAll = (deny && (a.RangesSet || len(a.Tags) > 0)) || a.Invalid()
	if a.DenyAll && !floatingIP {
		why := fmt.Sprintf("%s is \"true\"", KeyDenyAllExceptRanges)
		if !deny {
			why = "an invalid (or blank) source range, service tag or access annotation asks for a deny-all rule (fail closed)"
		}
		return nil, &ConflictError{Reason: why + " while floating IP is off (azure-disable-load-balancer-floating-ip): the deny rule would cover the nodes' own addresses on every port"}
	}
	return a, nil
}

// Invalid reports whether a value was invalid (or blank): the Service
// fails closed.
func (a *Access) Invalid() bool {
	return len(a.InvalidRanges) > 0 || len(a.InvalidTags) > 0 || len(a.InvalidSettings) > 0
}

// Restricted reports whether the Service limits its sources in any way
// (and so must not be served without a security group azlb writes).
func (a *Access) Restricted() bool {
	return !a.Disabled && (a.RangesSet || len(a.Tags) > 0 || a.Invalid() || a.DenyAll)
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
	if a.Public && !a.RangesSet && len(a.Tags) == 0 && !a.Invalid() {
		out = append(out, []string{internetTag})
	}
	return out
}

// Covers reports whether the Service's settings allow every source of a
// rule of the family (sources as a rule holds them: Internet, a service
// tag, or ranges): a range inside one of its ranges, a tag it lists,
// anything when it allows Internet. A Service whose rules are disabled
// covers nothing.
func (a *Access) Covers(fam v1.IPFamily, sources []string) bool {
	if a.Disabled {
		return false
	}
	allowed := map[string]bool{}
	for _, set := range a.Sources(fam) {
		if len(set) == 1 {
			allowed[set[0]] = true
		}
	}
	if allowed[internetTag] {
		return true
	}
	for _, s := range sources {
		if allowed[s] {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return false
		}
		inside := false
		for _, r := range a.Ranges[fam] {
			if r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
				inside = true
				break
			}
		}
		if !inside {
			return false
		}
	}
	return true
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

// parseTags reads the allowed service tags: a set-but-blank value and an
// entry that is not a tag are invalid (the caller fails closed).
func (a *Access) parseTags(ann map[string]string) {
	v, ok := ann[KeyAllowedServiceTags]
	if !ok {
		return
	}
	if strings.TrimSpace(v) == "" {
		a.InvalidTags = append(a.InvalidTags, fmt.Sprintf("annotation %s: %q %s", KeyAllowedServiceTags, v, blankRule))
		return
	}
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
