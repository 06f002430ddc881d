package dataplane

import (
	"sort"
	"strings"
)

// Status is what the data plane serves and how it went: the control API
// shows it as JSON.
type Status struct {
	Rules []RuleStatus `json:"rules"`
	// Denied counts, per security rule, the flows and probes it refused,
	// sorted by NSG id and rule name. A member without any security group
	// on a load balancer that is closed by default counts under NSG ""
	// and rule DeniedNoNSG. Entries live as long as a member is guarded
	// by that rule.
	Denied []DeniedStatus `json:"denied"`
}

// DeniedStatus is what one security rule refused.
type DeniedStatus struct {
	// NSG is the network security group's id ("" for DeniedNoNSG).
	NSG string `json:"nsg"`
	// Rule is the rule's name: a custom rule, a default one
	// (DenyAllInBound) or DeniedNoNSG.
	Rule string `json:"rule"`
	// Flows counts new TCP connections reset and UDP datagrams dropped;
	// Probes the health probes refused.
	Flows  uint64 `json:"flows"`
	Probes uint64 `json:"probes"`
}

// RuleStatus is one rule: its configuration as served, why it is not
// served (if so), its counters and its members.
type RuleStatus struct {
	ID          string `json:"id"`
	Frontend    string `json:"frontend"`
	Protocol    string `json:"protocol"`
	BackendPort int    `json:"backendPort"`
	Served      bool   `json:"served"`
	Reason      string `json:"reason,omitempty"`
	// Namespace is the network namespace the rule is served in (its
	// frontend is in Options.Network's prefixes); empty: on loopback.
	Namespace    string `json:"namespace,omitempty"`
	IdleTimeout  string `json:"idleTimeout"`
	TCPReset     bool   `json:"tcpReset"`
	FloatingIP   bool   `json:"floatingIP"`
	Distribution string `json:"loadDistribution"`
	// Probe is empty when the rule has no probe.
	Probe    *ProbeStatus   `json:"probe,omitempty"`
	Counters Counters       `json:"counters"`
	Members  []MemberStatus `json:"members"`
}

// ProbeStatus is a rule's probe.
type ProbeStatus struct {
	ID          string `json:"id"`
	Protocol    string `json:"protocol"`
	Port        int    `json:"port"`
	Path        string `json:"requestPath,omitempty"`
	Interval    string `json:"interval"`
	Threshold   int    `json:"threshold"`
	AllProbedUp bool   `json:"allProbedUp,omitempty"`
}

// Counters of one rule, since a rule with its id was first applied.
type Counters struct {
	// NewFlows is the number of connections relayed to a member.
	NewFlows uint64 `json:"newFlows"`
	// NoBackend counts new connections reset because no member was
	// eligible; BackendFailures those whose member refused or did not
	// answer the connection.
	NoBackend       uint64 `json:"noBackend"`
	BackendFailures uint64 `json:"backendFailures"`
	// IdleTimeouts counts flows ended by the idle timeout; DrainResets
	// flows reset because their member left the pool.
	IdleTimeouts uint64 `json:"idleTimeouts"`
	DrainResets  uint64 `json:"drainResets"`
	// Denied counts new flows (TCP connections reset, UDP datagrams
	// dropped) that the chosen member's security groups refused.
	Denied      uint64 `json:"denied"`
	ActiveFlows int64  `json:"activeFlows"`
	// BytesIn went from clients to members, BytesOut back.
	BytesIn  uint64 `json:"bytesIn"`
	BytesOut uint64 `json:"bytesOut"`
}

// MemberStatus is one member of a rule.
type MemberStatus struct {
	Pool       string `json:"pool"`
	Name       string `json:"name"`
	Address    string `json:"address"`
	AdminState string `json:"adminState"`
	// Health is Up or Down as probed, or Unprobed (the rule has no probe,
	// or the address is neither on loopback nor in the rule's namespace).
	Health string `json:"health"`
	// Probes counts the probes sent to the member under the rule's probe.
	Probes         uint64 `json:"probes"`
	LastProbeError string `json:"lastProbeError,omitempty"`
	// Eligible says whether a new flow may go to the member now (its
	// security groups may still refuse it).
	Eligible    bool   `json:"eligible"`
	NewFlows    uint64 `json:"newFlows"`
	ActiveFlows int64  `json:"activeFlows"`
	// Denied counts new flows chosen for this member that its security
	// groups refused.
	Denied uint64 `json:"denied"`
	// SubnetNSG and NICNSG are the security groups guarding the member;
	// OpenByDefault is set when it has neither and traffic still passes
	// (Basic SKU).
	SubnetNSG     string `json:"subnetNsg,omitempty"`
	NICNSG        string `json:"nicNsg,omitempty"`
	OpenByDefault bool   `json:"openByDefault,omitempty"`
}

// Status reports every rule of the last applied configuration, sorted by id.
func (p *Plane) Status() Status {
	p.mu.Lock()
	rules := make([]*ruleState, 0, len(p.rules))
	for _, rs := range p.rules {
		rules = append(rules, rs)
	}
	p.mu.Unlock()
	out := Status{Rules: make([]RuleStatus, 0, len(rules))}
	for _, rs := range rules {
		out.Rules = append(out.Rules, rs.status())
	}
	sort.Slice(out.Rules, func(i, j int) bool {
		return strings.ToLower(out.Rules[i].ID) < strings.ToLower(out.Rules[j].ID)
	})
	p.dmu.Lock()
	out.Denied = make([]DeniedStatus, 0, len(p.denied))
	for _, c := range p.denied {
		out.Denied = append(out.Denied, DeniedStatus{NSG: c.nsg, Rule: c.rule, Flows: c.flows.Load(), Probes: c.probes.Load()})
	}
	p.dmu.Unlock()
	sort.Slice(out.Denied, func(i, j int) bool {
		a, b := out.Denied[i], out.Denied[j]
		if !strings.EqualFold(a.NSG, b.NSG) {
			return strings.ToLower(a.NSG) < strings.ToLower(b.NSG)
		}
		return strings.ToLower(a.Rule) < strings.ToLower(b.Rule)
	})
	return out
}

// Denials returns the counter of one security rule (NSG "" and rule
// DeniedNoNSG for members without security groups); zero when it refused
// nothing.
func (s Status) Denials(nsg, rule string) DeniedStatus {
	for _, d := range s.Denied {
		if strings.EqualFold(d.NSG, nsg) && strings.EqualFold(d.Rule, rule) {
			return d
		}
	}
	return DeniedStatus{NSG: nsg, Rule: rule}
}

func (rs *ruleState) status() RuleStatus {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	c := rs.cfg
	st := RuleStatus{
		ID: c.ID, Frontend: c.Frontend.String(), Protocol: string(c.Protocol), BackendPort: int(c.BackendPort),
		Served: rs.served(), Reason: rs.unserved, IdleTimeout: c.IdleTimeout.String(),
		TCPReset: c.TCPReset, FloatingIP: c.FloatingIP, Distribution: string(c.Distribution),
		Counters: Counters{
			NewFlows: rs.counters.newFlows.Load(), NoBackend: rs.counters.noBackend.Load(),
			BackendFailures: rs.counters.backendFailures.Load(), IdleTimeouts: rs.counters.idleTimeouts.Load(),
			DrainResets: rs.counters.drainResets.Load(), Denied: rs.counters.denied.Load(), ActiveFlows: rs.counters.active.Load(),
			BytesIn: rs.counters.bytesIn.Load(), BytesOut: rs.counters.bytesOut.Load(),
		},
		Members: make([]MemberStatus, 0, len(rs.members)),
	}
	if !c.Frontend.IsValid() {
		st.Frontend = ""
	}
	if rs.via != nil {
		st.Namespace = rs.via.cfg.NetNS
	}
	if c.Probe != nil {
		st.Probe = &ProbeStatus{ID: c.Probe.ID, Protocol: c.Probe.Protocol, Port: int(c.Probe.Port), Path: c.Probe.Path,
			Interval: c.Probe.Interval.String(), Threshold: c.Probe.Threshold, AllProbedUp: c.Probe.AllProbedUp}
	}
	for i := range rs.members {
		m := &rs.members[i]
		ms := MemberStatus{Pool: m.Pool, Name: m.Name, Address: m.Addr.String(), AdminState: string(m.AdminState),
			Health: "Unprobed", Eligible: st.Served && m.eligible(c.Probe != nil),
			NewFlows: m.stats.newFlows.Load(), ActiveFlows: m.stats.active.Load(), Denied: m.stats.denied.Load()}
		if sec := m.Security; sec != nil {
			if sec.Subnet != nil {
				ms.SubnetNSG = sec.Subnet.ID
			}
			if sec.NIC != nil {
				ms.NICNSG = sec.NIC.ID
			}
			ms.OpenByDefault = sec.Open && sec.Subnet == nil && sec.NIC == nil
		}
		if ms.AdminState == "" {
			ms.AdminState = string(AdminNone)
		}
		if m.health != nil {
			m.health.mu.Lock()
			ms.Health, ms.LastProbeError, ms.Probes = upDown(m.health.up), m.health.lastErr, m.health.probes
			m.health.mu.Unlock()
		}
		st.Members = append(st.Members, ms)
	}
	return st
}
