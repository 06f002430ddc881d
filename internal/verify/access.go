package verify

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Access-control annotations (docs/security-groups.md, Who may connect).
// verify reads them itself: how they turn into rules is derived here from
// that page, not from the code that writes the rules.
const (
	keyAllowedIPRanges    = "service.beta.kubernetes.io/azure-allowed-ip-ranges"
	keyLegacySourceRanges = "service.beta.kubernetes.io/load-balancer-source-ranges"
	keyAllowedServiceTags = "service.beta.kubernetes.io/azure-allowed-service-tags"
	keyDenyAllExcept      = "service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges"
	keyDisableNSGRule     = "service.beta.kubernetes.io/azure-disable-load-balancer-nsg-rule"
)

// sourceInternet is the source of a public Service that restricts nothing.
const sourceInternet = "Internet"

// serviceTagRE is the spelling of a service tag: words and dots, each word
// a letter followed by letters and digits (security-groups.md, Details).
var serviceTagRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*$`)

// access is what a Service's spec and annotations say about who may reach
// it (security-groups.md, Who may connect).
type access struct {
	// ranges are the valid source ranges per family, merged (overlapping
	// and adjacent ranges joined) and sorted as strings.
	ranges map[v1.IPFamily][]string
	// tags are the valid service tags, sorted, distinct.
	tags []string
	// invalid quotes every range or tag that is not valid: the Service
	// fails closed.
	invalid []string
	// denyAll: azure-deny-all-except-load-balancer-source-ranges is true.
	denyAll bool
	// disabled: azure-disable-load-balancer-nsg-rule is true.
	disabled bool
	// restricted: the Service restricts its sources by any of the inputs
	// (security-groups.md, Setting it up).
	restricted bool
	// sourcesGiven: some range or service tag is given (valid or not):
	// deny-all takes effect only then.
	sourcesGiven bool
}

// hasSources: some valid range (of any family) or tag.
func (a *access) hasSources() bool {
	return len(a.ranges[v1.IPv4Protocol]) > 0 || len(a.ranges[v1.IPv6Protocol]) > 0 || len(a.tags) > 0
}

// sourceSets are the source sets the Service's allow rules of a family
// carry, each as written in a rule: Internet for a public Service that
// restricts nothing; else the family's merged ranges (one set) and each tag
// (one set each). An internal Service without sources has none (the virtual
// network is allowed by Azure's default rule).
func (a *access) sourceSets(fam v1.IPFamily, internal bool) [][]string {
	if a.disabled {
		return nil
	}
	if !internal && !a.hasSources() && len(a.invalid) == 0 {
		return [][]string{{sourceInternet}}
	}
	var out [][]string
	if r := a.ranges[fam]; len(r) > 0 {
		out = append(out, r)
	}
	for _, t := range a.tags {
		out = append(out, []string{t})
	}
	return out
}

// describe says, for findings, whom the Service lets in on a family.
func (a *access) describe(fam v1.IPFamily, internal bool) string {
	if a.disabled {
		return keyDisableNSGRule + " is true: azlb writes no rule for it"
	}
	var srcs []string
	for _, set := range a.sourceSets(fam, internal) {
		srcs = append(srcs, set...)
	}
	if len(srcs) == 0 {
		if internal {
			return "its spec allows no source of " + string(fam) + " beyond the virtual network"
		}
		return "its spec allows no source of " + string(fam)
	}
	return "its spec allows only " + strings.Join(srcs, ", ")
}

// parseAccess reads the access-control inputs of a Service. A non-empty
// reason means azlb writes nothing for the Service (or the documentation
// does not say what it does), so verify does not judge it.
func parseAccess(svc *v1.Service) (a *access, reason string) {
	a = &access{ranges: map[v1.IPFamily][]string{}}
	ann := svc.Annotations
	var bad []string
	// A set but blank access annotation fails closed (security-groups.md,
	// Details): a blank boolean is no value; deny-all counts as asked for,
	// no NSG rule as not.
	var blank []string
	boolean := func(key string) bool {
		v, ok := ann[key]
		if !ok {
			return false
		}
		switch t := strings.TrimSpace(v); {
		case t == "":
			blank = append(blank, fmt.Sprintf("%s %q (blank)", key, v))
			return key == keyDenyAllExcept
		case strings.EqualFold(t, "true"):
			return true
		case strings.EqualFold(t, "false"):
			return false
		}
		bad = append(bad, fmt.Sprintf("%s: %q is not a boolean", key, v))
		return false
	}
	a.denyAll = boolean(keyDenyAllExcept)
	a.disabled = boolean(keyDisableNSGRule)
	if len(bad) > 0 {
		return nil, "refused (InvalidLoadBalancerAnnotation): " + strings.Join(bad, "; ") + ": azlb writes nothing for it"
	}
	a.invalid = append(a.invalid, blank...)

	var annRanges []string
	var annKeys []string
	blankRanges := false
	for _, key := range []string{keyAllowedIPRanges, keyLegacySourceRanges} {
		v, ok := ann[key]
		switch {
		case !ok:
		case strings.TrimSpace(v) == "":
			a.invalid = append(a.invalid, fmt.Sprintf("%s %q (blank)", key, v))
			blankRanges = true
		default:
			annRanges = append(annRanges, strings.Split(v, ",")...)
			annKeys = append(annKeys, key)
		}
	}
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 && len(annKeys) > 0 {
		return nil, fmt.Sprintf("refused (ConflictingAccessConfiguration): source ranges both in spec.loadBalancerSourceRanges and in %s: azlb writes nothing for it until one is removed",
			strings.Join(annKeys, " and "))
	}
	ranges := append(slices.Clone(svc.Spec.LoadBalancerSourceRanges), annRanges...)
	var tags []string
	if v, ok := ann[keyAllowedServiceTags]; ok && strings.TrimSpace(v) == "" {
		a.invalid = append(a.invalid, fmt.Sprintf("%s %q (blank)", keyAllowedServiceTags, v))
	} else if ok {
		tags = strings.Split(v, ",")
	}
	a.restricted = len(ranges) > 0 || len(tags) > 0 || a.denyAll || blankRanges || len(a.invalid) > 0
	a.sourcesGiven = len(ranges) > 0 || len(tags) > 0 || blankRanges

	byFam := map[v1.IPFamily][]netip.Prefix{}
	for _, r := range ranges {
		p, ok := parseRange(r)
		if !ok {
			a.invalid = append(a.invalid, fmt.Sprintf("range %q", r))
			continue
		}
		fam := v1.IPv6Protocol
		if p.Addr().Is4() {
			fam = v1.IPv4Protocol
		}
		byFam[fam] = append(byFam[fam], p)
	}
	for fam, ps := range byFam {
		for _, p := range mergePrefixes(ps) {
			a.ranges[fam] = append(a.ranges[fam], p.String())
		}
		sort.Strings(a.ranges[fam])
	}
	for _, t := range tags {
		t = strings.TrimSpace(t)
		if !serviceTagRE.MatchString(t) {
			a.invalid = append(a.invalid, fmt.Sprintf("service tag %q", t))
			continue
		}
		if !slices.Contains(a.tags, t) {
			a.tags = append(a.tags, t)
		}
	}
	sort.Strings(a.tags)
	return a, ""
}

// parseRange: a CIDR, trimmed, without host bits; not a bare address, not
// empty, not an IPv4-mapped IPv6 range, no zone.
func parseRange(s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return netip.Prefix{}, false
	}
	return p, true
}

// mergePrefixes returns the fewest prefixes that cover exactly the union of
// ps (all of one family): prefixes inside another are dropped and two
// halves of a prefix are joined into it, until nothing changes.
func mergePrefixes(ps []netip.Prefix) []netip.Prefix {
	set := map[netip.Prefix]bool{}
	for _, p := range ps {
		set[p] = true
	}
	for changed := true; changed; {
		changed = false
		for p := range set {
			for q := range set {
				if p != q && q.Bits() < p.Bits() && q.Contains(p.Addr()) {
					delete(set, p)
					changed = true
					break
				}
			}
		}
		for p := range set {
			if p.Bits() == 0 {
				continue
			}
			parent, _ := p.Addr().Prefix(p.Bits() - 1)
			lo := netip.PrefixFrom(parent.Addr(), p.Bits())
			hi := siblingHigh(parent)
			if set[lo] && set[hi] {
				delete(set, lo)
				delete(set, hi)
				set[parent] = true
				changed = true
				break
			}
		}
	}
	out := make([]netip.Prefix, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// siblingHigh is the upper half of parent: its address with the bit after
// the parent's length set, at the parent's length plus one.
func siblingHigh(parent netip.Prefix) netip.Prefix {
	b := parent.Addr().AsSlice()
	bit := parent.Bits()
	b[bit/8] |= 0x80 >> (bit % 8)
	a, _ := netip.AddrFromSlice(b)
	if parent.Addr().Is4() {
		a = a.Unmap()
	}
	return netip.PrefixFrom(a, bit+1)
}
