package nodeagent

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/testutil"
)

// dropWait is how long a test waits for a reply it expects never to come.
const dropWait = 300 * time.Millisecond

// udp sends one datagram to the node's port from a new socket (on from,
// when valid) and returns the node named in the reply.
func (r *proxyRig) udp(port int32, from netip.Addr, timeout time.Duration) (string, error) {
	r.t.Helper()
	return HelloUDP(from, netip.AddrPortFrom(r.ip, uint16(port)), timeout)
}

func udpService(name string, port, nodePort int32, mutate ...func(*v1.Service)) *v1.Service {
	return svc(name, port, nodePort, append([]func(*v1.Service){func(s *v1.Service) {
		s.Spec.Ports[0].Protocol = v1.ProtocolUDP
	}}, mutate...)...)
}

func TestUDPReplyRoundTrip(t *testing.T) {
	node, echo, err := ParseUDPReply(UDPReply("aks-pool1-0", []byte("hi there\n")))
	if err != nil || node != "aks-pool1-0" || string(echo) != "hi there\n" {
		t.Fatalf("got %q %q %v", node, echo, err)
	}
	if node, echo, err := ParseUDPReply(UDPReply("n", nil)); err != nil || node != "n" || len(echo) != 0 {
		t.Fatalf("empty payload: %q %q %v", node, echo, err)
	}
	for _, bad := range []string{"", "no-space", " starts-with-space"} {
		if _, _, err := ParseUDPReply([]byte(bad)); err == nil {
			t.Errorf("%q parsed as a reply", bad)
		}
	}
}

// A UDP Service port is served on the node port and, with floating IP, the
// Service port: each datagram gets a reply naming the node and echoing it.
// Nothing listens for TCP there (a TCP probe on a UDP node port fails, as
// on a real node).
func TestProxyServesUDPNodePortAndFloatingIPPort(t *testing.T) {
	port, nodePort := ports(t)
	r := newProxyRig(t, udpService("dns", port, nodePort), slice("dns", "node-b"))
	r.sync(true)
	for _, p := range []int32{nodePort, port} {
		if node, err := r.udp(p, netip.Addr{}, 2*time.Second); err != nil || node != "node-a" {
			t.Fatalf("UDP port %d: %q %v", p, node, err)
		}
		if c, err := net.DialTimeout("tcp4", netip.AddrPortFrom(r.ip, uint16(p)).String(), time.Second); err == nil {
			_ = c.Close()
			t.Fatalf("TCP port %d is open for a UDP Service", p)
		}
	}

	// The raw reply: the node's name, a space, the datagram as sent.
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(r.ip, uint16(nodePort))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	n, err := c.Read(buf)
	if err != nil || !bytes.Equal(buf[:n], []byte("node-a hi\n")) {
		t.Fatalf("reply %q %v, want %q", buf[:n], err, "node-a hi\n")
	}

	r.sync(false) // the node stops
	if node, err := r.udp(nodePort, netip.Addr{}, dropWait); err == nil {
		t.Fatalf("a stopped node answered: %q", node)
	}
}

// One Service with TCP and UDP on the same port numbers: both protocols
// are served, each its own way.
func TestProxyServesTCPAndUDPOnOnePortNumber(t *testing.T) {
	port, nodePort := ports(t)
	both := svc("dns", port, nodePort, func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "udp", Port: port, NodePort: nodePort, Protocol: v1.ProtocolUDP})
	})
	r := newProxyRig(t, both, slice("dns", "node-a"))
	r.sync(true)
	if code, body := r.get(nodePort, netip.Addr{}); code != http.StatusOK || body != "node-a\n" {
		t.Fatalf("TCP: %d %q", code, body)
	}
	if node, err := r.udp(nodePort, netip.Addr{}, 2*time.Second); err != nil || node != "node-a" {
		t.Fatalf("UDP: %q %v", node, err)
	}
}

// Local: a node without a ready local endpoint drops the datagram; the
// health check node port stays TCP/HTTP.
func TestProxyLocalUDPServiceFollowsLocalEndpoints(t *testing.T) {
	port, nodePort := ports(t)
	hc := int32(testutil.FreePort(t, testutil.Nth(testutil.LoopbackNet(t), 1)))
	r := newProxyRig(t, udpService("dns", port, nodePort, func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	}), slice("dns", "node-b"))
	r.sync(true)
	if code, body := r.get(hc, netip.Addr{}); code != http.StatusServiceUnavailable {
		t.Fatalf("health check without a local endpoint: %d %q", code, body)
	}
	if node, err := r.udp(nodePort, netip.Addr{}, dropWait); err == nil {
		t.Fatalf("a node without a local endpoint answered: %q", node)
	}
	if _, err := r.kube.DiscoveryV1().EndpointSlices("demo").Update(context.Background(), slice("dns", "node-a", "node-b"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, 10*time.Second, "a reply once the node has a local endpoint", func() bool {
		node, err := r.udp(nodePort, netip.Addr{}, dropWait)
		return err == nil && node == "node-a"
	})
	if code, _ := r.get(hc, netip.Addr{}); code != http.StatusOK {
		t.Fatalf("health check with a local endpoint: %d", code)
	}
}

func TestProxyDropsDatagramsOfAServiceWithoutEndpoints(t *testing.T) {
	port, nodePort := ports(t)
	r := newProxyRig(t, udpService("dns", port, nodePort))
	r.sync(true)
	if node, err := r.udp(nodePort, netip.Addr{}, dropWait); err == nil {
		t.Fatalf("a Service without endpoints answered: %q", node)
	}
}

// Two floating-IP UDP Services on one port: the datagram's source (the
// data plane sends from the frontend's address) picks the Service.
func TestProxyTellsFloatingIPUDPServicesApartByFrontend(t *testing.T) {
	port, _ := ports(t)
	lo := testutil.LoopbackNet(t)
	a, b := testutil.Nth(lo, 1), testutil.Nth(lo, 2)
	ingress := func(ip netip.Addr) func(*v1.Service) {
		return func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip.String()}}
		}
	}
	r := newProxyRig(t, udpService("has-endpoints", port, 0, ingress(a)), udpService("empty", port, 0, ingress(b)), slice("has-endpoints", "node-z"))
	r.sync(true)
	if node, err := r.udp(port, a, 2*time.Second); err != nil || node != "node-a" {
		t.Fatalf("through the frontend of the Service with endpoints: %q %v", node, err)
	}
	if node, err := r.udp(port, b, dropWait); err == nil {
		t.Fatalf("through the frontend of the Service without endpoints: %q, want a drop", node)
	}
}

// A node's IPv6 loopback address is served too, TCP and UDP (the data
// plane serves IPv6 frontends on loopback-routed addresses; ::1 always is
// one).
func TestProxyServesIPv6LoopbackAddresses(t *testing.T) {
	v6 := netip.MustParseAddr("::1")
	tcpPort, udpPort := int32(testutil.FreePortAny(t, v6)), int32(testutil.FreePortAny(t, v6))
	r := newProxyRig(t, svc("web", tcpPort, tcpPort), udpService("dns", udpPort, udpPort), slice("web", "node-b"), slice("dns", "node-b"))
	p, err := NewProxy("node-6", []string{v6.String()}, r.svcs, r.slices, klog.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Sync(true); err != nil {
		t.Fatal(err)
	}
	if node, err := HelloUDP(netip.Addr{}, netip.AddrPortFrom(v6, uint16(udpPort)), 2*time.Second); err != nil || node != "node-6" {
		t.Fatalf("UDP on [::1]:%d: %q %v", udpPort, node, err)
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + netip.AddrPortFrom(v6, uint16(tcpPort)).String() + "/")
	if err != nil {
		t.Fatalf("TCP on [::1]:%d: %v", tcpPort, err)
	}
	defer resp.Body.Close()
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	if !strings.Contains(b.String(), "node-6") {
		t.Fatalf("TCP answer %q, want node-6", b.String())
	}
}
