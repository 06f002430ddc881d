package localservice

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSliceEventsQueueDesiredState(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.addService("default", "web")
	h.addService("default", "api")
	h.addService("default", "dual", func(s *v1.Service) { s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} })
	h.addService("default", "cluster-svc", func(s *v1.Service) { s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster })
	web, api, dual := "default/web", "default/api", "default/dual"

	// A Cluster Service is ignored; events are handled in order, so once the
	// later event is queued the earlier one was handled.
	h.setSlice("default", "cluster-svc", "cluster-svc-a", "n1")
	h.setSlice("default", "web", "web-a", "n1")
	h.setSlice("default", "web", "web-b", "n2")
	h.waitQueued(web, "n1", "n2")
	if op := h.queued("default/cluster-svc", "default.cluster-svc"); op != nil {
		t.Fatalf("Cluster Service queued: %v", op)
	}

	// Deleting a slice queues the remaining endpoints.
	if err := h.kube.DiscoveryV1().EndpointSlices("default").Delete(h.ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitQueued(web, "n2")

	// A slice relabelled from web to api: both Services are queued again.
	s, err := h.kube.DiscoveryV1().EndpointSlices("default").Get(h.ctx, "web-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels[discoveryv1.LabelServiceName] = "api"
	if _, err := h.kube.DiscoveryV1().EndpointSlices("default").Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitQueued(api, "n2")
	h.waitQueued(web) // no endpoints left
	if got := h.queueKeys(); strings.Join(got, " ") != "default/api@default.api default/web@default.web" {
		t.Fatalf("queue = %v (one entry per Service pool)", got)
	}

	// A dual-stack Service queues both of its pools.
	h.setSlice("default", "dual", "dual-a", "n3")
	h.eventually("dual queued", func() bool {
		return h.queued(dual, "default.dual") != nil && h.queued(dual, "default.dual.IPv6") != nil
	})
	if op := h.queued(dual, "default.dual.IPv6"); op.family != v1.IPv6Protocol {
		t.Fatalf("IPv6 entry = %+v", op)
	}
	if h.u.QueueLen() != 4 {
		t.Fatalf("QueueLen = %d, want 4", h.u.QueueLen())
	}
}
