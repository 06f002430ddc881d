package dataplane

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"sync"
)

// Network is a network namespace the data plane serves beside loopback:
// the network of real nodes (internal/localcluster), where the emulated
// load balancer behaves as Azure's does towards a VM.
//
//   - A rule whose frontend address is in Prefixes is served inside the
//     namespace: its listener is bound there (transparently: the address
//     need not be the namespace's own). The namespace must deliver to it
//     what clients send to the frontends.
//   - A member whose address is in Prefixes is connected to and probed
//     from inside the namespace, for rules served there. Each flow
//     reaches the member from the client's own address and port (a
//     transparent socket; the members route replies back through the
//     namespace), with floating IP off at the member's address and the
//     backend port, with floating IP on at the frontend's address and the
//     backend port, routed to the member through a policy route the data
//     plane keeps in the namespace (one rule and table per member, marked
//     by MemberMark). Probes come from ProbeSource when it is valid (Azure's
//     168.63.129.16), else from the namespace's own address.
//   - Check refuses a namespace that routes to an address outside the
//     machine (it has a default route): no packet may leave.
type Network struct {
	// NetNS is the namespace's file (/run/netns/NAME, or any bind mount
	// of /proc/PID/ns/net).
	NetNS string
	// Prefixes are the addresses served inside the namespace: the public
	// IPs of the frontends, the nodes' network, the pods'.
	Prefixes []netip.Prefix
	// ProbeSource is where health probes come from (bound
	// transparently), when valid.
	ProbeSource netip.Addr
}

// contains reports whether a is served inside the namespace.
func (n *Network) contains(a netip.Addr) bool {
	if n == nil {
		return false
	}
	a = a.Unmap()
	for _, p := range n.Prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check verifies the network can be served: the namespace exists and
// routes nowhere outside the machine, and no prefix is a loopback range
// (those are served on the host's loopback).
func (n *Network) Check() error {
	if n.NetNS == "" {
		return errors.New("data plane network: no namespace file")
	}
	if len(n.Prefixes) == 0 {
		return errors.New("data plane network: no prefixes")
	}
	for _, p := range n.Prefixes {
		switch {
		case !p.IsValid() || p.Bits() == 0:
			return fmt.Errorf("data plane network: prefix %s: want a network, not everything", p)
		case p.Overlaps(netip.MustParsePrefix("127.0.0.0/8")) || p.Contains(netip.IPv6Loopback()):
			return fmt.Errorf("data plane network: prefix %s overlaps loopback (served on the host's loopback)", p)
		}
	}
	ns, err := openNetNS(n.NetNS)
	if err != nil {
		return err
	}
	defer ns.close()
	return ns.do(func() error {
		for _, probe := range []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("2001:4860:4860::8888")} {
			if ok, err := routed(probe); err == nil && ok {
				return fmt.Errorf("data plane network: namespace %s routes %s: it has a route off the machine (a default route?); "+
					"the data plane serves only namespaces that reach nothing but the machine's own", n.NetNS, probe)
			}
		}
		return nil
	})
}

// MemberMark is the packet mark (and routing table) of a member's policy
// route in the namespace: floating IP flows to the member carry it.
func MemberMark(a netip.Addr) uint32 {
	h := fnv.New32a()
	b := a.Unmap().AsSlice()
	_, _ = h.Write(b)
	return 0x80000000 | h.Sum32()&0x7fffffff
}

// netNS is the run-time side of a Network: the namespace open, and the
// members' policy routes installed.
type netNS struct {
	cfg  *Network
	ns   *nsHandle
	err  error // opening failed: rules in it are not served
	mu   sync.Mutex
	mark map[uint32]netip.Addr // installed member routes, by mark
}

func newNetNS(cfg *Network) *netNS {
	n := &netNS{cfg: cfg, mark: map[uint32]netip.Addr{}}
	n.ns, n.err = openNetNS(cfg.NetNS)
	return n
}

// close removes the member routes and closes the namespace.
func (n *netNS) close() {
	if n == nil || n.ns == nil {
		return
	}
	n.mu.Lock()
	marks := n.mark
	n.mark = map[uint32]netip.Addr{}
	n.mu.Unlock()
	_ = n.ns.do(func() error {
		for m, a := range marks {
			_ = delMemberRoute(a, m)
		}
		return nil
	})
	n.ns.close()
}

// routeTo installs (once) the policy route that carries a floating IP
// flow marked MemberMark(member) to member, and returns the mark.
func (n *netNS) routeTo(member netip.Addr) (uint32, error) {
	m := MemberMark(member)
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.mark[m]; ok {
		if a != member {
			return 0, fmt.Errorf("members %s and %s share mark %#x", a, member, m)
		}
		return m, nil
	}
	if err := n.ns.do(func() error { return addMemberRoute(member, m) }); err != nil {
		return 0, fmt.Errorf("policy route to member %s: %w", member, err)
	}
	n.mark[m] = member
	return m, nil
}

// listen opens a rule's listener (TCP) or socket (UDP) on fe inside the
// namespace, bound transparently.
func (n *netNS) listen(proto Protocol, fe netip.AddrPort) (ln net.Listener, pc *net.UDPConn, err error) {
	if n.err != nil {
		return nil, nil, n.err
	}
	lc := net.ListenConfig{Control: sockopts(fe.Addr(), 0)}
	err = n.ns.do(func() error {
		if proto == ProtocolUDP {
			c, err := lc.ListenPacket(context.Background(), network(proto, fe.Addr()), fe.String())
			if err == nil {
				pc = c.(*net.UDPConn)
			}
			return err
		}
		ln, err = lc.Listen(context.Background(), network(proto, fe.Addr()), fe.String())
		return err
	})
	return ln, pc, err
}

// dial connects inside the namespace from src (transparently: a client's
// address) to dst, with the packet mark (0: none).
func (n *netNS) dial(ctx context.Context, proto Protocol, src, dst netip.AddrPort, mark uint32) (net.Conn, error) {
	if n.err != nil {
		return nil, n.err
	}
	d := net.Dialer{Control: sockopts(src.Addr(), mark)}
	if src.IsValid() {
		if proto == ProtocolUDP {
			d.LocalAddr = net.UDPAddrFromAddrPort(src)
		} else {
			d.LocalAddr = net.TCPAddrFromAddrPort(src)
		}
	}
	var c net.Conn
	err := n.ns.do(func() error {
		var err error
		c, err = d.DialContext(ctx, network(proto, dst.Addr()), dst.String())
		return err
	})
	return c, err
}
