package dataplane

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Config is the whole desired state of the data plane: every load
// balancing rule of every load balancer the emulator holds. Apply takes it
// as a whole; what is not in it is torn down.
type Config struct {
	Rules []Rule
}

// Protocol of a load balancing rule, as ARM spells it.
type Protocol string

// The rule protocols ARM accepts.
const (
	ProtocolTCP Protocol = "Tcp"
	ProtocolUDP Protocol = "Udp"
	ProtocolAll Protocol = "All"
)

// Distribution is a rule's loadDistribution: which fields of a flow choose
// its backend.
type Distribution string

// The load distribution modes.
const (
	// DistributionDefault hashes the 5-tuple (source and destination
	// address and port, protocol).
	DistributionDefault Distribution = "Default"
	// DistributionSourceIP hashes source and destination address.
	DistributionSourceIP Distribution = "SourceIP"
	// DistributionSourceIPProtocol hashes source and destination address
	// and the protocol.
	DistributionSourceIPProtocol Distribution = "SourceIPProtocol"
)

// AdminState of a backend pool entry, as ARM spells it ("" is None).
type AdminState string

// The admin states.
const (
	AdminNone AdminState = "None"
	AdminUp   AdminState = "Up"
	AdminDown AdminState = "Down"
)

// Rule is one load balancing rule.
type Rule struct {
	// ID is the rule's ARM id; counters are kept per ID.
	ID string
	// Frontend is the frontend IP configuration's address and the rule's
	// frontend port.
	Frontend netip.AddrPort
	Protocol Protocol
	// BackendPort is where flows are sent on a member.
	BackendPort uint16
	// Members are the entries of every backend pool of the rule.
	Members []Member
	// Probe is the rule's health probe; nil means none (every member
	// takes new flows, and admin states have no effect, as in Azure).
	Probe *Probe
	// IdleTimeout ends flows that carried no data for that long.
	IdleTimeout time.Duration
	// TCPReset: on idle timeout, reset both ends (otherwise the flow is
	// silently dropped).
	TCPReset     bool
	FloatingIP   bool
	Distribution Distribution
	// DrainPeriod is the pool's drainPeriodInSeconds: how long flows of a
	// member removed from the pool live on before both ends are reset.
	DrainPeriod time.Duration
	// Unserved, when set, says why the emulator cannot serve this rule at
	// all (for example a frontend without an address, or
	// UnservedInternalIPv6FloatingIP); Apply reports it and opens nothing.
	Unserved string
	// SourceNAT, when valid, is the source address members see and their
	// security groups judge (a Private Link Service's NAT address; see
	// PrivateEndpointRules); ProxyProtocol sends them a PROXY v2 header
	// with the client's address and LinkID first.
	SourceNAT     netip.Addr
	ProxyProtocol bool
	LinkID        uint32
}

// UnservedInternalIPv6FloatingIP is the reason a rule with floating IP on
// whose frontend is a private IPv6 address (an internal load balancer's)
// carries no traffic: Azure documents that "Floating IP for IPv6 does not
// work for Internal Load Balancers", and ARM accepts such a rule while the
// data path drops its traffic silently (docs/data-plane.md).
const UnservedInternalIPv6FloatingIP = "floating IP on an internal load balancer's IPv6 frontend: Azure accepts the rule and carries no traffic for it"

// Member is one entry of a backend pool.
type Member struct {
	// Pool is the backend pool's ARM id, Name the entry's name.
	Pool, Name string
	Addr       netip.Addr
	// Dial, when valid, is the loopback address the data plane connects
	// to and probes for this member instead of Addr (a pod address mapped
	// onto loopback); Addr stays what security groups and hashing see.
	Dial       netip.Addr
	AdminState AdminState
	// Security is what guards the member's inbound traffic (flows and
	// probes): the network security groups of its subnet and NIC. nil
	// lets nothing through (a Standard load balancer's member without
	// any); OpenSecurity() lets everything through.
	Security *Security
}

// dialAddr is the address the data plane connects to.
func (m Member) dialAddr() netip.Addr {
	if m.Dial.IsValid() {
		return m.Dial
	}
	return m.Addr
}

// Probe is a health probe.
type Probe struct {
	// ID is the probe's ARM id: members keep their health across rules
	// and configuration changes under the same probe ID.
	ID       string
	Protocol string // Tcp, Http or Https
	Port     uint16
	// Path is the request path of Http and Https probes.
	Path     string
	Interval time.Duration
	// Threshold is the number of consecutive failed (successful) probes
	// that take a member out of (put it back into) rotation.
	Threshold int
	// AllProbedUp is noHealthyBackendsBehavior AllProbedUp: when every
	// member is probed down, all of them take new flows.
	AllProbedUp bool
}

// check reports why a rule cannot be served, "" when it can; inNet says
// its frontend is in the data plane's Network.
func (r *Rule) check(inNet bool) string {
	switch {
	case r.Unserved != "":
		return r.Unserved
	case r.ID == "":
		return "the rule has no id"
	case !r.Frontend.Addr().IsValid():
		return "the frontend has no IP address"
	case r.Frontend.Addr().Is4() && !r.Frontend.Addr().IsLoopback() && !inNet:
		return fmt.Sprintf("frontend %s is not a loopback address (the data plane listens on 127.0.0.0/8 only, and on its network namespace's prefixes)", r.Frontend.Addr())
	case inNet && (r.SourceNAT.IsValid() || r.ProxyProtocol):
		return "private endpoints are served on loopback only"
	case r.Frontend.Port() == 0:
		return "frontend port 0 (HA ports) is not served"
	case r.Protocol != ProtocolTCP && r.Protocol != ProtocolUDP:
		return fmt.Sprintf("protocol %s is not served (Tcp and Udp are)", r.Protocol)
	case r.BackendPort == 0:
		return "backend port 0 is not served"
	}
	if r.Probe != nil {
		if msg := r.Probe.check(); msg != "" {
			return msg
		}
	}
	return ""
}

func (p *Probe) check() string {
	switch {
	case p.ID == "":
		return "the probe has no id"
	case p.Port == 0:
		return fmt.Sprintf("probe %s has port 0", p.ID)
	case p.Interval <= 0:
		return fmt.Sprintf("probe %s has interval %v", p.ID, p.Interval)
	case p.Threshold < 1:
		return fmt.Sprintf("probe %s has threshold %d", p.ID, p.Threshold)
	}
	switch strings.ToLower(p.Protocol) {
	case "tcp", "http", "https":
		return ""
	}
	return fmt.Sprintf("probe %s has protocol %q (want Tcp, Http or Https)", p.ID, p.Protocol)
}
