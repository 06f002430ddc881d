package securitygroup

import (
	"crypto/md5" //nolint:gosec // the rule naming scheme shared with the Azure cloud provider, not security
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"
)

// Rule naming and priorities (docs/security-groups.md).
const (
	RulePrefix  = "k8s-azure-lb"
	MinPriority = 500
	MaxPriority = 4096
	// maxAllocated is the highest priority a rule is given (4096 counts as
	// azlb's but is never handed out, as in the Azure cloud provider).
	maxAllocated = MaxPriority - 1
)

// Azure's limits per NSG.
const (
	MaxRules                      = 1000
	MaxSourcePrefixes             = 4000
	MaxDestinationPrefixes        = 4000
	protocolAny                   = "*"
	directionInbound              = "Inbound"
	familyIPv4             Family = "IPv4"
	familyIPv6             Family = "IPv6"
)

// Family is an IP family as rule names spell it: "IPv4" or "IPv6".
type Family string

// Families.
const (
	IPv4 = familyIPv4
	IPv6 = familyIPv6
)

// Allow lets Sources reach Destinations on Ports over Protocol ("Tcp",
// "Udp" or "*").
type Allow struct {
	Family       Family
	Protocol     string
	Sources      []string
	Ports        []string
	Destinations []string
}

// Deny keeps everyone not allowed away from Destinations.
type Deny struct {
	Family       Family
	Destinations []string
}

// AllowRuleName is the name of the allow rule for (family, protocol,
// sources, ports).
func AllowRuleName(fam Family, protocol string, sources, ports []string) string {
	src := sortedCopy(sources)
	prt := sortedCopy(ports)
	sum := md5.Sum([]byte(protocol + "_" + strings.Join(src, ",") + "_" + strings.Join(prt, ","))) //nolint:gosec // naming only
	return fmt.Sprintf("%s_allow_%s_%x", RulePrefix, fam, sum)
}

// DenyRuleName is the name of the family's deny-all rule.
func DenyRuleName(fam Family) string { return RulePrefix + "_deny-all_" + string(fam) }

// IsManaged reports whether a rule is azlb's.
func IsManaged(r *armnetwork.SecurityRule) bool {
	if r == nil || r.Properties == nil || r.Properties.Priority == nil {
		return false
	}
	p := *r.Properties.Priority
	return strings.HasPrefix(ptr.Deref(r.Name, ""), RulePrefix) && p >= MinPriority && p <= MaxPriority
}

// FamilyOf tells the family of an address ("" for anything else).
func FamilyOf(addr string) Family {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// set is a set of strings.
type set map[string]bool

func setOf(s []string) set {
	out := make(set, len(s))
	for _, x := range s {
		out[x] = true
	}
	return out
}

func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for x := range s {
		out = append(out, x)
	}
	sort.Strings(out)
	return out
}

// allowRule is one of azlb's allow rules in the model.
type allowRule struct {
	family   Family
	protocol string
	sources  []string // sorted
	ports    []string // sorted as strings
	dsts     set
}

// allowContent is what an allow rule's name stands for: the rule's
// family, protocol, sources and ports (AllowRuleName of them is the name).
type allowContent struct {
	family   Family
	protocol string
	sources  []string
	ports    []string
}

// model is an NSG as azlb sees it: its own rules by content, everything
// else kept as read.
type model struct {
	allow map[string]*allowRule // by name
	deny  map[Family]set
	// prio holds the priority of every managed rule read, by name.
	prio map[string]int32
	// taken are the inbound priorities of rules that are not azlb's.
	taken map[int32]bool
	// others are the rules that are not azlb's, as read.
	others []*armnetwork.SecurityRule
	// read are azlb's rules as read, by name.
	read map[string]*armnetwork.SecurityRule
	// tampered names the rules read with one of azlb's names whose content
	// is not what azlb writes under that name: each is rewritten (its
	// destinations under the content its name stands for) or removed.
	tampered []string
}

// newModel reads an NSG's rules. known gives the content of allow rules
// seen well-formed before (by name): a rule changed out of band since is
// rewritten to it rather than removed.
func newModel(sg *armnetwork.SecurityGroup, known map[string]allowContent) *model {
	m := &model{allow: map[string]*allowRule{}, deny: map[Family]set{}, prio: map[string]int32{},
		taken: map[int32]bool{}, read: map[string]*armnetwork.SecurityRule{}}
	if sg == nil || sg.Properties == nil {
		return m
	}
	for _, r := range sg.Properties.SecurityRules {
		if r == nil {
			continue
		}
		if !IsManaged(r) || !m.adopt(r, known) {
			m.others = append(m.others, r)
			if r.Properties != nil && r.Properties.Priority != nil && strings.EqualFold(string(ptr.Deref(r.Properties.Direction, "")), directionInbound) {
				m.taken[*r.Properties.Priority] = true
			}
		}
	}
	sort.Strings(m.tampered)
	return m
}

// ruleFamily is the family of one of azlb's rule names ("" for a name
// azlb does not write: such a rule is not azlb's and is kept as it is).
func ruleFamily(name string) Family {
	for _, f := range []Family{IPv4, IPv6} {
		if strings.HasPrefix(name, RulePrefix+"_allow_"+string(f)+"_") || name == DenyRuleName(f) {
			return f
		}
	}
	return ""
}

// adopt takes one of azlb's rules into the model; false for a rule in
// azlb's range whose name is none of azlb's (kept as it is). A rule with
// one of azlb's names is never kept as read when its content is not what
// azlb writes under that name (changed out of band): an allow rule whose
// protocol, sources or ports no longer match its name is rewritten to the
// content its name stands for when that is known (seen before), and
// removed otherwise, so its destinations never move to the rule named
// after the new content (that would make a widening look like azlb's own
// rule); a destination that is not an address, a rule that is not
// inbound, and a deny-all rule that does not deny everything are
// rewritten or removed the same way.
func (m *model) adopt(r *armnetwork.SecurityRule, known map[string]allowContent) bool {
	name := ptr.Deref(r.Name, "")
	p := r.Properties
	fam := ruleFamily(name)
	if fam == "" {
		return false
	}
	m.read[name] = r
	if !strings.EqualFold(string(ptr.Deref(p.Direction, "")), directionInbound) {
		m.tampered = append(m.tampered, name) // removed: azlb writes inbound rules only
		return true
	}
	dsts, foreign := addressDestinations(p)
	tampered := foreign
	defer func() {
		if tampered {
			m.tampered = append(m.tampered, name)
		}
	}()
	if name == DenyRuleName(fam) {
		// A deny-all is rewritten whole with its destinations: denying
		// them never opens anything.
		m.prio[name] = *p.Priority
		m.addDeny(fam, dsts)
		tampered = tampered || ptr.Deref(p.Access, "") != armnetwork.SecurityRuleAccessDeny ||
			ptr.Deref(p.Protocol, "") != armnetwork.SecurityRuleProtocolAsterisk || !everything(p.SourceAddressPrefix, p.SourceAddressPrefixes) ||
			!everything(p.SourcePortRange, p.SourcePortRanges) || !everything(p.DestinationPortRange, p.DestinationPortRanges)
		return true
	}
	c := allowContent{family: fam, protocol: string(ptr.Deref(p.Protocol, "")),
		sources: prefixes(p.SourceAddressPrefix, p.SourceAddressPrefixes), ports: prefixes(p.DestinationPortRange, p.DestinationPortRanges)}
	if AllowRuleName(fam, c.protocol, c.sources, c.ports) != name {
		tampered = true
		var ok bool
		if c, ok = known[name]; !ok {
			return true // removed: what its name stands for is unknown
		}
	}
	m.prio[name] = *p.Priority
	m.addAllow(Allow{Family: fam, Protocol: c.protocol, Sources: c.sources, Ports: c.ports, Destinations: dsts})
	tampered = tampered || ptr.Deref(p.Access, "") != armnetwork.SecurityRuleAccessAllow || !everything(p.SourcePortRange, p.SourcePortRanges)
	return true
}

// everything reports whether a prefix or port field is "*" alone.
func everything(one *string, many []*string) bool {
	l := prefixes(one, many)
	return len(l) == 1 && l[0] == "*"
}

// addressDestinations are a rule's destinations that are addresses (azlb
// writes nothing else); foreign reports that it had others.
func addressDestinations(p *armnetwork.SecurityRulePropertiesFormat) (dsts []string, foreign bool) {
	for _, d := range prefixes(p.DestinationAddressPrefix, p.DestinationAddressPrefixes) {
		if a, err := netip.ParseAddr(d); err == nil && a.Zone() == "" && a.String() == d {
			dsts = append(dsts, d)
		} else {
			foreign = true
		}
	}
	return dsts, foreign
}

// wellFormed is the content of one of azlb's allow rules whose name
// matches its content, for newModel's known.
func wellFormed(r *armnetwork.SecurityRule) (string, allowContent, bool) {
	if !IsManaged(r) || r.Properties == nil {
		return "", allowContent{}, false
	}
	name, p := ptr.Deref(r.Name, ""), r.Properties
	fam := ruleFamily(name)
	if fam == "" || name == DenyRuleName(fam) {
		return "", allowContent{}, false
	}
	c := allowContent{family: fam, protocol: string(ptr.Deref(p.Protocol, "")),
		sources: prefixes(p.SourceAddressPrefix, p.SourceAddressPrefixes), ports: prefixes(p.DestinationPortRange, p.DestinationPortRanges)}
	return name, c, AllowRuleName(fam, c.protocol, c.sources, c.ports) == name
}

func prefixes(one *string, many []*string) []string {
	var out []string
	if s := ptr.Deref(one, ""); s != "" {
		out = append(out, s)
	}
	for _, s := range many {
		if v := ptr.Deref(s, ""); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (m *model) addAllow(a Allow) {
	if len(a.Destinations) == 0 {
		return
	}
	name := AllowRuleName(a.Family, a.Protocol, a.Sources, a.Ports)
	r := m.allow[name]
	if r == nil {
		r = &allowRule{family: a.Family, protocol: a.Protocol, sources: sortedCopy(a.Sources), ports: sortedCopy(a.Ports), dsts: set{}}
		m.allow[name] = r
	}
	for _, d := range a.Destinations {
		r.dsts[d] = true
	}
}

func (m *model) addDeny(fam Family, dsts []string) {
	if len(dsts) == 0 {
		return
	}
	s := m.deny[fam]
	if s == nil {
		s = set{}
		m.deny[fam] = s
	}
	for _, d := range dsts {
		s[d] = true
	}
}

// clone copies the model deeply enough for an edit to be undone.
func (m *model) clone() *model {
	c := *m
	c.allow = make(map[string]*allowRule, len(m.allow))
	for k, r := range m.allow {
		cr := *r
		cr.dsts = make(set, len(r.dsts))
		for d := range r.dsts {
			cr.dsts[d] = true
		}
		c.allow[k] = &cr
	}
	c.deny = make(map[Family]set, len(m.deny))
	for f, s := range m.deny {
		cs := make(set, len(s))
		for d := range s {
			cs[d] = true
		}
		c.deny[f] = cs
	}
	return &c
}

// fingerprint is the model's content (azlb's rules), for comparisons.
func (m *model) fingerprint() string {
	var b strings.Builder
	names := make([]string, 0, len(m.allow))
	for n := range m.allow {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(strings.Join(m.allow[n].dsts.sorted(), ","))
		b.WriteByte(';')
	}
	for _, f := range []Family{IPv4, IPv6} {
		if s := m.deny[f]; len(s) > 0 {
			b.WriteString(DenyRuleName(f) + "=" + strings.Join(s.sorted(), ",") + ";")
		}
	}
	return b.String()
}
