package testutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// LoopbackNet returns a /24 of 127.0.0.0/8 chosen at random (127.100-199.x.0),
// so that tests running at the same time rarely share addresses. Address i
// of it is LoopbackNet(t).Addr() advanced i times.
func LoopbackNet(t testing.TB) netip.Prefix {
	t.Helper()
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(100 + rand.IntN(100)), byte(rand.IntN(256)), 0}), 24)
}

// Nth is the i-th address of p.
func Nth(p netip.Prefix, i int) netip.Addr {
	a := p.Addr()
	for range i {
		a = a.Next()
	}
	return a
}

// FreePort returns a TCP port free on addr at the time of the call.
func FreePort(t testing.TB, addr netip.Addr) uint16 {
	t.Helper()
	l, err := net.Listen("tcp4", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		t.Fatalf("free port on %s: %v", addr, err)
	}
	defer func() { _ = l.Close() }()
	return netip.MustParseAddrPort(l.Addr().String()).Port()
}

// Backend is an HTTP server on one loopback address and port standing for
// what a node serves behind a load balancer: every request is answered
// with the backend's name, /healthz with 200 while it is healthy and 503
// otherwise. Keep-alive connections stay open, so a client can tell an
// established connection from a new one.
type Backend struct {
	Name    string
	Addr    netip.AddrPort
	srv     *http.Server
	healthy atomic.Bool
	done    chan struct{}
}

// StartBackend serves name on addr until Stop or the end of the test.
func StartBackend(t testing.TB, name string, addr netip.AddrPort) *Backend {
	t.Helper()
	ln, err := net.Listen("tcp4", addr.String())
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	return serveBackend(t, name, ln)
}

// serveBackend serves name on ln until Stop or the end of the test.
func serveBackend(t testing.TB, name string, ln net.Listener) *Backend {
	b := &Backend{Name: name, Addr: netip.MustParseAddrPort(ln.Addr().String()), done: make(chan struct{})}
	b.healthy.Store(true)
	b.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && !b.healthy.Load() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, name+"\n")
	})}
	go func() {
		defer close(b.done)
		_ = b.srv.Serve(ln)
	}()
	t.Cleanup(b.Stop)
	return b
}

// SetHealthy sets what /healthz answers.
func (b *Backend) SetHealthy(ok bool) { b.healthy.Store(ok) }

// Stop closes the listener and every connection, as a node that goes away.
func (b *Backend) Stop() {
	_ = b.srv.Close()
	<-b.done
}

// Hello opens a new connection to addr, sends GET / and returns the body
// (the serving backend's name), within timeout.
func Hello(addr netip.AddrPort, timeout time.Duration) (string, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	return get(c, addr)
}

// HelloFrom is Hello from the source address src (a loopback address the
// emulator's data plane classifies: Internet, VirtualNetwork, a tag).
func HelloFrom(src netip.Addr, addr netip.AddrPort, timeout time.Duration) (string, error) {
	d := &net.Dialer{Timeout: timeout, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))}
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}}
	return get(c, addr)
}

// Conn is one keep-alive connection to an address: every Get goes over the
// same TCP connection (an established flow).
type Conn struct {
	addr netip.AddrPort
	c    *http.Client
	conn atomic.Int32 // connections the transport opened
}

// Dial opens a keep-alive connection with a first request and returns the
// name that answered.
func Dial(addr netip.AddrPort, timeout time.Duration) (*Conn, string, error) {
	k := &Conn{addr: addr}
	d := &net.Dialer{Timeout: timeout}
	k.c = &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
			k.conn.Add(1)
			return d.DialContext(ctx, network, a)
		}}}
	name, err := k.Get()
	return k, name, err
}

// Get sends a request on the connection. It fails, rather than opening a
// second connection, when the first one was closed.
func (k *Conn) Get() (string, error) {
	name, err := get(k.c, k.addr)
	if n := k.conn.Load(); n > 1 {
		return "", fmt.Errorf("the connection was lost (%d connections opened)", n)
	}
	return name, err
}

// Close closes the connection.
func (k *Conn) Close() { k.c.CloseIdleConnections() }

func get(c *http.Client, addr netip.AddrPort) (string, error) {
	resp, err := c.Get("http://" + addr.String() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return strings.TrimSpace(string(body)), nil
}
