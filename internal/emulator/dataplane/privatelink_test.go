package dataplane_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
	"github.com/azlb/azlb/internal/testutil"
)

// seen is what the member saw of one connection: its source and the first
// bytes (a PROXY header when proxy protocol is on).
type seen struct {
	from netip.Addr
	head []byte
}

// recordingMember serves member 1: it reads want bytes (none: nothing) of
// each connection, reports them with the source address, answers "ok" and
// closes.
func recordingMember(t *testing.T, r *rig, want int) <-chan seen {
	t.Helper()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(r.addr(1), r.port).String())
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan seen, 4)
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(wait))
			buf := make([]byte, want)
			_, _ = io.ReadFull(c, buf)
			from, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			out <- seen{from: from.Addr(), head: buf}
			_, _ = c.Write([]byte("ok"))
			_ = c.Close()
		}
	}()
	return out
}

// through connects from src to addr and returns the answer.
func through(t *testing.T, src netip.Addr, addr netip.AddrPort) string {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
	var answer string
	testutil.Poll(t, wait, "an answer through "+addr.String(), func() bool {
		c, err := d.Dial("tcp", addr.String())
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		answer = string(b)
		return err == nil && answer == "ok"
	})
	return answer
}

func TestPrivateEndpointReachesMembersFromTheNATAddress(t *testing.T) {
	r := newRig(t)
	got := recordingMember(t, r, 0)
	rule := r.rule(r.members(""), nil)
	link := dataplane.PrivateLink{ID: "/pe/one", Endpoint: r.addr(200), Frontend: r.fe.Addr(), NAT: r.addr(201), LinkID: 7}
	r.p.Apply(dataplane.Config{Rules: append([]dataplane.Rule{rule}, dataplane.PrivateEndpointRules([]dataplane.Rule{rule}, []dataplane.PrivateLink{link})...)})

	through(t, r.addr(100), netip.AddrPortFrom(link.Endpoint, r.fe.Port()))
	if s := <-got; s.from != link.NAT {
		t.Fatalf("through the endpoint the member saw %v, want the NAT address %v", s.from, link.NAT)
	}
	through(t, r.addr(100), r.fe)
	if s := <-got; s.from != r.fe.Addr() {
		t.Fatalf("through the frontend the member saw %v, want the frontend %v", s.from, r.fe.Addr())
	}
}

func TestPrivateEndpointProxyProtocolV2(t *testing.T) {
	r := newRig(t)
	got := recordingMember(t, r, 16+12+8)
	rule := r.rule(r.members(""), nil)
	link := dataplane.PrivateLink{ID: "/pe/one", Endpoint: r.addr(200), Frontend: r.fe.Addr(), NAT: r.addr(201), LinkID: 0x01020304, ProxyProtocol: true}
	r.p.Apply(dataplane.Config{Rules: append([]dataplane.Rule{rule}, dataplane.PrivateEndpointRules([]dataplane.Rule{rule}, []dataplane.PrivateLink{link})...)})

	through(t, r.addr(100), netip.AddrPortFrom(link.Endpoint, r.fe.Port()))
	s := <-got
	h := s.head
	if !bytes.Equal(h[:12], []byte("\r\n\r\n\x00\r\nQUIT\n")) || h[12] != 0x21 || h[13] != 0x11 {
		t.Fatalf("not a PROXY v2 TCP/IPv4 header: % x", h)
	}
	if n := binary.BigEndian.Uint16(h[14:16]); n != 12+8 {
		t.Fatalf("length %d", n)
	}
	if src := netip.AddrFrom4([4]byte(h[16:20])); src != r.addr(100) {
		t.Errorf("source %v, want the consumer %v", src, r.addr(100))
	}
	if dst := netip.AddrFrom4([4]byte(h[20:24])); dst != link.Endpoint || binary.BigEndian.Uint16(h[26:28]) != r.fe.Port() {
		t.Errorf("destination %v:%d, want the endpoint", dst, binary.BigEndian.Uint16(h[26:28]))
	}
	if h[28] != 0xEE || binary.BigEndian.Uint16(h[29:31]) != 5 || h[31] != 0x01 || binary.LittleEndian.Uint32(h[32:36]) != link.LinkID {
		t.Errorf("Azure link id TLV % x", h[28:])
	}
	if s.from != link.NAT {
		t.Errorf("member saw %v, want the NAT address", s.from)
	}
}

func TestPrivateEndpointRulesDerivation(t *testing.T) {
	fe := netip.MustParseAddr("127.0.0.9")
	rules := []dataplane.Rule{
		{ID: "/lb/rules/tcp", Frontend: netip.AddrPortFrom(fe, 80), Protocol: dataplane.ProtocolTCP},
		{ID: "/lb/rules/udp", Frontend: netip.AddrPortFrom(fe, 53), Protocol: dataplane.ProtocolUDP},
		{ID: "/lb/rules/other", Frontend: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.10"), 80), Protocol: dataplane.ProtocolTCP},
	}
	links := []dataplane.PrivateLink{
		{ID: "/PE/A", Endpoint: netip.MustParseAddr("127.0.0.20"), Frontend: fe, NAT: netip.MustParseAddr("127.0.0.30")},
		{ID: "/pe/nonat", Endpoint: netip.MustParseAddr("127.0.0.21"), Frontend: fe},
	}
	d := dataplane.PrivateEndpointRules(rules, links)
	if len(d) != 4 {
		t.Fatalf("%d derived rules", len(d))
	}
	if d[0].ID != "/lb/rules/tcp|/pe/a" || d[0].Frontend.String() != "127.0.0.20:80" || d[0].Unserved != "" || d[0].SourceNAT != links[0].NAT {
		t.Errorf("tcp rule %+v", d[0])
	}
	if d[1].Unserved != dataplane.UnservedPrivateLinkUDP {
		t.Errorf("udp rule %+v", d[1])
	}
	if !strings.Contains(d[2].Unserved, "NAT") || !strings.Contains(d[3].Unserved, "NAT") {
		t.Errorf("no NAT: %q %q", d[2].Unserved, d[3].Unserved)
	}
}
