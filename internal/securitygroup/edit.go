package securitygroup

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"
)

// Edit is one Service's change to the NSG.
type Edit struct {
	// Service names the Service in errors and logs ("namespace/name").
	Service string
	// Release lists what the Service held before (or may have held): it
	// leaves every rule first.
	Release Release
	// Allow and Deny are what the Service needs now.
	Allow []Allow
	Deny  []Deny
	// Live, when not nil, removes from azlb's rules every destination for
	// which it returns false (Collect).
	Live func(destination string) bool
	// LiveNodePort, with Live, also removes Release.NodeAddresses from the
	// rules none of whose ports it reports live for the rule's protocol
	// (node ports no Service has any more).
	LiveNodePort func(protocol, port string) bool
	// Narrow, when set, makes Release narrow instead of release: the
	// released destinations stay in the allow rules whose sources Narrow
	// accepts for them and leave only the others (and deny-all rules are
	// kept). A Service whose change is refused keeps what it had, but
	// never more sources than its new settings allow.
	Narrow func(family Family, protocol string, sources []string) bool
	// Drop lists addresses that leave every rule, allow and deny, even
	// when Narrow is set (extra addresses a refused Service no longer
	// lists).
	Drop []string
	// FromCopy, when not 0, lets the edit's round start from the writer's
	// last copy of the NSG instead of reading it, if that copy's
	// generation is at least FromCopy (Store.CopyGeneration) and every
	// edit of the round allows it. The write still carries the copy's
	// etag, so a copy that is no longer current costs a 412 and a read;
	// an edit that changes nothing costs no ARM call. The drift pass uses
	// it for the copy it read at its start.
	FromCopy uint64
}

// Release names the destinations a Service leaves.
type Release struct {
	// Addresses leave every rule (the Service's frontend addresses, now and
	// before).
	Addresses []string
	// NodeAddresses leave the rules of NodePorts' protocol whose ports
	// include one of NodePorts (floating IP off: nodes are shared by all
	// Services, node ports are not).
	NodeAddresses []string
	NodePorts     []ProtocolPort
}

// ProtocolPort is a rule protocol and a port as a rule writes it.
type ProtocolPort struct {
	Protocol string
	Port     string
}

// LimitError reports an edit that would take the NSG over one of Azure's
// limits, or out of free priorities.
type LimitError struct {
	Service string
	Limit   string
	Count   int
	Max     int
}

func (e *LimitError) Error() string {
	if e.Max == 0 {
		return fmt.Sprintf("service %s: network security group: %s", e.Service, e.Limit)
	}
	return fmt.Sprintf("service %s: network security group would have %d %s, more than Azure's limit of %d", e.Service, e.Count, e.Limit, e.Max)
}

// apply changes the model by one edit.
func (m *model) apply(e *Edit) {
	rel := setOf(e.Release.Addresses)
	drop := setOf(e.Drop)
	nodes := setOf(e.Release.NodeAddresses)
	nodePorts := map[string]set{}
	for _, pp := range e.Release.NodePorts {
		if nodePorts[pp.Protocol] == nil {
			nodePorts[pp.Protocol] = set{}
		}
		nodePorts[pp.Protocol][pp.Port] = true
	}
	dead := func(d string) bool { return e.Live != nil && !e.Live(d) }
	for name, r := range m.allow {
		// Narrowing keeps the released destinations in the rules whose
		// sources the Service's settings still allow.
		leave := e.Narrow == nil || !e.Narrow(r.family, r.protocol, r.sources)
		onPorts := false
		deadPorts := e.LiveNodePort != nil
		for _, p := range r.ports {
			if nodePorts[r.protocol][p] {
				onPorts = true
			}
			if e.LiveNodePort != nil && e.LiveNodePort(r.protocol, p) {
				deadPorts = false
			}
		}
		onPorts = onPorts || deadPorts
		for d := range r.dsts {
			if dead(d) || drop[d] || leave && (rel[d] || onPorts && nodes[d]) {
				delete(r.dsts, d)
			}
		}
		if len(r.dsts) == 0 {
			delete(m.allow, name)
		}
	}
	for fam, s := range m.deny {
		for d := range s {
			if dead(d) || drop[d] || e.Narrow == nil && rel[d] {
				delete(s, d)
			}
		}
		if len(s) == 0 {
			delete(m.deny, fam)
		}
	}
	for _, a := range e.Allow {
		m.addAllow(a)
	}
	for _, d := range e.Deny {
		m.addDeny(d.Family, d.Destinations)
	}
}

// render lays the model out as the NSG's rules: the rules that are not
// azlb's as read, then azlb's (a rule unchanged since read is its read
// copy). changed reports whether azlb's rules differ from those read.
func (m *model) render(service string) (rules []*armnetwork.SecurityRule, changed bool, err error) {
	type want struct {
		name string
		rule *armnetwork.SecurityRule
		deny bool
	}
	var ws []want
	for name, r := range m.allow {
		ws = append(ws, want{name: name, rule: allowRuleOf(name, r)})
	}
	for fam, s := range m.deny {
		ws = append(ws, want{name: DenyRuleName(fam), rule: denyRuleOf(DenyRuleName(fam), s.sorted()), deny: true})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].name < ws[j].name })
	used := map[int32]bool{}
	for p := range m.taken {
		used[p] = true
	}
	for _, w := range ws {
		if p, ok := m.prio[w.name]; ok {
			used[p] = true
		}
	}
	next, last := int32(MinPriority), int32(maxAllocated)
	for _, w := range ws {
		p, ok := m.prio[w.name]
		if !ok {
			if w.deny {
				for last >= MinPriority && used[last] {
					last--
				}
				p = last
			} else {
				for next <= maxAllocated && used[next] {
					next++
				}
				p = next
			}
			if p < MinPriority || p > maxAllocated {
				return nil, false, &LimitError{Service: service, Limit: fmt.Sprintf("no free priority between %d and %d for rule %s", MinPriority, maxAllocated, w.name)}
			}
			used[p] = true
		}
		w.rule.Properties.Priority = ptr.To(p)
	}
	rules = append(rules, m.others...)
	seen := map[string]bool{}
	for _, w := range ws {
		seen[w.name] = true
		if old := m.read[w.name]; old != nil && sameRule(old, w.rule) {
			rules = append(rules, old)
			continue
		}
		changed = true
		rules = append(rules, w.rule)
	}
	for name := range m.read {
		if !seen[name] {
			changed = true
		}
	}
	return rules, changed, nil
}

// checkLimits counts rules and prefixes over the whole NSG.
func checkLimits(service string, rules []*armnetwork.SecurityRule) error {
	src, dst := 0, 0
	for _, r := range rules {
		if r.Properties == nil {
			continue
		}
		p := r.Properties
		src += len(prefixes(p.SourceAddressPrefix, p.SourceAddressPrefixes))
		dst += len(prefixes(p.DestinationAddressPrefix, p.DestinationAddressPrefixes))
	}
	switch {
	case len(rules) > MaxRules:
		return &LimitError{Service: service, Limit: "security rules", Count: len(rules), Max: MaxRules}
	case src > MaxSourcePrefixes:
		return &LimitError{Service: service, Limit: "source address prefixes", Count: src, Max: MaxSourcePrefixes}
	case dst > MaxDestinationPrefixes:
		return &LimitError{Service: service, Limit: "destination address prefixes", Count: dst, Max: MaxDestinationPrefixes}
	}
	return nil
}

func allowRuleOf(name string, r *allowRule) *armnetwork.SecurityRule {
	p := &armnetwork.SecurityRulePropertiesFormat{
		Protocol:        ptr.To(armnetwork.SecurityRuleProtocol(r.protocol)),
		Access:          ptr.To(armnetwork.SecurityRuleAccessAllow),
		Direction:       ptr.To(armnetwork.SecurityRuleDirectionInbound),
		SourcePortRange: ptr.To("*"),
	}
	if len(r.sources) == 1 {
		p.SourceAddressPrefix = ptr.To(r.sources[0])
	} else {
		p.SourceAddressPrefixes = ptrs(r.sources)
	}
	setDestinations(p, r.dsts.sorted())
	if len(r.ports) == 1 && r.ports[0] == "*" {
		p.DestinationPortRange = ptr.To("*") // every port (HA ports): Azure takes "*" only in the singular field
	} else {
		p.DestinationPortRanges = ptrs(r.ports)
	}
	return &armnetwork.SecurityRule{Name: ptr.To(name), Properties: p}
}

func denyRuleOf(name string, dsts []string) *armnetwork.SecurityRule {
	p := &armnetwork.SecurityRulePropertiesFormat{
		Protocol:             ptr.To(armnetwork.SecurityRuleProtocolAsterisk),
		Access:               ptr.To(armnetwork.SecurityRuleAccessDeny),
		Direction:            ptr.To(armnetwork.SecurityRuleDirectionInbound),
		SourceAddressPrefix:  ptr.To("*"),
		SourcePortRange:      ptr.To("*"),
		DestinationPortRange: ptr.To("*"),
	}
	setDestinations(p, dsts)
	return &armnetwork.SecurityRule{Name: ptr.To(name), Properties: p}
}

func setDestinations(p *armnetwork.SecurityRulePropertiesFormat, dsts []string) {
	if len(dsts) == 1 {
		p.DestinationAddressPrefix = ptr.To(dsts[0])
	} else {
		p.DestinationAddressPrefixes = ptrs(dsts)
	}
}

func ptrs(s []string) []*string {
	out := make([]*string, len(s))
	for i := range s {
		out[i] = ptr.To(s[i])
	}
	return out
}

// sameRule compares what azlb sets in a rule (other fields, such as a
// description someone added, do not count).
func sameRule(a, b *armnetwork.SecurityRule) bool { return ruleKey(a) == ruleKey(b) }

func ruleKey(r *armnetwork.SecurityRule) string {
	p := r.Properties
	if p == nil {
		return ""
	}
	list := func(one *string, many []*string) string {
		if one != nil && *one != "" {
			return "1:" + *one
		}
		s := prefixes(nil, many)
		sort.Strings(s)
		return "n:" + strings.Join(s, ",")
	}
	return strings.Join([]string{
		string(ptr.Deref(p.Protocol, "")), string(ptr.Deref(p.Access, "")), string(ptr.Deref(p.Direction, "")),
		fmt.Sprint(ptr.Deref(p.Priority, 0)),
		list(p.SourceAddressPrefix, p.SourceAddressPrefixes), list(p.SourcePortRange, p.SourcePortRanges),
		list(p.DestinationAddressPrefix, p.DestinationAddressPrefixes), list(p.DestinationPortRange, p.DestinationPortRanges),
	}, "|")
}
