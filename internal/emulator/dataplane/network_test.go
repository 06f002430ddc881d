//go:build linux

package dataplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// nsRig is a load balancer's namespace between a client's and two
// nodes', all private to the test (nothing of the host's network is
// touched):
//
//	client 198.51.100.1 ── cl0 [lb] br0 10.77.0.2 ── node1 10.77.0.11, node2 10.77.0.12
//
// The frontend 203.0.113.10 is served in lb; the nodes route the client's
// range and the probe source back to lb and hold the frontend address on
// their loopback (what kube-proxy's rules do for a Service's IP), so that
// floating IP flows are accepted.
type nsRig struct {
	t                  *testing.T
	dir                string
	lb, client         string
	nodes              []string
	nodeIPs            []netip.Addr
	vip, clientIP      netip.Addr
	mu                 sync.Mutex
	probeSources       map[string]bool
	health             map[netip.Addr]int // status code of each node's health endpoint
	closers            []func()
	clientNS, lbHandle *nsHandle
}

func needNetAdmin(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	for _, c := range []string{"ip", "unshare", "nsenter"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not found", c)
		}
	}
}

func newNSRig(t *testing.T) *nsRig {
	t.Helper()
	needNetAdmin(t)
	r := &nsRig{t: t, dir: t.TempDir(), vip: netip.MustParseAddr("203.0.113.10"), clientIP: netip.MustParseAddr("198.51.100.1"),
		nodeIPs:      []netip.Addr{netip.MustParseAddr("10.77.0.11"), netip.MustParseAddr("10.77.0.12")},
		probeSources: map[string]bool{}, health: map[netip.Addr]int{}}
	r.lb, r.client = r.newNS("lb"), r.newNS("client")
	for i := range r.nodeIPs {
		r.nodes = append(r.nodes, r.newNS(fmt.Sprintf("node%d", i+1)))
	}
	r.ip("", "link", "add", "cl0", "netns", r.lb, "type", "veth", "peer", "name", "eth0", "netns", r.client)
	r.ip(r.client, "addr", "add", "198.51.100.1/24", "dev", "eth0")
	r.ip(r.client, "link", "set", "eth0", "up")
	r.ip(r.client, "route", "add", "203.0.113.0/24", "via", "198.51.100.254")
	r.ip(r.lb, "addr", "add", "198.51.100.254/24", "dev", "cl0")
	r.ip(r.lb, "link", "set", "cl0", "up")
	r.ip(r.lb, "link", "add", "br0", "type", "bridge")
	r.ip(r.lb, "addr", "add", "10.77.0.2/24", "dev", "br0")
	r.ip(r.lb, "link", "set", "br0", "up")
	r.ip(r.lb, "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", "100")
	r.ip(r.lb, "rule", "add", "pref", "100", "iif", "cl0", "lookup", "100")
	r.ip(r.lb, "rule", "add", "pref", "101", "iif", "br0", "lookup", "100")
	for i, n := range r.nodes {
		port := fmt.Sprintf("vn%d", i+1)
		r.ip("", "link", "add", port, "netns", r.lb, "type", "veth", "peer", "name", "eth0", "netns", n)
		r.ip(r.lb, "link", "set", port, "master", "br0", "up")
		r.ip(n, "addr", "add", r.nodeIPs[i].String()+"/24", "dev", "eth0")
		r.ip(n, "link", "set", "eth0", "up")
		r.ip(n, "addr", "add", r.vip.String()+"/32", "dev", "lo")
		r.ip(n, "route", "add", "198.51.100.0/24", "via", "10.77.0.2")
		r.ip(n, "route", "add", "168.63.129.16/32", "via", "10.77.0.2")
	}
	for _, c := range []string{"all", "default", "cl0", "br0"} {
		if err := exec.Command("nsenter", "--net="+r.lb, "sysctl", "-qw", "net.ipv4.conf."+c+".rp_filter=0").Run(); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if r.clientNS, err = openNetNS(r.client); err != nil {
		t.Fatal(err)
	}
	if r.lbHandle, err = openNetNS(r.lb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := len(r.closers) - 1; i >= 0; i-- {
			r.closers[i]()
		}
		r.clientNS.close()
		r.lbHandle.close()
		for _, ns := range append([]string{r.lb, r.client}, r.nodes...) {
			_ = syscall.Unmount(ns, syscall.MNT_DETACH)
		}
	})
	return r
}

func (r *nsRig) newNS(name string) string {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		r.t.Fatal(err)
	}
	if out, err := exec.Command("unshare", "--net="+p, "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		r.t.Fatalf("unshare: %v: %s", err, out)
	}
	return p
}

func (r *nsRig) ip(ns string, args ...string) {
	r.t.Helper()
	cmd := exec.Command("ip", args...)
	if ns != "" {
		cmd = exec.Command("nsenter", append([]string{"--net=" + ns, "ip"}, args...)...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// serve runs, in node i's namespace, a TCP server on addr that answers
// each connection with "node<i> <client address> <address it was sent
// to>", a UDP server on addr answering each datagram with the same, and
// an HTTP health endpoint on the node's address, port 10256.
func (r *nsRig) serve(i int, addr netip.AddrPort) {
	r.t.Helper()
	h, err := openNetNS(r.nodes[i])
	if err != nil {
		r.t.Fatal(err)
	}
	defer h.close()
	name := fmt.Sprintf("node%d", i+1)
	var ln, hl net.Listener
	var pc net.PacketConn
	if err := h.do(func() error {
		var err error
		if ln, err = net.Listen("tcp4", addr.String()); err != nil {
			return err
		}
		if pc, err = net.ListenPacket("udp4", addr.String()); err != nil {
			return err
		}
		hl, err = net.Listen("tcp4", netip.AddrPortFrom(r.nodeIPs[i], 10256).String())
		return err
	}); err != nil {
		r.t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = fmt.Fprintf(c, "%s %s %s\n", name, c.RemoteAddr(), c.LocalAddr())
			_ = c.Close()
		}
	})
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(fmt.Appendf(nil, "%s %s %s %s", name, from, addr, buf[:n]), from)
		}
	})
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.probeSources[strings.Split(req.RemoteAddr, ":")[0]] = true
		code := r.health[r.nodeIPs[i]]
		r.mu.Unlock()
		if code == 0 {
			code = http.StatusOK
		}
		w.WriteHeader(code)
	})}
	wg.Go(func() { _ = srv.Serve(hl) })
	r.closers = append(r.closers, func() {
		_ = ln.Close()
		_ = pc.Close()
		_ = srv.Close()
		wg.Wait()
	})
}

// dialFromClient connects from the client's namespace.
func (r *nsRig) dialFromClient(proto string, dst netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := r.clientNS.do(func() error {
		var err error
		c, err = net.DialTimeout(proto, dst.String(), 2*time.Second)
		return err
	})
	return c, err
}

// hello connects to dst from the client and returns the answer's fields:
// node, the address the node saw the flow from, the address it was sent
// to.
func (r *nsRig) hello(dst netip.AddrPort) ([]string, net.Addr, error) {
	c, err := r.dialFromClient("tcp4", dst)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return nil, nil, err
	}
	return strings.Fields(line), c.LocalAddr(), nil
}

func (r *nsRig) plane(clock *clocktesting.FakeClock) *Plane {
	p := New(Options{Clock: clock, Network: &Network{NetNS: r.lb, ProbeSource: netip.MustParseAddr("168.63.129.16"),
		Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("10.77.0.0/24")}}})
	r.t.Cleanup(func() { _ = p.Close() })
	return p
}

func (r *nsRig) members() []Member {
	var ms []Member
	for i, a := range r.nodeIPs {
		ms = append(ms, Member{Pool: "pool", Name: fmt.Sprintf("node%d", i+1), Addr: a, Security: OpenSecurity()})
	}
	return ms
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond) //nolint:forbidigo // polling the plane's real sockets with a deadline
	}
}

// TestNetworkDeliversAsAzure: in a namespace, a flow reaches a node from
// the client's own address and port; with floating IP off at the node's
// address and the backend port, on at the frontend's address; UDP too.
func TestNetworkDeliversAsAzure(t *testing.T) {
	r := newNSRig(t)
	for i := range r.nodes {
		r.serve(i, netip.MustParseAddrPort("0.0.0.0:8080"))
	}
	p := r.plane(clocktesting.NewFakeClock(time.Now()))
	off := Rule{ID: "/lb/rules/off", Frontend: netip.AddrPortFrom(r.vip, 80), Protocol: ProtocolTCP, BackendPort: 8080,
		Members: r.members(), IdleTimeout: 4 * time.Minute, Distribution: DistributionDefault}
	on := off
	on.ID, on.Frontend, on.FloatingIP = "/lb/rules/on", netip.AddrPortFrom(r.vip, 8080), true
	udp := off
	udp.ID, udp.Protocol, udp.Frontend = "/lb/rules/udp", ProtocolUDP, netip.AddrPortFrom(r.vip, 53)
	p.Apply(Config{Rules: []Rule{off, on, udp}})
	for _, st := range p.Status().Rules {
		if !st.Served || st.Namespace != r.lb {
			t.Fatalf("rule %s: served %v in %q (%s)", st.ID, st.Served, st.Namespace, st.Reason)
		}
	}
	seen := map[string]bool{}
	for range 40 {
		f, local, err := r.hello(off.Frontend)
		if err != nil {
			t.Fatal(err)
		}
		if len(f) != 3 || f[1] != local.String() {
			t.Fatalf("floating IP off: the node saw %q, the client was %s", f, local)
		}
		want := map[string]string{"node1": "10.77.0.11:8080", "node2": "10.77.0.12:8080"}[f[0]]
		if f[2] != want {
			t.Fatalf("floating IP off: %s was reached at %s, want %s", f[0], f[2], want)
		}
		seen[f[0]] = true
	}
	if len(seen) != 2 {
		t.Errorf("40 flows reached %v, want both nodes", seen)
	}
	f, local, err := r.hello(on.Frontend)
	if err != nil {
		b, _ := json.Marshal(p.Status())
		t.Fatalf("%v\n%s", err, b)
	}
	if len(f) != 3 || f[1] != local.String() || f[2] != "203.0.113.10:8080" {
		t.Fatalf("floating IP on: the node saw %q (client %s), want the client and the frontend 203.0.113.10:8080", f, local)
	}
	c, err := r.dialFromClient("udp4", udp.Frontend)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 200)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Fields(string(b[:n])); len(g) != 4 || g[1] != c.LocalAddr().String() || g[3] != "hi" {
		t.Fatalf("UDP: the node answered %q, the client was %s", b[:n], c.LocalAddr())
	}
}

// TestNetworkProbesFromAzureAddress: probes reach the nodes from
// 168.63.129.16; a node whose health endpoint answers 503 takes no new
// flows; the member routes of floating IP are gone from the namespace
// once the plane closes.
func TestNetworkProbesFromAzureAddress(t *testing.T) {
	r := newNSRig(t)
	for i := range r.nodes {
		r.serve(i, netip.MustParseAddrPort("0.0.0.0:8080"))
	}
	r.health[r.nodeIPs[1]] = http.StatusServiceUnavailable
	clock := clocktesting.NewFakeClock(time.Now())
	p := New(Options{Clock: clock, Network: &Network{NetNS: r.lb, ProbeSource: netip.MustParseAddr("168.63.129.16"),
		Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("10.77.0.0/24")}}})
	rule := Rule{ID: "/lb/rules/r", Frontend: netip.AddrPortFrom(r.vip, 8080), Protocol: ProtocolTCP, BackendPort: 8080, FloatingIP: true,
		Members: r.members(), IdleTimeout: 4 * time.Minute, Distribution: DistributionDefault,
		Probe: &Probe{ID: "/lb/probes/p", Protocol: "Http", Port: 10256, Path: "/healthz", Interval: 5 * time.Second, Threshold: 1}}
	p.Apply(Config{Rules: []Rule{rule}})
	eventuallyTrue(t, "node1 probed up, node2 down", func() bool {
		st := p.Status().Rules[0]
		return len(st.Members) == 2 && st.Members[0].Eligible && !st.Members[1].Eligible && st.Members[1].Probes > 0
	})
	r.mu.Lock()
	sources := fmt.Sprint(r.probeSources)
	r.mu.Unlock()
	if sources != "map[168.63.129.16:true]" {
		t.Errorf("probes came from %s, want 168.63.129.16 only", sources)
	}
	for range 10 {
		f, _, err := r.hello(rule.Frontend)
		if err != nil {
			t.Fatal(err)
		}
		if f[0] != "node1" {
			t.Fatalf("a new flow went to %s, probed down", f[0])
		}
	}
	out, err := exec.Command("nsenter", "--net="+r.lb, "ip", "rule").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("fwmark %#x", MemberMark(r.nodeIPs[0]))) {
		t.Fatalf("the member's policy rule is not in the namespace: %v\n%s", err, out)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("nsenter", "--net="+r.lb, "ip", "rule").CombinedOutput()
	if err != nil || strings.Contains(string(out), "fwmark") {
		t.Fatalf("member rules left in the namespace after Close: %v\n%s", err, out)
	}
}

// TestNetworkCheck refuses a namespace with a way off the machine, and
// prefixes that are loopback or everything.
func TestNetworkCheck(t *testing.T) {
	r := newNSRig(t)
	ok := &Network{NetNS: r.lb, Prefixes: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}
	if err := ok.Check(); err != nil {
		t.Fatalf("an isolated namespace: %v", err)
	}
	for _, n := range []*Network{
		{NetNS: r.lb, Prefixes: []netip.Prefix{netip.MustParsePrefix("127.64.0.0/16")}},
		{NetNS: r.lb, Prefixes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}},
		{NetNS: filepath.Join(r.dir, "nope"), Prefixes: ok.Prefixes},
		{NetNS: "/etc/hostname", Prefixes: ok.Prefixes},
	} {
		if err := n.Check(); err == nil {
			t.Errorf("Check(%+v) accepted it", n)
		}
	}
	r.ip(r.lb, "route", "add", "default", "via", "10.77.0.11")
	if err := ok.Check(); err == nil || !strings.Contains(err.Error(), "route off the machine") {
		t.Fatalf("a namespace with a default route: %v", err)
	}
}
