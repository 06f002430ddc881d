package servicegateway

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// The Service's pool carries loadBalancerBackendPoolDrainPeriodInSeconds,
// so a pod address that leaves the gateway keeps its established flows for
// it; a restart with the same setting writes nothing, and a changed
// setting rewrites the load balancer.
func TestServicePoolCarriesTheDrainPeriod(t *testing.T) {
	h := newHarness(t)
	h.cfg.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(30)
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.waitReady(svc)
	pool := h.arm.LB(uid(svc)).Properties.BackendAddressPools[0]
	if got := ptr.Deref(pool.Properties.DrainPeriodInSeconds, 0); got != 30 {
		t.Fatalf("pool drainPeriodInSeconds %d, want 30", got)
	}

	h.restart()
	h.arm.ResetCalls()
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if w := writes(h.arm.Calls()); len(w) != 0 {
		t.Fatalf("a restart with the same drain period wrote %v", ops(w))
	}

	h.cfg.LoadBalancerBackendPoolDrainPeriodInSeconds = ptr.To(0)
	h.restart()
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.idle()
	if d := h.arm.LB(uid(svc)).Properties.BackendAddressPools[0].Properties.DrainPeriodInSeconds; ptr.Deref(d, 0) != 0 {
		t.Errorf("drain period %d after setting 0, want none", *d)
	}
}
