package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azlb/azlb/internal/devenv"
)

// TestSharedIPTCPAndUDP is the DNS pattern end to end: a TCP Service and a
// UDP Service name one public IP (azure-pip-name); both get that address,
// the load balancer has one frontend for both, and both carry traffic
// through the data plane (whose NSG admits each only on its own port).
// When the Service whose frontend it is goes, the other keeps its IP and
// its traffic.
func TestSharedIPTCPAndUDP(t *testing.T) {
	c := startDataPlaneCluster(t, "shr", 2)
	client := netip.MustParseAddr("127.0.0.1")
	const pip = "shared-dns-ip"
	ann := map[string]string{"service.beta.kubernetes.io/azure-pip-name": pip}

	// One port number, both protocols: DNS's 53.
	udpPort := c.freeUDPPort(t)
	tcp := loadBalancerService(c.ns, "dns-tcp", udpPort)
	tcp.Annotations = ann
	udp := loadBalancerService(c.ns, "dns-udp")
	udp.Annotations = ann
	udp.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: udpPort, TargetPort: intstr.FromInt32(udpPort), Protocol: v1.ProtocolUDP}}

	tcpFE := c.frontend(t, c.createService(t, tcp, c.nodes...))
	udpSvc := c.createService(t, udp, c.nodes...)
	udpFE := c.frontend(t, udpSvc)
	if tcpFE.Addr() != udpFE.Addr() {
		t.Fatalf("dns-tcp got %s and dns-udp %s: want one shared address", tcpFE.Addr(), udpFE.Addr())
	}
	if got := c.tcpAnswers(t, client, tcpFE, 20); len(got) == 0 {
		t.Fatal("no TCP answer on the shared IP")
	}
	c.udpAnswers(t, udpFE, 20, nil)
	clients := armClients(t, c.env)
	lbOf := func() *armnetwork.LoadBalancer {
		lb, err := clients.LoadBalancer.Get(context.Background(), devenv.ResourceGroup, "kubernetes")
		if err != nil {
			t.Fatal(err)
		}
		return lb
	}
	if n := len(lbOf().Properties.FrontendIPConfigurations); n != 1 {
		t.Fatalf("%d frontends: want one, shared", n)
	}

	// dns-tcp's frontend carries dns-udp: dns-tcp goes, dns-udp stays
	// reachable on the same address.
	deleteService(t, c.ns, "dns-tcp")
	eventually(t, 60*time.Second, "dns-tcp's rule gone", func(context.Context) (bool, error) {
		return ruleCount(lbOf()) == 1, nil
	})
	if ip := ingressIP(t, c.ns, "dns-udp"); ip != udpFE.Addr().String() {
		t.Fatalf("dns-udp's address changed to %s", ip)
	}
	c.udpAnswers(t, udpFE, 20, nil)
}
