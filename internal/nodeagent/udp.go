package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"
)

// The UDP echo, the answer of a simulated node to a datagram on a UDP
// Service port. Like a DNS answer, which repeats the query's ID and
// question, the reply carries the request back so that a client can match
// it to what it sent: the reply to a datagram is the node's name, one
// space, and the datagram's payload as received. `echo hi | nc -u -w1 IP
// PORT` prints "aks-pool1-0 hi". Node names hold no space, so the first
// space ends the name.

// UDPReply is a node's reply to a datagram with payload.
func UDPReply(node string, payload []byte) []byte {
	b := make([]byte, 0, len(node)+1+len(payload))
	b = append(b, node...)
	b = append(b, ' ')
	return append(b, payload...)
}

// ParseUDPReply splits a reply into the name of the node that sent it and
// the payload it echoes.
func ParseUDPReply(b []byte) (node string, echo []byte, err error) {
	name, echo, ok := bytes.Cut(b, []byte{' '})
	if !ok || len(name) == 0 {
		return "", nil, fmt.Errorf("not a node's UDP reply: %q", b)
	}
	return string(name), echo, nil
}

// HelloUDP sends one datagram from a new socket on src (any address when
// src is the zero Addr; a new socket is a new flow for a load balancer) to
// addr and returns the name of the node whose reply echoes it, within
// timeout. A datagram is not retransmitted: a lost one (dropped by a load
// balancer, a security group or kube-proxy) is a timeout.
func HelloUDP(src netip.Addr, addr netip.AddrPort, timeout time.Duration) (string, error) {
	var laddr *net.UDPAddr
	if src.IsValid() {
		laddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	network := "udp4"
	if !addr.Addr().Unmap().Is4() {
		network = "udp6"
	}
	c, err := net.DialUDP(network, laddr, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	payload := fmt.Appendf(nil, "hello %016x\n", rand.Uint64())
	if _, err := c.Write(payload); err != nil {
		return "", err
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return "", fmt.Errorf("no UDP reply from %s: %w", addr, err)
		}
		if node, echo, err := ParseUDPReply(buf[:n]); err == nil && bytes.Equal(echo, payload) {
			return node, nil
		}
	}
}

// udpServer serves one UDP address and port: every datagram kube-proxy
// would forward is answered with UDPReply; the others are dropped.
type udpServer struct {
	roleSet
	p    *Proxy
	pc   *net.UDPConn
	done chan struct{}
}

// listenUDP opens a UDP port and serves roles on it.
func (p *Proxy) listenUDP(ap netip.AddrPort, roles []portRole) (server, error) {
	lc := net.ListenConfig{Control: dataplane.FreeBind}
	network := "udp4"
	if !ap.Addr().Unmap().Is4() {
		network = "udp6"
	}
	c, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, err
	}
	pc := c.(*net.UDPConn)
	s := &udpServer{p: p, pc: pc, done: make(chan struct{})}
	s.setRoles(roles)
	go func() {
		defer close(s.done)
		s.serve()
	}()
	return s, nil
}

// serve answers datagrams until the socket closes.
func (s *udpServer) serve() {
	buf := make([]byte, 64<<10)
	for {
		n, from, err := s.pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		// Dropped, as kube-proxy drops it, when the Service has no ready
		// endpoint (or none on this node with externalTrafficPolicy Local).
		if s.p.serves(s.roleFrom(from.Addr())) {
			_, _ = s.pc.WriteToUDPAddrPort(UDPReply(s.p.node, buf[:n]), from)
		}
	}
}

func (s *udpServer) close() {
	_ = s.pc.Close()
	<-s.done
}
