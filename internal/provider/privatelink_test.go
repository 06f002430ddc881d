package provider

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/privatelink"
)

// The wiring the Service reconcile will call: publish an internal
// Service's frontend after the load balancer write, release it before the
// frontend goes.
func TestPrivateLinkWiring(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pl := startPrivateLinks(t, h)

	svc := testService("web", "11111111-2222-3333-4444-555555555555", map[string]string{
		annotations.KeyInternal: "true", privatelink.KeyCreate: "true"}, 80)
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", svc, nodes); err != nil {
		t.Fatal(err)
	}
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	lb := h.lb(t, "kubernetes-internal")
	if err := h.p.ensurePrivateLink(ctx, pl, svc, spec, lb); err != nil {
		t.Fatal(err)
	}
	fe := serviceFrontend(lb, svc, v1.IPv4Protocol)
	got, err := pl.Manager().Store().ByFrontend(ctx, devenv.ResourceGroup, *fe.ID)
	if err != nil || got == nil {
		t.Fatalf("no Private Link Service on %s: %v", *fe.ID, err)
	}
	if err := h.p.releasePrivateLinks(ctx, pl, svc, []string{*fe.ID}); err != nil {
		t.Fatal(err)
	}
	if got, _ := pl.Manager().Store().ByFrontend(ctx, devenv.ResourceGroup, *fe.ID); got != nil {
		t.Fatalf("still there after release: %s", *got.Name)
	}
	// Deleting the Service now removes the frontend (no PLS in the way).
	if err := h.p.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc); err != nil {
		t.Fatal(err)
	}
}

// startPrivateLinks runs a Private Link Service writer on the harness's
// emulator until the test ends.
func startPrivateLinks(t *testing.T, h *harness) *PrivateLinks {
	t.Helper()
	pl, err := NewPrivateLinks(h.env.Config, h.clients, h.recorder)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pl.Run(ctx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return pl
}

// With azure-pls-proxy-protocol, Azure's probes carry the PROXY header,
// which kube-proxy's health check server refuses: a Local Service's TCP
// port is probed with Tcp on its node port instead of Http on the health
// check node port, and its UDP port is not probed; proxy protocol without
// azure-pls-create, or a Cluster Service, changes nothing.
func TestLocalProbeReplacedWithProxyProtocol(t *testing.T) {
	local := func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
	}
	pls := map[string]string{annotations.KeyInternal: "true", privatelink.KeyCreate: "true", privatelink.KeyProxyProtocol: " True "}
	tests := []struct {
		name     string
		ann      map[string]string
		mutate   func(*v1.Service)
		tcp, udp string
	}{
		{"Local with proxy protocol: Tcp on the node port", pls, local, "Tcp:30080:", "none"},
		{"Local, proxy protocol off", map[string]string{privatelink.KeyCreate: "true", privatelink.KeyProxyProtocol: "false"}, local,
			"Http:32000:/healthz", "Http:32000:/healthz"},
		{"Local, proxy protocol without a Private Link Service", map[string]string{privatelink.KeyProxyProtocol: "true"}, local,
			"Http:32000:/healthz", "Http:32000:/healthz"},
		{"Cluster with proxy protocol: unchanged", pls, nil, "Tcp:30080:", "none"},
		{"Local with proxy protocol and an explicit probe port: kept", map[string]string{privatelink.KeyCreate: "true", privatelink.KeyProxyProtocol: "true",
			annotations.PortKey(80, annotations.PortSuffixProbePort): "80"}, local, "Http:30080:/", "none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := udpService(tc.ann)
			if tc.mutate != nil {
				tc.mutate(svc)
			}
			st := stateFor(t, svc, false)
			tcpRule, udpRule := names.Rule(svc, v1.ProtocolTCP, 80, v1.IPv4Protocol), names.Rule(svc, v1.ProtocolUDP, 53, v1.IPv4Protocol)
			if got := probeString(ruleProbe(t, st, tcpRule)); got != tc.tcp {
				t.Errorf("TCP rule probe %s, want %s", got, tc.tcp)
			}
			if got := probeString(ruleProbe(t, st, udpRule)); got != tc.udp {
				t.Errorf("UDP rule probe %s, want %s", got, tc.udp)
			}
		})
	}
}
