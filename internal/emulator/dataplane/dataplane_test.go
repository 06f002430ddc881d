package dataplane_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

const wait = 10 * time.Second

// rig is a Plane on a fake clock with members on one loopback /24.
type rig struct {
	t     *testing.T
	p     *dataplane.Plane
	clock *clocktesting.FakeClock
	net   netip.Prefix
	fe    netip.AddrPort
	port  uint16 // backend port
}

func newRig(t *testing.T) *rig {
	t.Helper()
	n := testutil.LoopbackNet(t)
	fe := testutil.Nth(n, 250)
	r := &rig{t: t, clock: clocktesting.NewFakeClock(time.Now()), net: n,
		fe: netip.AddrPortFrom(fe, testutil.FreePort(t, fe)), port: testutil.FreePort(t, testutil.Nth(n, 1))}
	r.p = dataplane.New(dataplane.Options{Clock: r.clock})
	t.Cleanup(func() { _ = r.p.Close() })
	return r
}

func (r *rig) addr(i int) netip.Addr { return testutil.Nth(r.net, i) }

// backend starts member i's server.
func (r *rig) backend(i int) *testutil.Backend {
	return testutil.StartBackend(r.t, "m"+strconv.Itoa(i), netip.AddrPortFrom(r.addr(i), r.port))
}

func (r *rig) members(states ...dataplane.AdminState) []dataplane.Member {
	var ms []dataplane.Member
	for i, s := range states {
		ms = append(ms, dataplane.Member{Pool: "pool", Name: "m" + strconv.Itoa(i+1), Addr: r.addr(i + 1), AdminState: s,
			Security: dataplane.OpenSecurity()})
	}
	return ms
}

func (r *rig) rule(members []dataplane.Member, probe *dataplane.Probe) dataplane.Rule {
	return dataplane.Rule{ID: "/lb/rules/r1", Frontend: r.fe, Protocol: dataplane.ProtocolTCP, BackendPort: r.port,
		Members: members, Probe: probe, IdleTimeout: 4 * time.Minute, Distribution: dataplane.DistributionDefault}
}

func (r *rig) tcpProbe(threshold int) *dataplane.Probe {
	return &dataplane.Probe{ID: "/lb/probes/p1", Protocol: "Tcp", Port: r.port, Interval: 5 * time.Second, Threshold: threshold}
}

func (r *rig) apply(rules ...dataplane.Rule) { r.p.Apply(dataplane.Config{Rules: rules}) }

func (r *rig) status() dataplane.RuleStatus {
	r.t.Helper()
	st := r.p.Status()
	if len(st.Rules) != 1 {
		r.t.Fatalf("status has %d rules", len(st.Rules))
	}
	return st.Rules[0]
}

func (r *rig) member(name string) dataplane.MemberStatus {
	r.t.Helper()
	for _, m := range r.status().Members {
		if m.Name == name {
			return m
		}
	}
	r.t.Fatalf("no member %s", name)
	return dataplane.MemberStatus{}
}

// until polls the member's status.
func (r *rig) until(name, what string, cond func(dataplane.MemberStatus) bool) {
	r.t.Helper()
	testutil.Poll(r.t, wait, name+" "+what, func() bool { return cond(r.member(name)) })
}

func eligible(m dataplane.MemberStatus) bool { return m.Eligible }

// step advances the fake clock once its tickers are waiting and waits
// until the member has been probed n times.
func (r *rig) stepProbe(d time.Duration, name string, n uint64) {
	r.t.Helper()
	testutil.Poll(r.t, wait, "a ticker", r.clock.HasWaiters)
	r.clock.Step(d)
	r.until(name, "probed "+strconv.FormatUint(n, 10)+" times", func(m dataplane.MemberStatus) bool { return m.Probes >= n })
}

func (r *rig) hello() (string, error) { return testutil.Hello(r.fe, 2*time.Second) }

func TestSpreadsNewFlowsOverHealthyMembers(t *testing.T) {
	r := newRig(t)
	for i := 1; i <= 3; i++ {
		r.backend(i)
	}
	r.apply(r.rule(r.members("", "", ""), r.tcpProbe(1)))
	for _, m := range []string{"m1", "m2", "m3"} {
		r.until(m, "eligible", eligible)
	}
	seen := map[string]int{}
	for range 60 {
		name, err := r.hello()
		if err != nil {
			t.Fatal(err)
		}
		seen[name]++
	}
	if len(seen) != 3 {
		t.Fatalf("flows reached %v, want all three members", seen)
	}
	st := r.status()
	if !st.Served || st.Counters.NewFlows != 60 || st.Counters.NoBackend != 0 {
		t.Fatalf("status %+v", st)
	}
	for _, m := range st.Members {
		if int(m.NewFlows) != seen[m.Name] || m.Health != "Up" {
			t.Errorf("member %+v, the client saw %d flows", m, seen[m.Name])
		}
	}
}

func TestAdminStateDownTakesNoNewFlowsAndKeepsEstablished(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.backend(2)
	r.apply(r.rule(r.members("", ""), r.tcpProbe(1)))
	r.until("m1", "eligible", eligible)
	r.until("m2", "eligible", eligible)
	// An established connection to each member.
	conns := map[string]*testutil.Conn{}
	for len(conns) < 2 {
		k, name, err := testutil.Dial(r.fe, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if conns[name] != nil {
			k.Close()
			continue
		}
		conns[name] = k
		defer k.Close()
	}
	r.apply(r.rule(r.members(dataplane.AdminDown, ""), r.tcpProbe(1)))
	if m := r.member("m1"); m.Eligible || m.Health != "Up" {
		t.Fatalf("m1 after Down: %+v", m)
	}
	for range 40 {
		if name, err := r.hello(); err != nil || name != "m2" {
			t.Fatalf("a new flow after m1 went Down reached %q (%v)", name, err)
		}
	}
	for name, k := range conns {
		if got, err := k.Get(); err != nil || got != name {
			t.Fatalf("the established connection to %s: %q, %v", name, got, err)
		}
	}
	// Back to None: m1 takes new flows again.
	r.apply(r.rule(r.members("", ""), r.tcpProbe(1)))
	testutil.Poll(t, wait, "a new flow on m1", func() bool { name, _ := r.hello(); return name == "m1" })
}

func TestAdminStateUpIgnoresTheProbeAndNoProbeIgnoresAdminState(t *testing.T) {
	r := newRig(t)
	r.backend(1) // m2 has no server: its probe fails
	r.apply(r.rule(r.members("", dataplane.AdminUp), r.tcpProbe(1)))
	r.until("m1", "eligible", eligible)
	r.until("m2", "probed", func(m dataplane.MemberStatus) bool { return m.Probes >= 1 })
	if m := r.member("m2"); !m.Eligible || m.Health != "Down" || m.LastProbeError == "" {
		t.Fatalf("m2 with AdminState Up and a failing probe: %+v", m)
	}
	// Without a probe, Down has no effect (as in Azure).
	rule := r.rule(r.members(dataplane.AdminDown, dataplane.AdminDown), nil)
	r.apply(rule)
	for _, m := range r.status().Members {
		if !m.Eligible || m.Health != "Unprobed" {
			t.Fatalf("member of a rule without a probe: %+v", m)
		}
	}
}

func TestProbeThresholdCountsConsecutiveProbes(t *testing.T) {
	r := newRig(t)
	b := r.backend(1)
	r.apply(r.rule(r.members(""), r.tcpProbe(2)))
	r.until("m1", "probed once", func(m dataplane.MemberStatus) bool { return m.Probes == 1 })
	if m := r.member("m1"); m.Eligible {
		t.Fatalf("up after one of two probes: %+v", m)
	}
	if _, err := r.hello(); err == nil {
		t.Fatal("a flow was relayed while no member was up")
	}
	r.stepProbe(5*time.Second, "m1", 2)
	r.until("m1", "eligible", eligible)

	b.Stop() // the node goes away: probes fail
	r.stepProbe(5*time.Second, "m1", 3)
	if m := r.member("m1"); !m.Eligible {
		t.Fatalf("down after one of two failed probes: %+v", m)
	}
	if _, err := r.hello(); err == nil {
		t.Fatal("a flow to a stopped member succeeded")
	}
	r.stepProbe(5*time.Second, "m1", 4)
	r.until("m1", "not eligible", func(m dataplane.MemberStatus) bool { return !m.Eligible })
	st := r.status()
	if st.Counters.BackendFailures != 1 || st.Counters.NoBackend != 1 {
		t.Fatalf("counters %+v, want 1 backend failure (probe lag) and 1 flow without backend (before the first up)", st.Counters)
	}
}

func TestHTTPProbeAnswerOtherThan200IsDownAtOnce(t *testing.T) {
	r := newRig(t)
	b := r.backend(1)
	probe := &dataplane.Probe{ID: "/lb/probes/http", Protocol: "Http", Port: r.port, Path: "/healthz", Interval: 5 * time.Second, Threshold: 2}
	r.apply(r.rule(r.members(""), probe))
	r.until("m1", "probed once", func(m dataplane.MemberStatus) bool { return m.Probes == 1 })
	r.stepProbe(5*time.Second, "m1", 2)
	r.until("m1", "eligible", eligible)
	b.SetHealthy(false)
	r.stepProbe(5*time.Second, "m1", 3)
	if m := r.member("m1"); m.Eligible || m.Health != "Down" {
		t.Fatalf("after one 503 with threshold 2: %+v", m)
	}
}

func TestProbeChangeKeepsHealth(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.apply(r.rule(r.members(""), r.tcpProbe(1)))
	r.until("m1", "eligible", eligible)
	slower := r.tcpProbe(3)
	slower.Interval = 15 * time.Second
	r.apply(r.rule(r.members(""), slower))
	if m := r.member("m1"); !m.Eligible {
		t.Fatalf("a probe change took the member out: %+v", m)
	}
}

// idleRig serves one member without a probe (so the only ticker on the
// fake clock is the sweeper's) and holds one established connection.
func idleRig(t *testing.T, tcpReset bool) (*rig, net.Conn) {
	t.Helper()
	r := newRig(t)
	r.backend(1)
	rule := r.rule(r.members(""), nil)
	rule.TCPReset = tcpReset
	r.apply(rule)
	c, err := net.DialTimeout("tcp4", r.fe.String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, wait, "the sweeper's ticker", r.clock.HasWaiters)
	r.clock.Step(4*time.Minute + time.Second)
	testutil.Poll(t, wait, "an idle timeout", func() bool { return r.status().Counters.IdleTimeouts == 1 })
	return r, c
}

func TestIdleTimeoutWithTCPResetResetsBothEnds(t *testing.T) {
	_, c := idleRig(t, true)
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after the idle timeout: %v, want a reset", err)
	}
}

func TestIdleTimeoutWithoutTCPResetDropsSilently(t *testing.T) {
	_, c := idleRig(t, false)
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatalf("write on a silently dropped flow: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	n, err := c.Read(make([]byte, 64))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read on a silently dropped flow: %d bytes, %v; want nothing (a timeout)", n, err)
	}
}

func TestRemovalFromThePoolResetsFlowsAfterTheDrainPeriod(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.backend(2)
	rule := r.rule(r.members("", ""), nil)
	rule.DrainPeriod = 10 * time.Second
	r.apply(rule)
	var k *testutil.Conn
	for {
		c, name, err := testutil.Dial(r.fe, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if name == "m1" {
			k = c
			break
		}
		c.Close()
	}
	defer k.Close()
	rule.Members = rule.Members[1:]
	r.apply(rule)
	if _, err := k.Get(); err != nil {
		t.Fatalf("the flow of a removed member ended before its drain period: %v", err)
	}
	if name, err := r.hello(); err != nil || name != "m2" {
		t.Fatalf("a new flow went to %q (%v)", name, err)
	}
	testutil.Poll(t, wait, "the sweeper's ticker", r.clock.HasWaiters)
	r.clock.Step(11 * time.Second)
	testutil.Poll(t, wait, "a drain reset", func() bool { return r.status().Counters.DrainResets == 1 })
	if _, err := k.Get(); err == nil {
		t.Fatal("the flow of a removed member outlived its drain period")
	}
}

func TestRuleRemovedStopsListening(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.apply(r.rule(r.members(""), nil))
	if _, err := r.hello(); err != nil {
		t.Fatal(err)
	}
	r.apply()
	if len(r.p.Status().Rules) != 0 {
		t.Fatal("a removed rule is still reported")
	}
	if _, err := net.DialTimeout("tcp4", r.fe.String(), time.Second); err == nil {
		t.Fatal("the frontend still accepts connections")
	}
}

func TestUnservedRulesSayWhy(t *testing.T) {
	r := newRig(t)
	all := r.rule(nil, nil)
	all.ID, all.Protocol = "all", dataplane.ProtocolAll
	public := r.rule(nil, nil)
	public.ID, public.Frontend = "public", netip.MustParseAddrPort("20.40.0.4:80")
	ha := r.rule(nil, nil)
	ha.ID, ha.Frontend = "ha", netip.AddrPortFrom(r.fe.Addr(), 0)
	v6 := r.rule(nil, nil)
	v6.ID, v6.Frontend = "v6", netip.MustParseAddrPort("[2001:db8::4]:80") // not routed to loopback
	unset := r.rule(nil, nil)
	unset.ID, unset.Unserved = "unset", "the frontend's public IP has no address yet"
	offbox := r.rule([]dataplane.Member{{Name: "far", Addr: netip.MustParseAddr("10.240.0.4")}}, r.tcpProbe(1))
	offbox.ID = "offbox"
	r.apply(all, public, ha, v6, unset, offbox)
	for _, st := range r.p.Status().Rules {
		if st.ID == "offbox" {
			if !st.Served || st.Members[0].Health != "Unprobed" || st.Members[0].Eligible {
				t.Errorf("a member off loopback: %+v", st.Members)
			}
			continue
		}
		if st.Served || st.Reason == "" {
			t.Errorf("rule %s: served %v, reason %q", st.ID, st.Served, st.Reason)
		}
	}
}

func TestSameFrontendTwiceIsServedOnce(t *testing.T) {
	r := newRig(t)
	a, b := r.rule(nil, nil), r.rule(nil, nil)
	b.ID = "/lb/rules/r2"
	r.apply(a, b)
	st := r.p.Status()
	if !st.Rules[0].Served || st.Rules[1].Served || st.Rules[1].Reason == "" {
		t.Fatalf("status %+v", st.Rules)
	}
}

func TestNoEligibleMemberResetsNewFlows(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.apply(r.rule(r.members(dataplane.AdminDown), r.tcpProbe(1)))
	r.until("m1", "probed", func(m dataplane.MemberStatus) bool { return m.Probes >= 1 })
	if _, err := r.hello(); err == nil {
		t.Fatal("a new flow succeeded with every member Down")
	}
	if st := r.status(); st.Counters.NoBackend != 1 || st.Counters.NewFlows != 0 {
		t.Fatalf("counters %+v", st.Counters)
	}
}

func TestAllProbedUpSendsToEveryMemberWhenAllAreDown(t *testing.T) {
	r := newRig(t)
	// The probe port answers nothing, the backend port does.
	r.backend(1)
	probe := r.tcpProbe(1)
	probe.Port = testutil.FreePort(t, r.addr(1))
	probe.AllProbedUp = true
	r.apply(r.rule(r.members(""), probe))
	r.until("m1", "probed", func(m dataplane.MemberStatus) bool { return m.Probes >= 1 })
	if name, err := r.hello(); err != nil || name != "m1" {
		t.Fatalf("with AllProbedUp and every member probed down: %q, %v", name, err)
	}
}

func TestSourceIPDistributionKeepsAClientOnOneMember(t *testing.T) {
	r := newRig(t)
	for i := 1; i <= 3; i++ {
		r.backend(i)
	}
	rule := r.rule(r.members("", "", ""), nil)
	rule.Distribution = dataplane.DistributionSourceIP
	r.apply(rule)
	first, err := r.hello()
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if name, err := r.hello(); err != nil || name != first {
			t.Fatalf("SourceIP sent one client to %s and %q (%v)", first, name, err)
		}
	}
}

func TestCloseStopsEverything(t *testing.T) {
	r := newRig(t)
	r.backend(1)
	r.apply(r.rule(r.members(""), r.tcpProbe(1)))
	r.until("m1", "eligible", eligible)
	k, _, err := testutil.Dial(r.fe, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if err := r.p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Get(); err == nil {
		t.Fatal("a flow outlived Close")
	}
	r.apply(r.rule(r.members(""), nil)) // after Close: ignored
	if len(r.p.Status().Rules) != 0 {
		t.Fatal("Apply after Close served something")
	}
}

// udpBackend answers every datagram with its name until the test ends.
func udpBackend(t *testing.T, name string, at netip.AddrPort) {
	t.Helper()
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(at))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteToUDPAddrPort([]byte(name), from)
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
}

// ask sends a datagram on c and returns the answer.
func ask(t *testing.T, c *net.UDPConn) string {
	t.Helper()
	if _, err := c.Write([]byte("who")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(buf[:n])
}

func TestUDPFlowsMoveOffAMemberThatGoesDown(t *testing.T) {
	r := newRig(t)
	r.backend(1) // the TCP probe's target
	r.backend(2)
	up := r.addr(1)
	udpPort := testutil.FreePort(t, up)
	udpBackend(t, "m1", netip.AddrPortFrom(r.addr(1), udpPort))
	udpBackend(t, "m2", netip.AddrPortFrom(r.addr(2), udpPort))
	rule := r.rule(r.members("", ""), r.tcpProbe(1))
	rule.Protocol, rule.BackendPort = dataplane.ProtocolUDP, udpPort
	r.apply(rule)
	r.until("m1", "eligible", eligible)
	r.until("m2", "eligible", eligible)
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(r.fe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := ask(t, c)
	if first != "m1" && first != "m2" {
		t.Fatalf("answer %q", first)
	}
	if again := ask(t, c); again != first {
		t.Fatalf("one client's flow answered by %s, then %s", first, again)
	}
	other := map[string]string{"m1": "m2", "m2": "m1"}[first]
	states := map[string]dataplane.AdminState{first: dataplane.AdminDown}
	rule.Members = r.members(states["m1"], states["m2"])
	r.apply(rule)
	if got := ask(t, c); got != other {
		t.Fatalf("after %s went Down the flow was answered by %q, want %s", first, got, other)
	}
	st := r.status()
	if st.Counters.NewFlows != 2 || st.Counters.ActiveFlows != 1 || st.Counters.BytesIn != 9 || st.Counters.BytesOut != 6 {
		t.Fatalf("counters %+v", st.Counters)
	}
	// Idle flows end.
	testutil.Poll(t, wait, "a ticker", r.clock.HasWaiters)
	r.clock.Step(5 * time.Minute)
	testutil.Poll(t, wait, "the idle UDP flow expired", func() bool { return r.status().Counters.IdleTimeouts == 1 })
	if r.status().Counters.ActiveFlows != 0 {
		t.Fatal("an expired flow is still active")
	}
}
