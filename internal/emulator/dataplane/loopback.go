package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// ErrNotLoopback is the error of an address the data plane never listens
// on nor connects to, because packets to it could leave the machine.
var ErrNotLoopback = errors.New("not a loopback address")

// Loopback reports whether the data plane may listen on a and connect to
// it (nil), or why not (wrapping ErrNotLoopback). IPv4: an address of
// 127.0.0.0/8. IPv6: ::1, or an address the kernel routes to the loopback
// device and that no other interface holds: a prefix made local with
// `ip -6 route add local PREFIX dev lo` (hack/ipv6-loopback.sh), the IPv6
// counterpart of 127.0.0.0/8. Such addresses are bound with FreeBind, as
// no interface holds them. The answer for an IPv6 address is looked up in
// the kernel's routing table and kept for a second.
func Loopback(a netip.Addr) error {
	a = a.Unmap()
	switch {
	case !a.IsValid():
		return fmt.Errorf("no address: %w", ErrNotLoopback)
	case a.Is4():
		if a.IsLoopback() {
			return nil
		}
		return fmt.Errorf("%s: %w (IPv4 is served on 127.0.0.0/8)", a, ErrNotLoopback)
	case a.IsLoopback():
		return nil
	}
	return routes.check(a)
}

// reachable reports whether the data plane may open connections to a
// member: loopback addresses only (see Loopback), so it never sends a
// packet off the machine.
func reachable(a netip.Addr) bool { return Loopback(a) == nil }

// network is the socket network of protocol p ("tcp" or "udp") for the
// family of a.
func network(p Protocol, a netip.Addr) string {
	n := "tcp"
	if p == ProtocolUDP {
		n = "udp"
	}
	if a.Unmap().Is4() {
		return n + "4"
	}
	return n + "6"
}

// FreeBind is a Control function for net.ListenConfig and net.Dialer: it
// lets an IPv6 socket bind an address no interface holds
// (IPV6_FREEBIND), which is what an address of a prefix routed to the
// loopback device is (see Loopback). IPv4 sockets are left alone:
// 127.0.0.0/8 is bindable as it is.
func FreeBind(network, _ string, c syscall.RawConn) error {
	if network != "tcp6" && network != "udp6" {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) { serr = setFreeBind(fd) }); err != nil {
		return err
	}
	return serr
}

// listenConfig opens the data plane's listeners, with FreeBind.
var listenConfig = net.ListenConfig{Control: FreeBind}

// routeCache remembers, for a second, whether IPv6 addresses are routed
// to the loopback device: the data plane asks for every member of every
// new flow.
type routeCache struct {
	mu      sync.Mutex
	entries map[netip.Addr]routeEntry
}

type routeEntry struct {
	err error
	at  time.Time
}

// routeTTL is how long a lookup is kept: a route added (or removed) is
// seen within that time.
const routeTTL = time.Second

var routes = &routeCache{entries: map[netip.Addr]routeEntry{}}

func (c *routeCache) check(a netip.Addr) error {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[a]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < routeTTL {
		return e.err
	}
	err := loopbackRouted(a)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) > 4096 {
		clear(c.entries) // addresses come and go with tests: keep it small
	}
	c.entries[a] = routeEntry{err: err, at: now}
	return err
}

// loopbackRouted reports whether the kernel delivers packets to a locally
// through the loopback device while no other interface holds a (the
// machine's own addresses are local too, and reachable from its
// networks).
func loopbackRouted(a netip.Addr) error {
	local, err := routeLocal(a)
	if err != nil {
		return fmt.Errorf("%s: %w (route lookup: %w)", a, ErrNotLoopback, err)
	}
	if !local {
		return fmt.Errorf("%s: %w: the machine does not route it to its loopback device "+
			"(IPv6 is served on ::1 and on prefixes routed to lo, e.g. `ip -6 route add local fd00:10::/32 dev lo`: run hack/ipv6-loopback.sh as root)", a, ErrNotLoopback)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("%s: %w (interfaces: %w)", a, ErrNotLoopback, err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, x := range addrs {
			if n, ok := x.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
					return fmt.Errorf("%s: %w: it is an address of interface %s", a, ErrNotLoopback, ifc.Name)
				}
			}
		}
	}
	return nil
}
