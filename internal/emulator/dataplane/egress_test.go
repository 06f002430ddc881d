package dataplane_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

// sourceServer listens on a loopback address and answers every connection
// with the address it came from.
func sourceServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			_, _ = c.Write([]byte(ap.Addr().String()))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

func seenFrom(t *testing.T, p *dataplane.Plane, pod netip.Addr, server string) (string, error) {
	t.Helper()
	c, err := p.DialEgress(context.Background(), pod, "tcp", server)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	return string(buf[:n]), nil
}

// A pod's outbound flow leaves from its route's public IP: a loopback
// server sees that address; a pod without a route has none, and only
// loopback peers are reached.
func TestEgressSource(t *testing.T) {
	p := dataplane.New(dataplane.Options{})
	defer func() { _ = p.Close() }()
	lo := testutil.LoopbackNet(t)
	natIP := testutil.Nth(lo, 7)
	pod := netip.MustParseAddr("10.244.0.10")
	p.SetEgress([]dataplane.EgressRoute{{Service: "team-a", Pods: []netip.Addr{pod, netip.MustParseAddr("fd00::10")}, Sources: []netip.Addr{natIP}}})
	server := sourceServer(t)
	got, err := seenFrom(t, p, pod, server)
	if err != nil || got != natIP.String() {
		t.Fatalf("the server saw %q (%v), want %s", got, err, natIP)
	}
	if src, svc, ok := p.EgressSource(pod); !ok || src != natIP || svc != "team-a" {
		t.Errorf("EgressSource = %v %q %v", src, svc, ok)
	}
	// The IPv6 pod has no IPv6 source: no route.
	if _, err := seenFrom(t, p, netip.MustParseAddr("fd00::10"), server); !errors.Is(err, dataplane.ErrNoEgress) {
		t.Errorf("IPv6 pod without an IPv6 source: %v", err)
	}
	if _, err := p.DialEgress(context.Background(), pod, "tcp", "192.0.2.1:80"); !errors.Is(err, dataplane.ErrNotLoopback) {
		t.Errorf("non-loopback destination: %v", err)
	}
	p.SetEgress(nil)
	if _, err := seenFrom(t, p, pod, server); !errors.Is(err, dataplane.ErrNoEgress) {
		t.Errorf("after the route went: %v", err)
	}
}
