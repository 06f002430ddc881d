package nodeagent

import (
	"net/http"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// KEP-1669: a Local Service's node whose only endpoint is terminating but
// still serving keeps forwarding (kube-proxy does so when the node has no
// ready endpoint), while its health check fails (it counts ready endpoints
// only); a terminating endpoint that no longer serves gets nothing.
func TestProxyForwardsToServingTerminatingEndpoints(t *testing.T) {
	port, nodePort := ports(t)
	hc := int32(testutil.FreePort(t, testutil.Nth(testutil.LoopbackNet(t), 1)))
	local := func(s *v1.Service) {
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	}
	es := slice("api", "node-a", "node-b")
	es.Endpoints[0].Conditions.Ready = ptr.To(false)
	es.Endpoints[0].Conditions.Serving = ptr.To(true)
	es.Endpoints[0].Conditions.Terminating = ptr.To(true)
	r := newProxyRig(t, svc("api", port, nodePort, local), es)
	r.sync(true)
	if code, body := r.get(nodePort, netip.Addr{}); code != http.StatusOK || body != "node-a\n" {
		t.Fatalf("traffic to a node whose endpoint is terminating but serving: %d %q, want node-a", code, body)
	}
	if code, body := r.get(hc, netip.Addr{}); code != http.StatusServiceUnavailable {
		t.Fatalf("health check with only a terminating endpoint: %d %q, want 503", code, body)
	}

	port2, nodePort2 := ports(t)
	gone := slice("gone", "node-a")
	gone.Endpoints[0].Conditions.Ready = ptr.To(false)
	gone.Endpoints[0].Conditions.Serving = ptr.To(false)
	gone.Endpoints[0].Conditions.Terminating = ptr.To(true)
	r2 := newProxyRig(t, svc("gone", port2, nodePort2), gone)
	r2.sync(true)
	if code, body := r2.get(nodePort2, netip.Addr{}); code != 0 {
		t.Fatalf("traffic to a terminating endpoint that no longer serves: %d %q, want a reset", code, body)
	}
}
