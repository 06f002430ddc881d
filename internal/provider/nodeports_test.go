package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// spec.allocateLoadBalancerNodePorts: false leaves ports without node
// ports. With floating IP off the rule would send to port 0: the Service is
// refused with MissingNodePort and nothing is written. With floating IP on
// the rule works, but its default probe would be on port 0: it goes without
// one, and NoHealthProbe says so once per generation; a probe port
// annotation brings the probe back without a warning.
func TestServicesWithoutNodePorts(t *testing.T) {
	h := newHarness(t, nil)
	events := &testutil.EventLog{}
	h.p = newProvider(t, h.env.Config, h.clients, events)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	noNodePorts := func(name, uid string, ann map[string]string) *v1.Service {
		svc := testService(name, uid, ann, 80)
		svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		svc.Spec.Ports[0].NodePort = 0
		svc.Generation = 1
		return svc
	}

	off := noNodePorts("off", "13131313-0000-0000-0000-000000000051", map[string]string{annotations.KeyDisableFloatingIP: "true"})
	h.env.Emulator().ResetRequests()
	_, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", off, nodes)
	if err == nil || !strings.Contains(err.Error(), "spec.ports[0] (port 80)") || !strings.Contains(err.Error(), "allocateLoadBalancerNodePorts") {
		t.Fatalf("floating IP off without node ports: %v, want a refusal naming the port and the field", err)
	}
	if got := events.Find("default/off", EventReasonMissingNodePort); len(got) != 1 || got[0].Type != v1.EventTypeWarning {
		t.Errorf("events %v, want one Warning %s", events.All(), EventReasonMissingNodePort)
	}
	if w := h.writes(); w != 0 {
		t.Errorf("a refused Service made %d ARM writes", w)
	}

	on := noNodePorts("on", "13131313-0000-0000-0000-000000000052", nil)
	for range 2 { // a resync does not repeat the warning
		if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", on, nodes); err != nil {
			t.Fatal(err)
		}
	}
	if got := events.Find("default/on", EventReasonNoHealthProbe); len(got) != 1 || !strings.Contains(got[0].Message, "spec.ports[0] (port 80)") {
		t.Fatalf("events %v, want one %s naming the port", events.All(), EventReasonNoHealthProbe)
	}
	rule, probe := ruleAndProbe(t, h, on)
	if rule == nil || probe != nil || *rule.Properties.BackendPort != 80 {
		t.Fatalf("rule %+v probe %+v: want the rule to port 80 without a probe", rule, probe)
	}

	probed := noNodePorts("probed", "13131313-0000-0000-0000-000000000053", map[string]string{annotations.Prefix + "port_80_health-probe_port": "8080"})
	if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", probed, nodes); err != nil {
		t.Fatal(err)
	}
	if got := events.Find("default/probed", EventReasonNoHealthProbe); len(got) != 0 {
		t.Errorf("events %v: a probe port annotation needs no warning", got)
	}
	if _, probe := ruleAndProbe(t, h, probed); probe == nil || *probe.Properties.Port != 8080 {
		t.Errorf("probe %+v, want port 8080", probe)
	}
}

// ruleAndProbe returns the IPv4 TCP rule of port 80 of svc on the load
// balancer kubernetes, and its probe (nil: none).
func ruleAndProbe(t *testing.T, h *harness, svc *v1.Service) (*armnetwork.LoadBalancingRule, *armnetwork.Probe) {
	t.Helper()
	lb, err := h.clients.LoadBalancer.Get(context.Background(), h.env.Config.ResourceGroup, "kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	name := names.Rule(svc, v1.ProtocolTCP, 80, v1.IPv4Protocol)
	for _, r := range lb.Properties.LoadBalancingRules {
		if !strings.EqualFold(*r.Name, name) {
			continue
		}
		if r.Properties.Probe == nil {
			return r, nil
		}
		for _, pr := range lb.Properties.Probes {
			if strings.EqualFold(*pr.ID, *r.Properties.Probe.ID) {
				return r, pr
			}
		}
		t.Fatalf("rule %s names probe %s, which the load balancer does not have", name, *r.Properties.Probe.ID)
	}
	return nil, nil
}

// A ClientIP timeout other than Kubernetes' default is not applied (Azure
// has none): one Warning per generation; the default says nothing.
func TestSessionAffinityTimeoutIsAWarning(t *testing.T) {
	h := newHarness(t, nil)
	events := &testutil.EventLog{}
	h.p = newProvider(t, h.env.Config, h.clients, events)
	ctx := context.Background()
	nodes := []*v1.Node{testNode("n1", "10.240.0.4")}
	affine := func(name, uid string, timeout int32) *v1.Service {
		svc := testService(name, uid, nil, 80)
		svc.Generation = 1
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
		return svc
	}
	short := affine("short", "13131313-0000-0000-0000-000000000061", 600)
	def := affine("default", "13131313-0000-0000-0000-000000000062", 10800)
	for range 2 {
		for _, s := range []*v1.Service{short, def} {
			if _, err := h.p.EnsureLoadBalancer(ctx, "kubernetes", s, nodes); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := events.Find("default/short", EventReasonUnsupportedAffinityTimeout)
	if len(got) != 1 || got[0].Type != v1.EventTypeWarning || !strings.Contains(got[0].Message, "timeoutSeconds 600") {
		t.Errorf("events %v, want one Warning naming the timeout", events.All())
	}
	if got := events.Find("default/default", EventReasonUnsupportedAffinityTimeout); len(got) != 0 {
		t.Errorf("the default timeout was reported: %v", got)
	}
}
