package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// udpServer serves a UDP rule: each client address and port is a flow,
// relayed through a socket connected to its member.
type udpServer struct {
	p  *Plane
	rs *ruleState
	pc *net.UDPConn

	mu    sync.Mutex
	flows map[netip.AddrPort]*udpFlow
}

// udpFlow is one client's flow to one member.
type udpFlow struct {
	client netip.AddrPort
	member netip.Addr
	stats  *memberStats
	conn   *net.UDPConn // connected to the member, from the frontend's address
	last   atomic.Int64 // clock time of the last datagram (UnixNano)
	once   sync.Once
}

// serveUDP starts serving pc for rs (rs.mu held).
func (p *Plane) serveUDP(rs *ruleState, pc *net.UDPConn) *udpServer {
	s := &udpServer{p: p, rs: rs, pc: pc, flows: map[netip.AddrPort]*udpFlow{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		s.serve()
	}()
	return s
}

// serve relays datagrams from clients until the socket closes.
func (s *udpServer) serve() {
	defer s.closeFlows()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error for an earlier datagram
		}
		f := s.flowFor(from)
		if f == nil {
			continue // dropped: no eligible member, as in Azure
		}
		f.last.Store(s.p.o.Clock.Now().UnixNano())
		s.rs.counters.bytesIn.Add(uint64(n))
		_, _ = f.conn.Write(buf[:n])
	}
}

// flowFor returns the client's flow, starting one when there is none or
// when its member no longer takes flows: Azure moves UDP flows off a
// member that is Down (admin state or probe) or gone. An existing flow is
// not evaluated again by the security groups (rule changes affect new
// flows only); nil means the datagram is dropped.
func (s *udpServer) flowFor(client netip.AddrPort) *udpFlow {
	rs := s.rs
	s.mu.Lock()
	f := s.flows[client]
	s.mu.Unlock()
	rs.mu.Lock()
	cfg, via := rs.cfg, rs.via
	probed := cfg.Probe != nil
	if f != nil {
		for i := range rs.members {
			if rs.members[i].Addr == f.member && rs.members[i].eligible(probed) {
				rs.mu.Unlock()
				return f
			}
		}
	}
	i, ok := pick(rs.members, probed, probed && cfg.Probe.AllProbedUp, cfg.Distribution, protoUDP, client, cfg.Frontend)
	var m memberRT
	if ok {
		m = rs.members[i]
	}
	rs.mu.Unlock()
	if f != nil {
		s.drop(f)
	}
	if !ok {
		rs.counters.noBackend.Add(1)
		return nil
	}
	// A new flow passes the member's security groups first; a denied one
	// is dropped datagram by datagram (each is evaluated afresh).
	if v := m.Security.Evaluate(ProtocolUDP, client, securityDst(cfg, m.Addr)); !v.Allowed {
		rs.counters.denied.Add(1)
		m.stats.denied.Add(1)
		s.p.countDenied(v, false)
		return nil
	}
	var c net.Conn
	var err error
	if via != nil {
		c, err = s.p.dialVia(via, ProtocolUDP, cfg, m.dialAddr(), client)
	} else {
		d := net.Dialer{LocalAddr: &net.UDPAddr{IP: cfg.Frontend.Addr().AsSlice()}, Control: FreeBind}
		c, err = d.Dial(network(ProtocolUDP, m.dialAddr()), netip.AddrPortFrom(m.dialAddr(), cfg.BackendPort).String())
	}
	if err != nil {
		rs.counters.backendFailures.Add(1)
		return nil
	}
	conn := c.(*net.UDPConn)
	nf := &udpFlow{client: client, member: m.Addr, stats: m.stats, conn: conn}
	nf.last.Store(s.p.o.Clock.Now().UnixNano())
	s.mu.Lock()
	s.flows[client] = nf
	s.mu.Unlock()
	rs.counters.newFlows.Add(1)
	rs.counters.active.Add(1)
	m.stats.newFlows.Add(1)
	m.stats.active.Add(1)
	s.p.wg.Add(1)
	go func() {
		defer s.p.wg.Done()
		s.replies(nf)
	}()
	return nf
}

// replies relays the member's datagrams back to the client until the
// flow ends.
func (s *udpServer) replies(f *udpFlow) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.conn.Read(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // the member refused a datagram (ICMP)
		}
		f.last.Store(s.p.o.Clock.Now().UnixNano())
		s.rs.counters.bytesOut.Add(uint64(n))
		_, _ = s.pc.WriteToUDPAddrPort(buf[:n], f.client)
	}
}

// drop ends a flow.
func (s *udpServer) drop(f *udpFlow) {
	f.once.Do(func() {
		s.mu.Lock()
		if s.flows[f.client] == f {
			delete(s.flows, f.client)
		}
		s.mu.Unlock()
		_ = f.conn.Close()
		s.rs.counters.active.Add(-1)
		f.stats.active.Add(-1)
	})
}

// expire ends flows idle for the idle timeout.
func (s *udpServer) expire(now time.Time, idle time.Duration) {
	s.mu.Lock()
	var old []*udpFlow
	for _, f := range s.flows {
		if now.Sub(time.Unix(0, f.last.Load())) >= idle {
			old = append(old, f)
		}
	}
	s.mu.Unlock()
	for _, f := range old {
		s.rs.counters.idleTimeouts.Add(1)
		s.drop(f)
	}
}

func (s *udpServer) closeFlows() {
	s.mu.Lock()
	flows := make([]*udpFlow, 0, len(s.flows))
	for _, f := range s.flows {
		flows = append(flows, f)
	}
	s.mu.Unlock()
	for _, f := range flows {
		s.drop(f)
	}
}

// close stops serving; the serving goroutine then ends every flow.
func (s *udpServer) close() { _ = s.pc.Close() }
