package e2e

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/testutil"
)

// TestUDPEchoService is a UDP Service end to end, through the real
// controller and the emulator's data plane to each node's simulated
// kube-proxy, which answers a datagram with a reply naming the node
// (nodeagent.UDPReply). Cluster: every node answers, those without an
// endpoint too; the rule must have no TCP probe on the UDP node port, where
// nothing listens for TCP (a node so probed would never be probed up and
// the Service would carry nothing). Local: only the nodes with a ready
// endpoint answer (the health check node port probes the others down, and
// their kube-proxy drops the datagram).
func TestUDPEchoService(t *testing.T) {
	c := startDataPlaneCluster(t, "udp", 3)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]

	t.Run("Cluster", func(t *testing.T) {
		svc := c.createService(t, udpEchoService(t, c, "echo-cluster", v1.ServiceExternalTrafficPolicyCluster), n1)
		fe := c.frontend(t, svc)
		got := c.udpAnswers(t, fe, 100, func(seen map[string]int) bool { return len(seen) == len(c.nodes) })
		for _, n := range c.nodes {
			if got[n] == 0 {
				t.Errorf("%s never answered (answers %v): every node of a Cluster Service forwards", n, got)
			}
		}
	})

	t.Run("Local", func(t *testing.T) {
		svc := c.createService(t, udpEchoService(t, c, "echo-local", v1.ServiceExternalTrafficPolicyLocal), n1, n2)
		fe := c.frontend(t, svc)
		got := c.udpAnswers(t, fe, 100, nil)
		for n := range got {
			if n != n1 && n != n2 {
				t.Errorf("%s answered (answers %v): it has no endpoint of a Local Service", n, got)
			}
		}
		if got[n1] == 0 || got[n2] == 0 {
			t.Errorf("answers %v: want both %s and %s, the nodes with endpoints", got, n1, n2)
		}
		// Straight to the node ports: kube-proxy on a node without a local
		// endpoint drops the datagram.
		nodePort := uint16(svc.Spec.Ports[0].NodePort)
		if name, err := nodeagent.HelloUDP(netip.Addr{}, netip.AddrPortFrom(c.addrs[n1], nodePort), 2*time.Second); err != nil || name != n1 {
			t.Errorf("%s's node port: %q %v", n1, name, err)
		}
		if name, err := nodeagent.HelloUDP(netip.Addr{}, netip.AddrPortFrom(c.addrs[n3], nodePort), 500*time.Millisecond); err == nil {
			t.Errorf("%s's node port answered %q: it has no local endpoint", n3, name)
		}
	})
}

// udpEchoService is a DNS-like UDP Service of c on a free port.
func udpEchoService(t *testing.T, c *dataPlaneCluster, name string, policy v1.ServiceExternalTrafficPolicy) *v1.Service {
	t.Helper()
	svc := loadBalancerService(c.ns, name)
	svc.Spec.ExternalTrafficPolicy = policy
	port := c.freeUDPPort(t)
	svc.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: port, TargetPort: intstr.FromInt32(port), Protocol: v1.ProtocolUDP}}
	return svc
}

// udpAnswers waits until the frontend answers a datagram, then sends up to
// n datagrams, each from a new socket (a new flow), and counts the nodes
// that answered; it stops early once enough(seen) holds. Every datagram
// must be answered.
func (c *dataPlaneCluster) udpAnswers(t *testing.T, fe netip.AddrPort, n int, enough func(seen map[string]int) bool) map[string]int {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, last = nodeagent.HelloUDP(netip.Addr{}, fe, 2*time.Second)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("no UDP reply from %s in 60s: %v; data plane: %s", fe, last, c.ruleStatus(fe))
	}
	seen := map[string]int{}
	for i := range n {
		name, err := nodeagent.HelloUDP(netip.Addr{}, fe, 2*time.Second)
		if err != nil {
			t.Fatalf("datagram %d to %s: %v; data plane: %s", i, fe, err, c.ruleStatus(fe))
		}
		if !slices.Contains(c.nodes, name) {
			t.Fatalf("datagram %d to %s answered by %q, not a node of the cluster", i, fe, name)
		}
		seen[name]++
		if enough != nil && enough(seen) {
			break
		}
	}
	t.Logf("answers from %s: %v", fe, seen)
	return seen
}

// freeUDPPort is a UDP port free on the first public IPs (a Service's
// frontend is one of them) at the time of the call.
func (c *dataPlaneCluster) freeUDPPort(t *testing.T) int32 {
	t.Helper()
	for range 10 {
		pc, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(testutil.Nth(c.public, 1), 0)))
		if err != nil {
			t.Fatalf("free UDP port: %v", err)
		}
		port := netip.MustParseAddrPort(pc.LocalAddr().String()).Port()
		_ = pc.Close()
		free := true
		for i := 2; i <= 4 && free; i++ {
			q, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(testutil.Nth(c.public, i), port)))
			if free = err == nil; free {
				_ = q.Close()
			}
		}
		if free {
			return int32(port)
		}
	}
	t.Fatalf("no UDP port free on the first addresses of %s", c.public)
	return 0
}
