package testutil

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// LoopbackNet6 returns a /64 of devenv.LoopbackIPv6CIDR chosen at random
// (fd00:10:R:S::/64, R not 0: fd00:10::/48 is the sandbox's), the IPv6
// counterpart of LoopbackNet. It fails the test, naming the fix, when the
// machine does not route that prefix to its loopback device
// (hack/ipv6-loopback.sh, run by make test-e2e): such a test would
// otherwise measure nothing.
func LoopbackNet6(t testing.TB) netip.Prefix {
	t.Helper()
	b := netip.MustParsePrefix(devenv.LoopbackIPv6CIDR).Addr().As16()
	r, s := 1+rand.IntN(0xffff), rand.IntN(0x10000)
	b[4], b[5], b[6], b[7] = byte(r>>8), byte(r), byte(s>>8), byte(s)
	p := netip.PrefixFrom(netip.AddrFrom16(b), 64)
	if err := dataplane.Loopback(Nth(p, 1)); err != nil {
		t.Fatalf("IPv6 addresses of %s cannot carry traffic on this machine: %v\n"+
			"Route the prefix to the loopback device first, as root: ./hack/ipv6-loopback.sh (make test-e2e runs it)",
			devenv.LoopbackIPv6CIDR, err)
	}
	return p
}

// listenAny listens on addr with dataplane.FreeBind, so that an IPv6
// address routed to loopback but held by no interface can be bound.
func listenAny(addr netip.AddrPort) (net.Listener, error) {
	lc := net.ListenConfig{Control: dataplane.FreeBind}
	return lc.Listen(context.Background(), "tcp", addr.String())
}

// FreePortAny is FreePort for an address of either family, IPv6
// addresses routed to loopback included.
func FreePortAny(t testing.TB, addr netip.Addr) uint16 {
	t.Helper()
	l, err := listenAny(netip.AddrPortFrom(addr, 0))
	if err != nil {
		t.Fatalf("free port on %s: %v", addr, err)
	}
	defer func() { _ = l.Close() }()
	return netip.MustParseAddrPort(l.Addr().String()).Port()
}

// StartBackendAny is StartBackend on an address of either family, IPv6
// addresses routed to loopback included (a node's IPv6 address).
func StartBackendAny(t testing.TB, name string, addr netip.AddrPort) *Backend {
	t.Helper()
	ln, err := listenAny(addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	return serveBackend(t, name, ln)
}

// HelloFromAny is HelloFrom for a source of either family, IPv6 addresses
// routed to loopback included (a client in a virtual network's IPv6
// space).
func HelloFromAny(src netip.Addr, addr netip.AddrPort, timeout time.Duration) (string, error) {
	if src.Is4() != addr.Addr().Is4() {
		return "", fmt.Errorf("source %s and destination %s are of different families", src, addr)
	}
	d := &net.Dialer{Timeout: timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Control: dataplane.FreeBind}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	defer c.CloseIdleConnections()
	return get(c, addr)
}
