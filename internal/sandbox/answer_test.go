package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/testutil"
)

// answeringService is a Service whose ingress IP is ip, with one port of
// each protocol.
func answeringService(name string, ip netip.Addr, tcp, udp uint16) *v1.Service {
	s := demoService(name, int32(tcp), v1.ServiceExternalTrafficPolicyCluster)
	s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Port: int32(udp), Protocol: v1.ProtocolUDP})
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip.String()}}
	return s
}

// waitAnswer returns once both the TCP and the UDP port answer with a
// node's name, and names the Service and frontend that did not.
func TestWaitAnswer(t *testing.T) {
	ip := testutil.Nth(testutil.LoopbackNet(t), 1)
	ln, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "node-t\n")
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	pc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	if err != nil {
		t.Fatal(err)
	}
	udpDone := make(chan struct{})
	go func() {
		defer close(udpDone)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFromUDPAddrPort(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				_, _ = pc.WriteToUDPAddrPort(nodeagent.UDPReply("node-u", buf[:n]), from)
			}
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-udpDone })
	tcpPort := netip.MustParseAddrPort(ln.Addr().String()).Port()
	udpPort := netip.MustParseAddrPort(pc.LocalAddr().String()).Port()

	silent := testutil.Nth(testutil.LoopbackNet(t), 1) // nothing listens there
	cs := fake.NewClientset(answeringService("up", ip, tcpPort, udpPort), answeringService("down", silent, tcpPort, udpPort))
	ctx := context.Background()
	fes, nodes, err := waitAnswer(ctx, cs, DemoNamespace, "up", netip.Addr{}, 5*time.Second)
	if err != nil || nodes != "node-t, node-u" || !strings.Contains(fes, "/TCP") || !strings.Contains(fes, "/UDP") {
		t.Fatalf("waitAnswer: %q %q %v", fes, nodes, err)
	}
	_, _, err = waitAnswer(ctx, cs, DemoNamespace, "down", netip.Addr{}, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "service demo/down did not answer on "+silent.String()) {
		t.Fatalf("a Service that does not answer: %v", err)
	}
}
