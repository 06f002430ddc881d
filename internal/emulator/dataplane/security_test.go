package dataplane_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

var (
	anyAddr  = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	allPorts = []dataplane.PortRange{dataplane.AllPorts}
	// lbSource is the AzureLoadBalancer tag: the probes' sources, IPv4
	// and IPv6, as the emulator resolves it.
	lbSource = []netip.Prefix{netip.PrefixFrom(dataplane.ProbeSource.Addr(), 32),
		netip.PrefixFrom(dataplane.ProbeSourcesIPv6[0].Addr(), 128), netip.PrefixFrom(dataplane.ProbeSourcesIPv6[1].Addr(), 128)}
)

// prefixes parses "*" or comma-separated prefixes and addresses.
func prefixes(s string) []netip.Prefix {
	if s == "*" {
		return anyAddr
	}
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p)
			continue
		}
		a := netip.MustParseAddr(f)
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out
}

// ports parses "*", "N" or "A-B".
func ports(s string) []dataplane.PortRange {
	if s == "*" {
		return allPorts
	}
	var from, to int
	if a, b, ok := strings.Cut(s, "-"); ok {
		from, to = atoi(a), atoi(b)
	} else {
		from, to = atoi(s), atoi(s)
	}
	return []dataplane.PortRange{{From: uint16(from), To: uint16(to)}}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// sr is a security rule: source, destination and destination port in the
// ARM syntax (source port "*").
func sr(name string, prio int, access dataplane.Access, proto, src, dst, dport string) dataplane.SecurityRule {
	return dataplane.SecurityRule{Name: name, Priority: prio, Access: access, Protocol: proto,
		Sources: prefixes(src), SourcePorts: allPorts, Destinations: prefixes(dst), DestinationPorts: ports(dport)}
}

// nsg is a security group with custom rules plus the three inbound
// default rules (VirtualNetwork standing for vnet).
func nsg(id, vnet string, custom ...dataplane.SecurityRule) *dataplane.SecurityGroup {
	vn := append(prefixes(vnet), lbSource...)
	rules := append([]dataplane.SecurityRule{}, custom...)
	rules = append(rules,
		dataplane.SecurityRule{Name: "AllowVnetInBound", Priority: 65000, Access: dataplane.AccessAllow, Protocol: "*",
			Sources: vn, SourcePorts: allPorts, Destinations: vn, DestinationPorts: allPorts},
		dataplane.SecurityRule{Name: "AllowAzureLoadBalancerInBound", Priority: 65001, Access: dataplane.AccessAllow, Protocol: "*",
			Sources: lbSource, SourcePorts: allPorts, Destinations: anyAddr, DestinationPorts: allPorts},
		dataplane.SecurityRule{Name: "DenyAllInBound", Priority: 65500, Access: dataplane.AccessDeny, Protocol: "*",
			Sources: anyAddr, SourcePorts: allPorts, Destinations: anyAddr, DestinationPorts: allPorts})
	return &dataplane.SecurityGroup{ID: id, Rules: rules}
}

func TestEvaluate(t *testing.T) {
	const (
		member = "10.0.0.4"
		vnet   = "10.0.0.0/16"
	)
	client := netip.MustParseAddrPort("203.0.113.9:40000")
	inVnet := netip.MustParseAddrPort("10.0.1.7:40000")
	dst := netip.MustParseAddrPort(member + ":30080")
	allowWeb := sr("allow-web", 100, dataplane.AccessAllow, "Tcp", "*", member, "30080")
	denyClient := sr("deny-client", 200, dataplane.AccessDeny, "*", "203.0.113.0/24", "*", "*")
	cases := []struct {
		name  string
		sec   *dataplane.Security
		proto dataplane.Protocol
		src   netip.AddrPort
		dst   netip.AddrPort
		want  dataplane.Verdict
	}{
		{"no security at all", nil, dataplane.ProtocolTCP, client, dst, dataplane.Verdict{Rule: dataplane.DeniedNoNSG}},
		{"no NSG, closed", &dataplane.Security{}, dataplane.ProtocolTCP, client, dst, dataplane.Verdict{Rule: dataplane.DeniedNoNSG}},
		{"no NSG, open (Basic)", dataplane.OpenSecurity(), dataplane.ProtocolTCP, client, dst, dataplane.Verdict{Allowed: true}},
		{"subnet defaults deny the internet", &dataplane.Security{Subnet: nsg("s", vnet)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{NSG: "s", Rule: "DenyAllInBound"}},
		{"subnet defaults allow the vnet", &dataplane.Security{Subnet: nsg("s", vnet)}, dataplane.ProtocolTCP, inVnet, dst,
			dataplane.Verdict{Allowed: true, NSG: "s", Rule: "AllowVnetInBound"}},
		{"subnet defaults allow probes", &dataplane.Security{Subnet: nsg("s", vnet)}, dataplane.ProtocolTCP, dataplane.ProbeSource, dst,
			dataplane.Verdict{Allowed: true, NSG: "s", Rule: "AllowVnetInBound"}},
		{"subnet allow rule", &dataplane.Security{Subnet: nsg("s", vnet, allowWeb)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{Allowed: true, NSG: "s", Rule: "allow-web"}},
		{"protocol mismatch", &dataplane.Security{Subnet: nsg("s", vnet, allowWeb)}, dataplane.ProtocolUDP, client, dst,
			dataplane.Verdict{NSG: "s", Rule: "DenyAllInBound"}},
		{"port mismatch", &dataplane.Security{Subnet: nsg("s", vnet, allowWeb)}, dataplane.ProtocolTCP, client, netip.MustParseAddrPort(member + ":22"),
			dataplane.Verdict{NSG: "s", Rule: "DenyAllInBound"}},
		{"destination mismatch", &dataplane.Security{Subnet: nsg("s", vnet, allowWeb)}, dataplane.ProtocolTCP, client, netip.MustParseAddrPort("10.0.0.5:30080"),
			dataplane.Verdict{NSG: "s", Rule: "DenyAllInBound"}},
		{"lower priority number wins (deny first)", &dataplane.Security{Subnet: nsg("s", vnet,
			sr("deny", 150, dataplane.AccessDeny, "Tcp", "203.0.113.9", "*", "*"), allowWeb)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{Allowed: true, NSG: "s", Rule: "allow-web"}},
		{"lower priority number wins (in any order)", &dataplane.Security{Subnet: nsg("s", vnet,
			allowWeb, sr("deny", 99, dataplane.AccessDeny, "Tcp", "203.0.113.9", "*", "*"))}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{NSG: "s", Rule: "deny"}},
		{"NIC only", &dataplane.Security{NIC: nsg("n", vnet, allowWeb)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{Allowed: true, NSG: "n", Rule: "allow-web"}},
		{"subnet allows, NIC denies", &dataplane.Security{Subnet: nsg("s", vnet, allowWeb), NIC: nsg("n", vnet)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{NSG: "n", Rule: "DenyAllInBound"}},
		{"subnet denies first", &dataplane.Security{Subnet: nsg("s", vnet, denyClient), NIC: nsg("n", vnet, allowWeb)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{NSG: "s", Rule: "deny-client"}},
		{"both allow", &dataplane.Security{Subnet: nsg("s", vnet, allowWeb), NIC: nsg("n", vnet, allowWeb)}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{Allowed: true, NSG: "n", Rule: "allow-web"}},
		{"source port range", &dataplane.Security{Subnet: nsg("s", vnet, dataplane.SecurityRule{Name: "high-ports", Priority: 100, Access: dataplane.AccessAllow,
			Protocol: "*", Sources: anyAddr, SourcePorts: ports("1024-65535"), Destinations: anyAddr, DestinationPorts: allPorts})},
			dataplane.ProtocolTCP, netip.MustParseAddrPort("203.0.113.9:80"), dst, dataplane.Verdict{NSG: "s", Rule: "DenyAllInBound"}},
		{"a group without rules denies", &dataplane.Security{Subnet: &dataplane.SecurityGroup{ID: "empty"}}, dataplane.ProtocolTCP, client, dst,
			dataplane.Verdict{NSG: "empty", Rule: "(no matching rule)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.sec.Evaluate(tc.proto, tc.src, tc.dst); got != tc.want {
				t.Fatalf("Evaluate = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// helloFrom is testutil.Hello from a chosen source address.
func helloFrom(src netip.Addr, fe netip.AddrPort) (string, error) {
	d := &net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: tr}).Get("http://" + fe.String() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// secured is r's members with sec.
func secured(ms []dataplane.Member, sec *dataplane.Security) []dataplane.Member {
	for i := range ms {
		ms[i].Security = sec
	}
	return ms
}

func TestDeniedFlowsAreResetAndCounted(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	allowed, denied := r.addr(100), r.addr(101)
	group := nsg("/nsg/subnet", r.net.String(),
		sr("deny-101", 100, dataplane.AccessDeny, "Tcp", denied.String(), "*", "*"),
		sr("allow-all", 200, dataplane.AccessAllow, "Tcp", "*", r.addr(1).String(), "*"))
	r.apply(r.rule(secured(r.members(""), &dataplane.Security{Subnet: group}), nil))
	if name, err := helloFrom(allowed, r.fe); err != nil || name != "m1" {
		t.Fatalf("from %s: %q, %v", allowed, name, err)
	}
	// A denied connection is reset before a byte is relayed.
	// (The reset may come before the connect returns.)
	n, err := 0, error(nil)
	if c, derr := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: denied.AsSlice()}}).Dial("tcp4", r.fe.String()); derr != nil {
		err = derr
	} else {
		defer c.Close()
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(wait))
		n, err = c.Read(make([]byte, 64))
	}
	if n != 0 || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a denied connection read %d bytes, %v; want a reset", n, err)
	}
	st := r.p.Status()
	if d := st.Denials("/nsg/subnet", "deny-101"); d.Flows != 1 || d.Probes != 0 {
		t.Fatalf("denials of deny-101: %+v (all: %+v)", d, st.Denied)
	}
	rs := r.status()
	if rs.Counters.Denied != 1 || rs.Counters.NewFlows != 1 || rs.Counters.NoBackend != 0 || rs.Members[0].Denied != 1 ||
		rs.Members[0].SubnetNSG != "/nsg/subnet" || rs.Members[0].NICNSG != "" {
		t.Fatalf("rule status %+v", rs)
	}
}

func TestNoSecurityGroupLetsNothingThrough(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.apply(r.rule(secured(r.members(""), nil), r.tcpProbe(1)))
	r.until("m1", "probed", func(m dataplane.MemberStatus) bool { return m.Probes >= 1 })
	m := r.member("m1")
	if m.Eligible || m.Health != "Down" || !strings.Contains(m.LastProbeError, dataplane.DeniedNoNSG) {
		t.Fatalf("a member without NSG: %+v", m)
	}
	// Without a probe the member is eligible, and the flow is denied.
	r.apply(r.rule(secured(r.members(""), nil), nil))
	if _, err := r.hello(); err == nil {
		t.Fatal("a flow reached a member without NSG")
	}
	d := r.p.Status().Denials("", dataplane.DeniedNoNSG)
	if d.Flows != 1 || d.Probes < 1 {
		t.Fatalf("no-NSG denials %+v", d)
	}
	// Open by default (Basic): the same member takes the flow.
	r.apply(r.rule(secured(r.members(""), dataplane.OpenSecurity()), nil))
	if name, err := r.hello(); err != nil || name != "m1" {
		t.Fatalf("an open member: %q, %v", name, err)
	}
	if m := r.member("m1"); !m.OpenByDefault {
		t.Fatalf("member status %+v", m)
	}
	if len(r.p.Status().Denied) != 0 {
		t.Fatalf("the no-NSG counter outlived the last member without NSG: %+v", r.p.Status().Denied)
	}
}

func TestProbesPassTheSecurityGroups(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	member := r.addr(1).String()
	// The defaults let probes in (AllowAzureLoadBalancerInBound), though
	// they deny the client.
	defaults := &dataplane.Security{NIC: nsg("/nsg/nic", "10.0.0.0/16")}
	r.apply(r.rule(secured(r.members(""), defaults), r.tcpProbe(1)))
	r.until("m1", "eligible", eligible)
	if _, err := r.hello(); err == nil {
		t.Fatal("DenyAllInBound let a client through")
	}
	// A deny on the node's address below 65001 stops the probes too.
	blocked := &dataplane.Security{NIC: nsg("/nsg/nic", "10.0.0.0/16",
		sr("deny-node", 4096, dataplane.AccessDeny, "*", "*", member, "*"))}
	r.apply(r.rule(secured(r.members(""), blocked), r.tcpProbe(1)))
	r.stepProbe(5*time.Second, "m1", 2)
	r.until("m1", "not eligible", func(m dataplane.MemberStatus) bool { return !m.Eligible })
	if m := r.member("m1"); !strings.Contains(m.LastProbeError, "deny-node") {
		t.Fatalf("member %+v", m)
	}
	if d := r.p.Status().Denials("/nsg/nic", "deny-node"); d.Probes != 1 {
		t.Fatalf("deny-node denials %+v", d)
	}
}

func TestSecurityDestinationFollowsFloatingIP(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	fe := sr("to-frontend", 100, dataplane.AccessAllow, "Tcp", "*", r.fe.Addr().String(), itoa(r.fe.Port()))
	node := sr("to-node", 100, dataplane.AccessAllow, "Tcp", "*", r.addr(1).String(), itoa(r.port))
	for _, tc := range []struct {
		name     string
		floating bool
		rule     dataplane.SecurityRule
		pass     bool
	}{
		{"floating on, frontend rule", true, fe, true},
		{"floating on, node rule", true, node, false},
		{"floating off, node rule", false, node, true},
		{"floating off, frontend rule", false, fe, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := r.rule(secured(r.members(""), &dataplane.Security{Subnet: nsg("/nsg/s", "10.0.0.0/16", tc.rule)}), nil)
			rule.FloatingIP = tc.floating
			r.apply(rule)
			name, err := r.hello()
			if pass := err == nil && name == "m1"; pass != tc.pass {
				t.Fatalf("flow passed %v (%q, %v), want %v", pass, name, err, tc.pass)
			}
		})
	}
}

func itoa(p uint16) string { return strconv.Itoa(int(p)) }

func TestRuleChangesAffectNewFlowsOnly(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	open := &dataplane.Security{Subnet: nsg("/nsg/s", "10.0.0.0/16", sr("allow", 100, dataplane.AccessAllow, "Tcp", "*", "*", "*"))}
	r.apply(r.rule(secured(r.members(""), open), nil))
	k, name, err := testutil.Dial(r.fe, 2*time.Second)
	if err != nil || name != "m1" {
		t.Fatalf("dial: %q, %v", name, err)
	}
	defer k.Close()
	closed := &dataplane.Security{Subnet: nsg("/nsg/s", "10.0.0.0/16")}
	r.apply(r.rule(secured(r.members(""), closed), nil))
	if _, err := r.hello(); err == nil {
		t.Fatal("a new flow passed after the allow rule went")
	}
	if got, err := k.Get(); err != nil || got != "m1" {
		t.Fatalf("the established flow after the rule change: %q, %v", got, err)
	}
}

func TestDeniedUDPDatagramsAreDropped(t *testing.T) {
	r := newRig(t)
	udpPort := testutil.FreePort(t, r.addr(1))
	udpBackend(t, "m1", netip.AddrPortFrom(r.addr(1), udpPort))
	src := r.addr(102)
	deny := &dataplane.Security{Subnet: nsg("/nsg/s", "10.0.0.0/16",
		sr("allow-tcp", 100, dataplane.AccessAllow, "Tcp", "*", "*", "*"))}
	rule := r.rule(secured(r.members(""), deny), nil)
	rule.Protocol, rule.BackendPort = dataplane.ProtocolUDP, udpPort
	r.apply(rule)
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: src.AsSlice()}, net.UDPAddrFromAddrPort(r.fe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("who")); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, wait, "the datagram denied", func() bool {
		return r.p.Status().Denials("/nsg/s", "DenyAllInBound").Flows == 1
	})
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 64)); err == nil {
		t.Fatalf("a denied datagram was answered (%d bytes)", n)
	}
	allow := &dataplane.Security{Subnet: nsg("/nsg/s", "10.0.0.0/16",
		sr("allow-udp", 100, dataplane.AccessAllow, "Udp", src.String(), "*", itoa(udpPort)))}
	rule.Members = secured(r.members(""), allow)
	r.apply(rule)
	if got := ask(t, c); got != "m1" {
		t.Fatalf("an allowed datagram: %q", got)
	}
}
