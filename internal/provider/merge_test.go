package provider

import (
	"encoding/json"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
)

var testLB = names.LoadBalancerRef{Subscription: "sub", ResourceGroup: "rg", Name: "kubernetes"}

func testService(name, uid string, ann map[string]string, ports ...int32) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), Annotations: ann},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Port: p, Protocol: v1.ProtocolTCP, NodePort: 30000 + p})
	}
	return svc
}

func stateFor(t *testing.T, svc *v1.Service, shared bool) *serviceLBState {
	t.Helper()
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	st, err := buildServiceLBState(desiredInput{
		svc: svc, spec: spec, lb: testLB,
		frontend:    frontendInput{family: v1.IPv4Protocol, publicIPID: "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/pip-" + svc.Name},
		poolName:    "kubernetes",
		sharedProbe: shared, sharedProbePort: 10256, sharedProbePath: "/healthz",
	})
	if err != nil {
		t.Fatalf("buildServiceLBState: %v", err)
	}
	return st
}

func TestApplyServiceIsIdempotent(t *testing.T) {
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80, 443)
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes")}
	if !applyService(lb, names.FrontendBase(svc), []*serviceLBState{stateFor(t, svc, false)}, []string{"kubernetes"}, nil, nil) {
		t.Fatal("first apply reported no change")
	}
	p := lb.Properties
	if len(p.FrontendIPConfigurations) != 1 || len(p.LoadBalancingRules) != 2 || len(p.Probes) != 2 || len(p.BackendAddressPools) != 1 {
		t.Fatalf("got %d frontends, %d rules, %d probes, %d pools; want 1, 2, 2, 1",
			len(p.FrontendIPConfigurations), len(p.LoadBalancingRules), len(p.Probes), len(p.BackendAddressPools))
	}
	// A fresh copy, as read back from ARM, must need no write.
	again := jsonRoundTrip(t, lb)
	if applyService(again, names.FrontendBase(svc), []*serviceLBState{stateFor(t, svc, false)}, []string{"kubernetes"}, nil, nil) {
		t.Fatal("second apply of the same desired state reported a change (would cost an ARM write)")
	}
}

func TestApplyServiceKeepsOtherServices(t *testing.T) {
	a := testService("a", "aaaaaaaa-0000-0000-0000-000000000000", nil, 80)
	b := testService("b", "bbbbbbbb-0000-0000-0000-000000000000", nil, 80, 8080)
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes")}
	applyService(lb, names.FrontendBase(a), []*serviceLBState{stateFor(t, a, false)}, []string{"kubernetes"}, nil, nil)
	applyService(lb, names.FrontendBase(b), []*serviceLBState{stateFor(t, b, false)}, []string{"kubernetes"}, nil, nil)
	if got := len(lb.Properties.LoadBalancingRules); got != 3 {
		t.Fatalf("rules = %d, want 3", got)
	}
	// b drops port 8080: only b's rule and probe for 8080 go.
	b.Spec.Ports = b.Spec.Ports[:1]
	if !applyService(lb, names.FrontendBase(b), []*serviceLBState{stateFor(t, b, false)}, nil, nil, nil) {
		t.Fatal("removing a port reported no change")
	}
	if got := len(lb.Properties.LoadBalancingRules); got != 2 {
		t.Fatalf("rules = %d after removing a port, want 2", got)
	}
	if !removeService(lb, names.FrontendBase(a), nil) {
		t.Fatal("removeService reported no change")
	}
	for _, r := range lb.Properties.LoadBalancingRules {
		if names.Owns(names.FrontendBase(a), *r.Name) {
			t.Fatalf("rule %s of the removed Service is still there", *r.Name)
		}
	}
	if len(lb.Properties.FrontendIPConfigurations) != 1 || len(lb.Properties.Probes) != 1 {
		t.Fatalf("after removal: %d frontends, %d probes; want 1, 1", len(lb.Properties.FrontendIPConfigurations), len(lb.Properties.Probes))
	}
}

func TestSharedProbeIsPrunedWithLastUser(t *testing.T) {
	a := testService("a", "aaaaaaaa-0000-0000-0000-000000000000", nil, 80)
	b := testService("b", "bbbbbbbb-0000-0000-0000-000000000000", nil, 80)
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes")}
	applyService(lb, names.FrontendBase(a), []*serviceLBState{stateFor(t, a, true)}, nil, nil, nil)
	applyService(lb, names.FrontendBase(b), []*serviceLBState{stateFor(t, b, true)}, nil, nil, nil)
	if len(lb.Properties.Probes) != 1 || *lb.Properties.Probes[0].Name != names.SharedProbe {
		t.Fatalf("want exactly the shared probe, got %d probes", len(lb.Properties.Probes))
	}
	removeService(lb, names.FrontendBase(a), nil)
	if len(lb.Properties.Probes) != 1 {
		t.Fatal("shared probe removed while b still uses it")
	}
	removeService(lb, names.FrontendBase(b), nil)
	if len(lb.Properties.Probes) != 0 {
		t.Fatal("shared probe kept after its last user left")
	}
}

func TestBuildServiceLBStateRules(t *testing.T) {
	tests := []struct {
		name      string
		ann       map[string]string
		local     bool
		wantRules int
		wantProbe []string // probe protocol per rule, "" = none
		check     func(t *testing.T, st *serviceLBState)
	}{
		{name: "defaults: floating IP, TCP probe on node port", wantRules: 1, wantProbe: []string{"Tcp"},
			check: func(t *testing.T, st *serviceLBState) {
				r := st.rules[0].Properties
				if !*r.EnableFloatingIP || *r.BackendPort != 80 || !*r.EnableTCPReset {
					t.Errorf("floating IP %v backend port %d tcp reset %v; want true, 80, true", *r.EnableFloatingIP, *r.BackendPort, *r.EnableTCPReset)
				}
				if *st.probes[0].Properties.Port != 30080 {
					t.Errorf("probe port %d, want node port 30080", *st.probes[0].Properties.Port)
				}
			}},
		{name: "floating IP off sends traffic to the node port",
			ann: map[string]string{annotations.KeyDisableFloatingIP: "true"}, wantRules: 1, wantProbe: []string{"Tcp"},
			check: func(t *testing.T, st *serviceLBState) {
				if got := *st.rules[0].Properties.BackendPort; got != 30080 {
					t.Errorf("backend port %d, want 30080", got)
				}
			}},
		{name: "no_lb_rule drops the rule", ann: map[string]string{annotations.PortKey(80, annotations.PortSuffixNoLBRule): "true"}, wantRules: 0},
		{name: "no_probe_rule keeps the rule without probe", ann: map[string]string{annotations.PortKey(80, annotations.PortSuffixNoProbeRule): "true"}, wantRules: 1, wantProbe: []string{""}},
		{name: "http probe with path", ann: map[string]string{annotations.KeyProbeProtocol: "http", annotations.KeyProbeRequestPath: "/ready"}, wantRules: 1, wantProbe: []string{"Http"},
			check: func(t *testing.T, st *serviceLBState) {
				if got := *st.probes[0].Properties.RequestPath; got != "/ready" {
					t.Errorf("request path %q", got)
				}
			}},
		{name: "idle timeout", ann: map[string]string{annotations.KeyTCPIdleTimeout: "30"}, wantRules: 1, wantProbe: []string{"Tcp"},
			check: func(t *testing.T, st *serviceLBState) {
				if got := *st.rules[0].Properties.IdleTimeoutInMinutes; got != 30 {
					t.Errorf("idle timeout %d", got)
				}
			}},
		{name: "local service probes healthCheckNodePort over HTTP", local: true, wantRules: 1, wantProbe: []string{"Http"},
			check: func(t *testing.T, st *serviceLBState) {
				if got := *st.probes[0].Properties.Port; got != 32000 {
					t.Errorf("probe port %d, want healthCheckNodePort 32000", got)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := testService("web", "11111111-2222-3333-4444-555555555555", tc.ann, 80)
			if tc.local {
				svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				svc.Spec.HealthCheckNodePort = 32000
			}
			st := stateFor(t, svc, false)
			if len(st.rules) != tc.wantRules {
				t.Fatalf("rules = %d, want %d", len(st.rules), tc.wantRules)
			}
			for i, want := range tc.wantProbe {
				r := st.rules[i].Properties
				if want == "" {
					if r.Probe != nil {
						t.Errorf("rule %d has probe %s, want none", i, *r.Probe.ID)
					}
					continue
				}
				if r.Probe == nil {
					t.Fatalf("rule %d has no probe", i)
				}
				if got := string(*st.probes[0].Properties.Protocol); got != want {
					t.Errorf("probe protocol %s, want %s", got, want)
				}
			}
			if tc.check != nil {
				tc.check(t, st)
			}
		})
	}
}

func TestBuildServiceLBStateRejectsSCTP(t *testing.T) {
	svc := testService("web", "11111111-2222-3333-4444-555555555555", nil, 80)
	svc.Spec.Ports[0].Protocol = v1.ProtocolSCTP
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = buildServiceLBState(desiredInput{svc: svc, spec: spec, lb: testLB, frontend: frontendInput{family: v1.IPv4Protocol, publicIPID: "x"}, poolName: "kubernetes"})
	if err == nil {
		t.Fatal("SCTP accepted")
	}
}

// jsonRoundTrip returns the load balancer as ARM would send it back.
func jsonRoundTrip(t *testing.T, lb *armnetwork.LoadBalancer) *armnetwork.LoadBalancer {
	t.Helper()
	b, err := json.Marshal(lb)
	if err != nil {
		t.Fatal(err)
	}
	var out armnetwork.LoadBalancer
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestMutationsOfAStoreCopyLeaveTheOriginalUntouched(t *testing.T) {
	a := testService("a", "aaaaaaaa-0000-0000-0000-000000000000", nil, 80)
	b := testService("b", "bbbbbbbb-0000-0000-0000-000000000000", nil, 80)
	orig := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes")}
	applyService(orig, names.FrontendBase(a), []*serviceLBState{stateFor(t, a, true)}, []string{"kubernetes"}, nil, nil)
	before, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	c := lbstore.MutableCopy(orig)
	applyService(c, names.FrontendBase(b), []*serviceLBState{stateFor(t, b, true)}, []string{"kubernetes", "kubernetes-IPv6"}, nil, nil)
	a.Spec.Ports[0].Port = 8080 // a's rule replaced in the clone
	applyService(c, names.FrontendBase(a), []*serviceLBState{stateFor(t, a, false)}, nil, []string{"kubernetes-IPv6"}, nil)
	removeService(c, names.FrontendBase(b), nil)
	after, err := json.Marshal(orig)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatalf("mutating the clone changed the original:\nbefore %s\nafter  %s", before, after)
	}
}

func TestDropKeepsPoolsOtherRulesUse(t *testing.T) {
	// a-b/c and a/b-c both used the legacy pool "a-b-c" (the name collision
	// of earlier releases). Removing one must leave the pool to the other:
	// deleting a referenced pool fails with InvalidResourceReference.
	one := testService("c", "11111111-0000-0000-0000-000000000000", nil, 80)
	two := testService("b-c", "22222222-0000-0000-0000-000000000000", nil, 80)
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes")}
	for _, svc := range []*v1.Service{one, two} {
		st, err := buildServiceLBState(desiredInput{svc: svc, spec: mustParse(t, svc), lb: testLB,
			frontend: frontendInput{family: v1.IPv4Protocol, publicIPID: "pip-" + svc.Name}, poolName: "a-b-c"})
		if err != nil {
			t.Fatal(err)
		}
		applyService(lb, names.FrontendBase(svc), []*serviceLBState{st}, []string{"a-b-c"}, nil, nil)
	}
	if !removeService(lb, names.FrontendBase(one), []string{"a-b-c"}) {
		t.Fatal("removeService reported no change")
	}
	if findPool(lb, "a-b-c") == nil {
		t.Fatal("the pool another Service's rules use was dropped")
	}
	removeService(lb, names.FrontendBase(two), []string{"a-b-c"})
	if findPool(lb, "a-b-c") != nil {
		t.Fatal("the pool no rule uses any more was kept")
	}
}

func TestAdoptedPoolStartsWithTheLegacyEntries(t *testing.T) {
	svc := testService("web", "33333333-0000-0000-0000-000000000000", nil, 80)
	svc.Namespace = "shop"
	lb := &armnetwork.LoadBalancer{Name: to.Ptr("kubernetes"), Properties: &armnetwork.LoadBalancerPropertiesFormat{
		BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("shop-web"), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{Name: to.Ptr("n1"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress: to.Ptr("10.0.0.1"), AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)}}},
		}}},
	}}
	newName := names.LocalServicePool("shop", "web", v1.IPv4Protocol)
	st, err := buildServiceLBState(desiredInput{svc: svc, spec: mustParse(t, svc), lb: testLB,
		frontend: frontendInput{family: v1.IPv4Protocol, publicIPID: "pip"}, poolName: newName})
	if err != nil {
		t.Fatal(err)
	}
	if !applyService(lb, names.FrontendBase(svc), []*serviceLBState{st}, []string{newName}, localPoolNames(svc), legacyLocalPools(svc, []v1.IPFamily{v1.IPv4Protocol})) {
		t.Fatal("no change reported")
	}
	pool := findPool(lb, newName)
	if pool == nil || pool.Properties == nil || len(pool.Properties.LoadBalancerBackendAddresses) != 1 ||
		*pool.Properties.LoadBalancerBackendAddresses[0].Properties.AdminState != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Fatalf("adopted pool %+v, want n1 (Down) copied over", pool)
	}
	if findPool(lb, "shop-web") != nil {
		t.Fatal("the legacy pool no rule uses any more was kept")
	}
}

func TestInternalFrontendKeepsItsAddressWhenNoneIsAsked(t *testing.T) {
	subnet := "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
	have := buildFrontend("fe", frontendInput{family: v1.IPv4Protocol, subnetID: subnet, privateIP: "10.240.0.5"})
	dynamic := buildFrontend("fe", frontendInput{family: v1.IPv4Protocol, subnetID: subnet})
	if !frontendEqual(have, dynamic) {
		t.Error("a static address carried over must satisfy a Service that asks for none")
	}
	if frontendEqual(dynamic, have) {
		t.Error("a dynamic frontend does not satisfy a Service that asks for 10.240.0.5")
	}
	other := buildFrontend("fe", frontendInput{family: v1.IPv4Protocol, subnetID: subnet + "2"})
	if frontendEqual(have, other) {
		t.Error("another subnet is a change")
	}
}

func mustParse(t *testing.T, svc *v1.Service) *annotations.ServiceSpec {
	t.Helper()
	spec, err := annotations.Parse(svc)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}
