package dataplane_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1", true},
		{"127.240.3.4", true},
		{"::ffff:127.0.0.5", true}, // IPv4-mapped: the IPv4 address
		{"10.240.0.4", false},
		{"::1", true},
		{"2001:db8::4", false}, // documentation prefix: routed nowhere here
	} {
		err := dataplane.Loopback(netip.MustParseAddr(tc.addr))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, dataplane.ErrNotLoopback)) {
			t.Errorf("Loopback(%s) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
	if err := dataplane.Loopback(netip.Addr{}); !errors.Is(err, dataplane.ErrNotLoopback) {
		t.Errorf("Loopback(no address) = %v", err)
	}
	// The machine's own IPv6 addresses are local too, but reachable from
	// its networks: never served.
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, x := range addrs {
			n, ok := x.(*net.IPNet)
			a, _ := netip.AddrFromSlice(n.IP)
			if !ok || !a.Is6() || a.Is4In6() || a.IsLinkLocalUnicast() {
				continue
			}
			if err := dataplane.Loopback(a); !errors.Is(err, dataplane.ErrNotLoopback) {
				t.Errorf("Loopback(%s), an address of %s = %v, want refused", a, ifc.Name, err)
			}
		}
	}
}

// newRig6 is a rig on ::1, the IPv6 loopback address every machine has:
// frontend and member share it (on different ports).
func newRig6(t *testing.T) *rig {
	t.Helper()
	lo := netip.IPv6Loopback()
	r := &rig{t: t, clock: clocktesting.NewFakeClock(time.Now()),
		fe: netip.AddrPortFrom(lo, testutil.FreePortAny(t, lo)), port: testutil.FreePortAny(t, lo)}
	r.p = dataplane.New(dataplane.Options{Clock: r.clock})
	t.Cleanup(func() { _ = r.p.Close() })
	return r
}

// TestIPv6RuleOnLoopback: an IPv6 frontend is served like an IPv4 one
// (TCP and UDP), its member is probed from the IPv6 probe source, which
// the security groups see: AllowAzureLoadBalancerInBound lets it in, a
// deny on link-local sources stops it.
func TestIPv6RuleOnLoopback(t *testing.T) {
	r := newRig6(t)
	lo := netip.IPv6Loopback()
	testutil.StartBackendAny(t, "m1", netip.AddrPortFrom(lo, r.port))
	// The client (::1) is in the "virtual network": AllowVnetInBound.
	member := func(sec *dataplane.Security) []dataplane.Member {
		return []dataplane.Member{{Pool: "pool", Name: "m1", Addr: lo, Security: sec}}
	}
	defaults := &dataplane.Security{Subnet: nsg("/nsg/s", "::1/128")}
	r.apply(r.rule(member(defaults), r.tcpProbe(1)))
	r.until("m1", "eligible", eligible)
	if name, err := r.hello(); err != nil || name != "m1" {
		t.Fatalf("GET through [::1]: %q, %v", name, err)
	}
	if st := r.status(); !st.Served || st.Frontend != r.fe.String() || st.Counters.NewFlows != 1 {
		t.Fatalf("status %+v", st)
	}

	// UDP on the same frontend address and port.
	udpPort := testutil.FreePortAny(t, lo)
	udpBackend(t, "m1-udp", netip.AddrPortFrom(lo, udpPort))
	udp := r.rule(member(defaults), nil)
	udp.ID, udp.Protocol, udp.BackendPort = "/lb/rules/udp", dataplane.ProtocolUDP, udpPort
	r.p.Apply(dataplane.Config{Rules: []dataplane.Rule{r.rule(member(defaults), r.tcpProbe(1)), udp}})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(r.fe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := ask(t, c); got != "m1-udp" {
		t.Fatalf("UDP through [::1]: %q", got)
	}

	// Probes come from link-local addresses (dataplane.ProbeSourcesIPv6).
	blocked := &dataplane.Security{Subnet: nsg("/nsg/s", "::1/128",
		sr("deny-link-local", 100, dataplane.AccessDeny, "*", "fe80::/10", "*", "*"))}
	r.apply(r.rule(member(blocked), r.tcpProbe(1)))
	r.stepProbe(5*time.Second, "m1", 2)
	r.until("m1", "not eligible", func(m dataplane.MemberStatus) bool { return !m.Eligible })
	if m := r.member("m1"); !strings.Contains(m.LastProbeError, "deny-link-local") {
		t.Fatalf("member %+v", m)
	}
}

// TestInternalIPv6FloatingIPStaysUnservedOnLoopback: now that IPv6 is
// served, a rule the emulator marks UnservedInternalIPv6FloatingIP (Azure
// accepts it and carries nothing) still opens nothing, though its
// frontend could be bound and its member answers.
func TestInternalIPv6FloatingIPStaysUnservedOnLoopback(t *testing.T) {
	r := newRig6(t)
	lo := netip.IPv6Loopback()
	testutil.StartBackendAny(t, "m1", netip.AddrPortFrom(lo, r.port))
	rule := r.rule([]dataplane.Member{{Pool: "pool", Name: "m1", Addr: lo, Security: dataplane.OpenSecurity()}}, r.tcpProbe(1))
	rule.FloatingIP, rule.Unserved = true, dataplane.UnservedInternalIPv6FloatingIP
	r.apply(rule)
	if st := r.status(); st.Served || st.Reason != dataplane.UnservedInternalIPv6FloatingIP {
		t.Fatalf("served %v, reason %q", st.Served, st.Reason)
	}
	if c, err := net.DialTimeout("tcp", r.fe.String(), time.Second); err == nil {
		_ = c.Close()
		t.Fatal("the frontend of an internal IPv6 floating IP rule accepted a connection")
	}
}

// TestIPv6ProbesPassFromBothSources: whether the link-local source of
// Azure's IPv6 probes is in VirtualNetwork is not documented, so a probe
// passes only where it would either way: here VirtualNetwork is allowed
// before AzureLoadBalancer is denied, which lets an IPv4 probe
// (168.63.129.16 is in VirtualNetwork) through, and not an IPv6 one.
func TestIPv6ProbesPassFromBothSources(t *testing.T) {
	r := newRig6(t)
	lo := netip.IPv6Loopback()
	testutil.StartBackendAny(t, "m1", netip.AddrPortFrom(lo, r.port))
	vnet := netip.PrefixFrom(dataplane.ProbeSourcesIPv6[0].Addr(), 128).String() + ",::1/128,168.63.129.16/32"
	lb := "168.63.129.16/32," + dataplane.ProbeSourcesIPv6[0].Addr().String() + "," + dataplane.ProbeSourcesIPv6[1].Addr().String()
	sec := &dataplane.Security{Subnet: nsg("/nsg/s", "::1/128",
		sr("allow-vnet", 100, dataplane.AccessAllow, "*", vnet, "*", "*"),
		sr("deny-lb", 200, dataplane.AccessDeny, "*", lb, "*", "*"))}
	if v := sec.Evaluate(dataplane.ProtocolTCP, dataplane.ProbeSource, netip.MustParseAddrPort("10.0.0.4:80")); !v.Allowed || v.Rule != "allow-vnet" {
		t.Fatalf("an IPv4 probe: %+v, want allowed by allow-vnet", v)
	}
	r.apply(r.rule([]dataplane.Member{{Pool: "pool", Name: "m1", Addr: lo, Security: sec}}, r.tcpProbe(1)))
	r.until("m1", "probed", func(m dataplane.MemberStatus) bool { return m.Probes >= 1 })
	if m := r.member("m1"); m.Eligible || !strings.Contains(m.LastProbeError, "deny-lb") {
		t.Fatalf("an IPv6 probe: %+v, want denied by deny-lb", m)
	}
}

// TestIPv6OffLoopbackIsNeverUsed: an IPv6 frontend the machine does not
// route to its loopback device is not served (and says why); such a
// member is neither probed nor sent flows.
func TestIPv6OffLoopbackIsNeverUsed(t *testing.T) {
	r := newRig6(t)
	far := r.rule(nil, nil)
	far.ID, far.Frontend = "far", netip.MustParseAddrPort("[2001:db8::4]:80")
	offbox := r.rule([]dataplane.Member{{Name: "far", Addr: netip.MustParseAddr("2001:db8::5"), Security: dataplane.OpenSecurity()}}, r.tcpProbe(1))
	offbox.ID = "offbox"
	r.apply(far, offbox)
	for _, st := range r.p.Status().Rules {
		switch st.ID {
		case "far":
			if st.Served || !strings.Contains(st.Reason, dataplane.ErrNotLoopback.Error()) {
				t.Errorf("frontend off loopback: served %v, reason %q", st.Served, st.Reason)
			}
		case "offbox":
			if !st.Served || st.Members[0].Health != "Unprobed" || st.Members[0].Eligible {
				t.Errorf("a member off loopback: %+v", st.Members)
			}
		}
	}
	if _, err := r.hello(); err == nil {
		t.Fatal("a flow went to a member off loopback")
	}
}
