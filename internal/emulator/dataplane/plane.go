package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultDialTimeout   = 2 * time.Second
	DefaultProbeTimeout  = 5 * time.Second
	DefaultSweepInterval = time.Second
)

// Options configure a Plane.
type Options struct {
	// Clock drives probe intervals, idle timeouts and drain periods
	// (default: the real clock). Network timeouts of single connection
	// attempts use real time.
	Clock clock.WithTicker
	// Logger receives state changes (probe transitions, listeners that
	// cannot be opened). The zero value discards them.
	Logger klog.Logger
	// DialTimeout bounds a connection attempt to a member (default 2 s).
	DialTimeout time.Duration
	// ProbeTimeout bounds one probe; a probe never takes longer than its
	// interval either (default 5 s).
	ProbeTimeout time.Duration
	// SweepInterval is how often idle flows and drain periods are checked
	// (default 1 s).
	SweepInterval time.Duration
	// Network, when set, is a network namespace served beside loopback
	// (real nodes: see Network).
	Network *Network
}

// Plane is the emulated data plane. Apply hands it the desired state;
// it listens on every served rule's frontend, probes members and relays
// flows. All methods are safe for concurrent use.
type Plane struct {
	o      Options
	prober *prober

	mu      sync.Mutex
	closed  bool
	rules   map[string]*ruleState // lower(rule id)
	targets map[healthKey]*target

	dmu    sync.Mutex
	denied map[deniedKey]*deniedCount // flows and probes refused by a security rule

	egress egressTable // outbound routes of pods (egress.go)

	net *netNS // Options.Network at run time; nil without one

	stopSweep chan struct{}
	wg        sync.WaitGroup
}

// ruleState is a rule at run time. Its counters live as long as a rule
// with its id does.
type ruleState struct {
	p        *Plane
	counters ruleCounters

	mu       sync.Mutex
	cfg      Rule
	via      *netNS // the namespace the rule is served in; nil: loopback
	unserved string
	members  []memberRT
	stats    map[netip.Addr]*memberStats
	ln       net.Listener // a TCP rule's listener
	udp      *udpServer   // a UDP rule's socket
	lnAddr   netip.AddrPort
	lnProto  Protocol
	flows    map[*flow]struct{} // TCP flows
}

// served reports whether the rule has its listener or socket open.
func (rs *ruleState) served() bool { return rs.ln != nil || rs.udp != nil }

type ruleCounters struct {
	newFlows, noBackend, backendFailures, idleTimeouts, drainResets, denied atomic.Uint64
	bytesIn, bytesOut                                                       atomic.Uint64
	active                                                                  atomic.Int64
}

type memberStats struct {
	newFlows, denied atomic.Uint64
	active           atomic.Int64
}

// deniedKey names a security rule (lower-cased NSG id and rule name).
type deniedKey struct{ nsg, rule string }

// deniedCount counts what one security rule refused.
type deniedCount struct {
	nsg, rule     string
	flows, probes atomic.Uint64
}

func keyOf(nsg, rule string) deniedKey { return deniedKey{strings.ToLower(nsg), strings.ToLower(rule)} }

// countDenied records a flow (or a probe) a security rule refused.
func (p *Plane) countDenied(v Verdict, probe bool) {
	p.dmu.Lock()
	k := keyOf(v.NSG, v.Rule)
	c := p.denied[k]
	if c == nil {
		c = &deniedCount{nsg: v.NSG, rule: v.Rule}
		p.denied[k] = c
	}
	p.dmu.Unlock()
	if probe {
		c.probes.Add(1)
	} else {
		c.flows.Add(1)
	}
}

// pruneDenied forgets the counters of security rules no member is guarded
// by any more (p.mu held).
func (p *Plane) pruneDenied(cfg Config) {
	keep := map[deniedKey]bool{}
	seen := map[*SecurityGroup]bool{}
	for _, r := range cfg.Rules {
		for _, m := range r.Members {
			gs := m.Security.groups()
			if len(gs) == 0 && (m.Security == nil || !m.Security.Open) {
				keep[keyOf("", DeniedNoNSG)] = true
			}
			for _, g := range gs {
				if seen[g] {
					continue
				}
				seen[g] = true
				keep[keyOf(g.ID, noMatch)] = true
				for _, sr := range g.Rules {
					keep[keyOf(g.ID, sr.Name)] = true
				}
			}
		}
	}
	p.dmu.Lock()
	defer p.dmu.Unlock()
	for k := range p.denied {
		if !keep[k] {
			delete(p.denied, k)
		}
	}
}

// New starts a Plane with nothing to serve.
func New(o Options) *Plane {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	p := &Plane{
		o:         o,
		rules:     map[string]*ruleState{},
		targets:   map[healthKey]*target{},
		denied:    map[deniedKey]*deniedCount{},
		stopSweep: make(chan struct{}),
	}
	p.prober = &prober{clock: o.Clock, timeout: o.ProbeTimeout, wg: &p.wg,
		logf:   func(format string, args ...any) { o.Logger.Info(fmt.Sprintf(format, args...)) },
		denied: func(v Verdict) { p.countDenied(v, true) }}
	if o.Network != nil {
		p.net = newNetNS(o.Network)
	}
	p.wg.Add(1)
	go p.sweep()
	return p
}

// viaFor is the namespace a frontend address is served in (nil:
// loopback).
func (p *Plane) viaFor(a netip.Addr) *netNS {
	if p.net != nil && p.net.cfg.contains(a) {
		return p.net
	}
	return nil
}

// reachableVia reports whether a rule served via (nil: loopback) may
// connect to a member at a.
func reachableVia(via *netNS, a netip.Addr) bool {
	if via != nil {
		return via.cfg.contains(a)
	}
	return reachable(a)
}

// Apply makes cfg the served state: listeners open and close, probes
// start and stop, members join and leave. It returns at once (listening
// sockets are bound before it returns); nothing in cfg makes it fail:
// what cannot be served is reported by Status.
func (p *Plane) Apply(cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	seen := map[string]bool{}
	want := map[healthKey]probeWant{}
	type socket struct {
		addr  netip.AddrPort
		proto Protocol
	}
	claimed := map[socket]string{}
	var applied []*ruleState
	for _, r := range cfg.Rules {
		id := strings.ToLower(r.ID)
		if seen[id] {
			continue
		}
		seen[id] = true
		rs := p.rules[id]
		if rs == nil {
			rs = &ruleState{p: p, stats: map[netip.Addr]*memberStats{}, flows: map[*flow]struct{}{}}
			p.rules[id] = rs
		}
		via := p.viaFor(r.Frontend.Addr())
		reason := r.check(via != nil)
		if reason == "" && via != nil && via.err != nil {
			reason = via.err.Error()
		}
		if reason == "" {
			if other, dup := claimed[socket{r.Frontend, r.Protocol}]; dup {
				reason = fmt.Sprintf("frontend %s (%s) is already served by rule %s", r.Frontend, r.Protocol, other)
			} else {
				claimed[socket{r.Frontend, r.Protocol}] = r.ID
			}
		}
		if reason == "" && r.Probe != nil {
			for _, m := range r.Members {
				k := healthKey{strings.ToLower(r.Probe.ID), m.Addr}
				if _, dup := want[k]; !dup && reachableVia(via, m.dialAddr()) {
					want[k] = probeWant{probe: *r.Probe, sec: m.Security, dial: m.dialAddr(), net: via}
				}
			}
		}
		p.setRule(rs, r, via, reason)
		applied = append(applied, rs)
	}
	for id, rs := range p.rules {
		if !seen[id] {
			p.dropRule(rs)
			delete(p.rules, id)
		}
	}
	p.syncTargets(want)
	for _, rs := range applied {
		rs.resolve(p.targets)
	}
	p.pruneDenied(cfg)
}

// probeWant is what a target should probe, and the security groups its
// probes must pass.
type probeWant struct {
	probe Probe
	sec   *Security
	dial  netip.Addr // where the member is reached (Member.Dial)
	net   *netNS     // the namespace it is reached in; nil: loopback
}

// setRule installs r as rs's configuration: its listener follows the
// frontend, and flows of members that left the rule drain.
func (p *Plane) setRule(rs *ruleState, r Rule, via *netNS, reason string) {
	rs.mu.Lock()
	rs.cfg, rs.unserved = r, reason
	if reason != "" || (rs.served() && (rs.lnAddr != r.Frontend || rs.lnProto != r.Protocol || rs.via != via)) {
		p.closeListenerLocked(rs)
	}
	if reason != "" {
		rs.resetFlowsLocked(nil)
	}
	present := map[netip.Addr]bool{}
	for _, m := range r.Members {
		present[m.Addr] = true
	}
	var gone []*flow
	for f := range rs.flows {
		if present[f.member] {
			f.drainAt = time.Time{}
			continue
		}
		if f.drainAt.IsZero() {
			if r.DrainPeriod <= 0 {
				gone = append(gone, f)
				continue
			}
			f.drainAt = p.o.Clock.Now().Add(r.DrainPeriod)
		}
	}
	rs.via = via
	rs.mu.Unlock()
	for _, f := range gone {
		rs.counters.drainResets.Add(1)
		f.reset()
	}
	if reason == "" && !rs.served() {
		p.listen(rs)
	}
}

// listen opens rs's listener (p.mu held). A failure is kept as the rule's
// reason and retried by the sweeper.
func (p *Plane) listen(rs *ruleState) {
	rs.mu.Lock()
	fe, proto, via := rs.cfg.Frontend, rs.cfg.Protocol, rs.via
	rs.mu.Unlock()
	var ln net.Listener
	var pc *net.UDPConn
	var err error
	if via != nil {
		ln, pc, err = via.listen(proto, fe)
	} else {
		// An IPv6 frontend is served only where the machine routes it to
		// its loopback device; it is bound with FreeBind (no interface
		// holds it).
		if err = Loopback(fe.Addr()); err == nil {
			ln, pc, err = listenOn(proto, fe)
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err != nil {
		reason := "listen: " + err.Error()
		if rs.unserved != reason { // retried every sweep: say it once
			p.o.Logger.Info("Data plane cannot listen on a frontend; retrying", "rule", rs.cfg.ID, "frontend", fe, "err", err)
		}
		rs.unserved = reason
		return
	}
	rs.unserved = ""
	rs.lnAddr, rs.lnProto = fe, proto
	if pc != nil {
		rs.udp = p.serveUDP(rs, pc)
		return
	}
	rs.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.accept(rs, ln)
	}()
}

// listenOn opens a TCP listener or a UDP socket on fe.
func listenOn(proto Protocol, fe netip.AddrPort) (net.Listener, *net.UDPConn, error) {
	ctx := context.Background()
	if proto == ProtocolUDP {
		pc, err := listenConfig.ListenPacket(ctx, network(proto, fe.Addr()), fe.String())
		if err != nil {
			return nil, nil, err
		}
		return nil, pc.(*net.UDPConn), nil
	}
	ln, err := listenConfig.Listen(ctx, network(proto, fe.Addr()), fe.String())
	return ln, nil, err
}

func (p *Plane) closeListenerLocked(rs *ruleState) {
	if rs.udp != nil {
		rs.udp.close()
		rs.udp = nil
	}
	if rs.ln == nil {
		return
	}
	_ = rs.ln.Close()
	rs.ln = nil
	rs.resetFlowsLocked(nil)
}

// dropRule tears a rule down: its listener closes and its flows are reset.
func (p *Plane) dropRule(rs *ruleState) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p.closeListenerLocked(rs)
	rs.resetFlowsLocked(nil)
}

// resetFlowsLocked resets rs's flows (those matching keep==nil: all).
func (rs *ruleState) resetFlowsLocked(keep func(*flow) bool) {
	for f := range rs.flows {
		if keep == nil || !keep(f) {
			f.reset()
		}
	}
}

// syncTargets starts, restarts (probe changed) and stops probing loops so
// that exactly want is probed (p.mu held). A change of security groups
// applies from the next probe on.
func (p *Plane) syncTargets(want map[healthKey]probeWant) {
	for k, t := range p.targets {
		w, ok := want[k]
		if !ok {
			t.halt()
			delete(p.targets, k)
			continue
		}
		t.mu.Lock()
		same := t.probe == w.probe
		t.sec = w.sec
		t.mu.Unlock()
		if !same {
			t.halt()
			t.mu.Lock()
			t.probe = w.probe
			t.mu.Unlock()
			p.prober.start(t)
		}
	}
	for k, w := range want {
		if _, ok := p.targets[k]; ok {
			continue
		}
		t := &target{key: k, dial: w.dial, net: w.net, probe: w.probe, sec: w.sec}
		p.targets[k] = t
		p.prober.start(t)
	}
}

// resolve binds rs's members to their health and counters.
func (rs *ruleState) resolve(targets map[healthKey]*target) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	ms := make([]memberRT, 0, len(rs.cfg.Members))
	dedup := map[netip.Addr]bool{}
	for _, m := range rs.cfg.Members {
		if dedup[m.Addr] {
			continue
		}
		dedup[m.Addr] = true
		st := rs.stats[m.Addr]
		if st == nil {
			st = &memberStats{}
			rs.stats[m.Addr] = st
		}
		rt := memberRT{Member: m, stats: st}
		if rs.via != nil {
			rt.net, rt.unreach = rs.via, !rs.via.cfg.contains(m.dialAddr())
		}
		if rs.cfg.Probe != nil {
			rt.health = targets[healthKey{strings.ToLower(rs.cfg.Probe.ID), m.Addr}]
		}
		ms = append(ms, rt)
	}
	for a, st := range rs.stats {
		if !dedup[a] && st.active.Load() == 0 {
			delete(rs.stats, a)
		}
	}
	rs.members = ms
}

// accept serves a listener until it closes.
func (p *Plane) accept(rs *ruleState, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			p.o.Logger.Info("Data plane accept failed", "frontend", ln.Addr(), "err", err)
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(rs, c.(*net.TCPConn))
		}()
	}
}

// serve starts a new flow for client: it picks a member, lets the
// member's security groups decide, connects to it and relays. A flow with
// no eligible member, denied by a security rule, or whose member refuses,
// is reset.
func (p *Plane) serve(rs *ruleState, client *net.TCPConn) {
	src, _ := netip.ParseAddrPort(client.RemoteAddr().String())
	dst, _ := netip.ParseAddrPort(client.LocalAddr().String())
	rs.mu.Lock()
	cfg, via := rs.cfg, rs.via
	i, ok := pick(rs.members, cfg.Probe != nil, cfg.Probe != nil && cfg.Probe.AllProbedUp, cfg.Distribution, protoTCP, src, dst)
	var m memberRT
	if ok {
		m = rs.members[i]
	}
	rs.mu.Unlock()
	if !ok {
		rs.counters.noBackend.Add(1)
		resetConn(client)
		return
	}
	// Azure chooses the member by hash first; its security groups then
	// drop what they deny (no other member is tried).
	secSrc, local := src, cfg.Frontend.Addr()
	if cfg.SourceNAT.IsValid() { // through a private endpoint: the NAT address is the source
		secSrc, local = netip.AddrPortFrom(cfg.SourceNAT, src.Port()), cfg.SourceNAT
	}
	if v := m.Security.Evaluate(ProtocolTCP, secSrc, securityDst(cfg, m.Addr)); !v.Allowed {
		rs.counters.denied.Add(1)
		m.stats.denied.Add(1)
		p.countDenied(v, false)
		resetConn(client)
		return
	}
	var bc net.Conn
	var err error
	if via != nil {
		bc, err = p.dialVia(via, ProtocolTCP, cfg, m.dialAddr(), src)
	} else {
		// On loopback the member sees the flow come from the frontend's
		// address: a relay cannot keep the client's, and this tells a
		// member serving several frontends on one port (floating IP)
		// which one the flow came through.
		d := net.Dialer{Timeout: p.o.DialTimeout, LocalAddr: &net.TCPAddr{IP: local.AsSlice()}, Control: FreeBind}
		bc, err = d.Dial(network(ProtocolTCP, m.dialAddr()), netip.AddrPortFrom(m.dialAddr(), cfg.BackendPort).String())
	}
	if err == nil && cfg.ProxyProtocol {
		if _, err = bc.Write(ProxyV2Header(src, dst, cfg.LinkID)); err != nil {
			resetConn(bc)
		}
	}
	if err != nil {
		p.o.Logger.V(2).Info("Data plane could not reach a member", "rule", cfg.ID, "member", m.Addr, "err", err)
		rs.counters.backendFailures.Add(1)
		resetConn(client)
		return
	}
	f := &flow{rs: rs, member: m.Addr, stats: m.stats, client: client, backend: bc.(*net.TCPConn)}
	f.last.Store(p.o.Clock.Now().UnixNano())
	if !rs.adopt(f) {
		f.reset()
		return
	}
	rs.counters.newFlows.Add(1)
	m.stats.newFlows.Add(1)
	f.relay(p.o.Clock.Now)
}

// dialVia opens a flow's connection to a member in the rule's namespace,
// as Azure delivers it to a VM: from the client's own address and port;
// floating IP off, to the member's address and the backend port; on, to
// the frontend's address and the backend port, routed to the member.
func (p *Plane) dialVia(via *netNS, proto Protocol, cfg Rule, member netip.Addr, client netip.AddrPort) (net.Conn, error) {
	dst, mark := netip.AddrPortFrom(member, cfg.BackendPort), uint32(0)
	if cfg.FloatingIP {
		var err error
		if mark, err = via.routeTo(member); err != nil {
			return nil, err
		}
		dst = netip.AddrPortFrom(cfg.Frontend.Addr(), cfg.BackendPort)
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.o.DialTimeout)
	defer cancel()
	return via.dial(ctx, proto, client, dst, mark)
}

// securityDst is a flow's destination as the member's security groups see
// it: the frontend's address and port with floating IP, the member's
// address and the backend port without.
func securityDst(cfg Rule, member netip.Addr) netip.AddrPort {
	if cfg.FloatingIP {
		return cfg.Frontend
	}
	return netip.AddrPortFrom(member, cfg.BackendPort)
}

// adopt registers a new flow; false when the rule stopped serving
// meanwhile.
func (rs *ruleState) adopt(f *flow) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.ln == nil {
		return false
	}
	rs.flows[f] = struct{}{}
	rs.counters.active.Add(1)
	f.stats.active.Add(1)
	return true
}

func (rs *ruleState) forget(f *flow) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, ok := rs.flows[f]; !ok {
		return
	}
	delete(rs.flows, f)
	rs.counters.active.Add(-1)
	f.stats.active.Add(-1)
}

// sweep ends idle flows, resets flows whose drain period passed, and
// retries listeners that could not be opened.
func (p *Plane) sweep() {
	defer p.wg.Done()
	t := p.o.Clock.NewTicker(p.o.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-p.stopSweep:
			return
		case <-t.C():
		}
		p.sweepOnce()
	}
}

func (p *Plane) sweepOnce() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	now := p.o.Clock.Now()
	for _, rs := range p.rules {
		rs.mu.Lock()
		idle, tcpReset := rs.cfg.IdleTimeout, rs.cfg.TCPReset
		var resets []*flow
		for f := range rs.flows {
			switch {
			case !f.drainAt.IsZero() && !now.Before(f.drainAt):
				rs.counters.drainResets.Add(1)
				resets = append(resets, f)
			case idle > 0 && !f.dropped.Load() && now.Sub(time.Unix(0, f.last.Load())) >= idle:
				rs.counters.idleTimeouts.Add(1)
				if tcpReset {
					resets = append(resets, f)
				} else {
					f.dropped.Store(true)
				}
			}
		}
		retry := !rs.served() && rs.cfg.check(rs.via != nil) == "" && strings.HasPrefix(rs.unserved, "listen: ")
		udp := rs.udp
		rs.mu.Unlock()
		if udp != nil && idle > 0 {
			udp.expire(now, idle)
		}
		for _, f := range resets {
			f.reset()
		}
		if retry {
			p.listen(rs)
		}
	}
}

// Close stops serving: listeners close, flows are reset, probes stop. It
// waits for every goroutine of the Plane.
func (p *Plane) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for id, rs := range p.rules {
		p.dropRule(rs)
		delete(p.rules, id)
	}
	p.syncTargets(nil)
	close(p.stopSweep)
	p.mu.Unlock()
	p.wg.Wait()
	p.net.close()
	return nil
}
