package servicegateway

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/annotations"
)

// A provisioned Service that asks for a source restriction (which azlb
// cannot enforce with pod-based backends) fails closed: a Warning event,
// and its pods leave the gateway, while its load balancer, public IP and
// registration stay; a restart keeps them out; removing the restriction
// brings them back behind the same IP.
func TestSourceRestrictionWithdrawsThePods(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	ip := h.waitReady(svc)
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc))

	h.setSourceRanges(svc, []string{"203.0.113.0/24"})
	if err := h.ensure(svc); err == nil || !strings.Contains(err.Error(), ReasonUnsupportedAccessControl) {
		t.Fatalf("EnsureLoadBalancer with source ranges = %v, want %s", err, ReasonUnsupportedAccessControl)
	}
	evs := h.events.Find("default/web", ReasonUnsupportedAccessControl)
	if len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || !strings.Contains(evs[0].Message, "spec.loadBalancerSourceRanges") ||
		!strings.Contains(evs[0].Message, "withdrawn") {
		t.Fatalf("events %v", h.events.All())
	}
	h.waitAddresses()
	if h.arm.LB(uid(svc)) == nil || h.arm.PublicIP(uid(svc)+"-pip") == nil || !h.registered(svc) {
		t.Fatal("the load balancer, public IP or registration went: only the pods should")
	}
	// A readiness gate does not wait for a withheld Service's pods.
	pod := netip.MustParseAddr("10.2.0.10")
	if held, managed := h.engine.HoldsPodAddress(svc.UID, pod); held || managed {
		t.Errorf("withheld: HoldsPodAddress = held %v, managed %v; want neither (the gate must not wait for it)", held, managed)
	}

	h.restart()
	h.idle()
	if got := h.arm.Addresses(); len(got) != 0 {
		t.Fatalf("after a restart the gateway holds %v, want nothing for the restricted Service", got)
	}
	if held, managed := h.engine.HoldsPodAddress(svc.UID, pod); held || managed {
		t.Errorf("withheld after a restart: HoldsPodAddress = held %v, managed %v; want neither", held, managed)
	}

	h.setSourceRanges(svc, nil)
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc))
	if got := h.waitReady(svc); got != ip {
		t.Errorf("ingress IP %s after the restriction was removed, want %s", got, ip)
	}
	if held, managed := h.engine.HoldsPodAddress(svc.UID, pod); !held || !managed {
		t.Errorf("admitted again: HoldsPodAddress = held %v, managed %v; want both", held, managed)
	}
}

func (h *harness) setSourceRanges(svc *v1.Service, ranges []string) {
	h.t.Helper()
	cur := h.get(svc)
	cur.Spec.LoadBalancerSourceRanges = ranges
	if _, err := h.cs.CoreV1().Services(svc.Namespace).Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// Annotations pod-based load balancing does not implement are named in one
// UnsupportedAnnotation Warning per generation and set of keys; the
// Service is provisioned without them. Values that ask for what it always
// does are not reported.
func TestUnsupportedAnnotationsAreReported(t *testing.T) {
	h := newHarness(t)
	h.start()
	svc := h.service("default", "web", func(s *v1.Service) {
		s.Annotations = map[string]string{
			annotations.KeyDNSLabelName:                                "shop",
			annotations.KeyPIPName:                                     "my-ip",
			annotations.KeyDisableFloatingIP:                           "true",
			annotations.KeyDisableTCPReset:                             "false",
			annotations.KeyTCPIdleTimeout:                              "10",
			annotations.KeyDisableNSGRule:                              "true",
			"service.beta.kubernetes.io/other":                         "not an Azure load balancer key",
			"service.beta.kubernetes.io/port_80_health-probe_protocol": "http",
		}
	})
	for range 2 {
		if err := h.ensure(svc); err != nil {
			t.Fatal(err)
		}
	}
	evs := h.events.Find("default/web", ReasonUnsupportedAnnotation)
	if len(evs) != 1 || evs[0].Type != v1.EventTypeWarning {
		t.Fatalf("events %v, want one UnsupportedAnnotation warning", h.events.All())
	}
	for _, k := range []string{annotations.KeyDNSLabelName, annotations.KeyPIPName, "port_80_health-probe_protocol"} {
		if !strings.Contains(evs[0].Message, k) {
			t.Errorf("the warning %q does not name %s", evs[0].Message, k)
		}
	}
	for _, k := range []string{annotations.KeyDisableFloatingIP, annotations.KeyDisableTCPReset, annotations.KeyTCPIdleTimeout, annotations.KeyDisableNSGRule, "/other"} {
		if strings.Contains(evs[0].Message, k) {
			t.Errorf("the warning %q names %s, which pod-based load balancing honours", evs[0].Message, k)
		}
	}
	h.waitReady(svc)
}
