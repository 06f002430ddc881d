package verify

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// The AKS layout of docs/install.md: azlb serves the class
// example.com/azlb under clusterName azlb (load balancer azlb, pool azlb,
// public IP azlb-<frontend>), and AKS's own controller serves the
// class-less Service default/aks (20.0.0.2, node port 31080) on its load
// balancer kubernetes, writing the same rules into the same NSG.

const (
	testClass = "example.com/azlb"
	aksUID    = "99999999-8888-7777-6666-555555555555"
	aksBase   = "a9999999988887777666655555555555"
)

// renamed is a deep copy of v (an ARM object) with its JSON rewritten by r.
func renamed[T any](t *testing.T, v *T, r *strings.Replacer) *T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := new(T)
	if err := json.Unmarshal([]byte(r.Replace(string(b))), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func aksService() *v1.Service {
	svc := testutil.Service("default", "aks")
	svc.UID = aksUID
	svc.Spec.Ports[0].NodePort = 31080
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "20.0.0.2"}}
	return svc
}

func classFixture(t *testing.T) *Snapshot {
	s := fixture()
	s.Class, s.Config.ClusterName = testClass, "azlb"
	s.Services[0].Spec.LoadBalancerClass = ptr.To(testClass)
	ours := strings.NewReplacer("kubernetes", "azlb")
	s.LoadBalancers[0] = renamed(t, s.LoadBalancers[0], ours)
	s.PublicIPs[0] = renamed(t, s.PublicIPs[0], ours)
	theirs := strings.NewReplacer(webBase, aksBase, "default/web", "default/aks", "20.0.0.1", "20.0.0.2", "30080", "31080")
	s.Services = append(s.Services, aksService())
	s.LoadBalancers = append(s.LoadBalancers, renamed(t, webLB(), theirs))
	s.PublicIPs = append(s.PublicIPs, renamed(t, webPIP(), theirs))
	return s
}

func skips(r *Report) []string {
	var out []string
	for _, f := range r.Skipped {
		out = append(out, f.String())
	}
	return out
}

// With a class, verify judges the Services of the class on azlb's own load
// balancers, and leaves AKS's Services and what AKS made for them alone.
func TestLoadBalancerClass(t *testing.T) {
	const lb = " [docs/load-balancers.md#how-a-reconcile-works]"
	tests := []struct {
		name          string
		change        func(*Snapshot)
		want, skipped []string
	}{
		{"AKS's Service, load balancer and public IP are left alone", func(*Snapshot) {}, nil, nil},
		{"a Service of the class without its frontend", func(s *Snapshot) {
			s.LoadBalancers, s.PublicIPs = s.LoadBalancers[1:], s.PublicIPs[1:]
		}, l(
			"service default/web: has no frontend on any managed load balancer (want "+webBase+") [docs/load-balancers.md#what-azlb-creates]",
			"service default/web: status.loadBalancer.ingress lists [20.0.0.1] but no frontend has those addresses"+lb), nil},
		{"a deleted Service of the class leaves its frontend behind", func(s *Snapshot) { s.Services = s.Services[1:] }, l(
			"load balancer azlb: frontend "+webBase+" belongs to no LoadBalancer Service (a deleted Service's?): it should have been removed"+lb,
			"load balancer azlb: probe "+webBase+"-TCP-80 belongs to no LoadBalancer Service: it should have been removed"+lb,
			"load balancer azlb: rule "+webBase+"-TCP-80 belongs to no LoadBalancer Service: it should have been removed"+lb,
			"public IP azlb-"+webBase+": azlb owns it (k8s-azure-service=default/web) but no frontend of that Service uses it: it should have been deleted [docs/load-balancers.md#public-ips-owned-and-user-owned]"),
			nil},
		{"AKS's Service stays Terminating: its finalizer is AKS's", func(s *Snapshot) {
			s.Services[1].DeletionTimestamp = ptr.To(metav1.NewTime(time.Now()))
			s.Services[1].Finalizers = []string{"service.kubernetes.io/load-balancer-cleanup"}
		}, nil, nil},
		{"a class-less Service's frontend left on azlb's load balancer is skipped", func(s *Snapshot) {
			p := lbOf(s).FrontendIPConfigurations[0].Properties
			lbOf(s).FrontendIPConfigurations = append(lbOf(s).FrontendIPConfigurations,
				&armnetwork.FrontendIPConfiguration{Name: ptr.To(aksBase), Properties: p})
		}, nil, l("service default/aks: a LoadBalancer Service of another implementation (no loadBalancerClass), yet load balancer azlb of azlb's holds its frontends: left alone")},
		{"without the flag, AKS's Service is taken for azlb's", func(s *Snapshot) { s.Class = "" }, l(
			"service default/aks: has no frontend on any managed load balancer (want "+aksBase+") [docs/load-balancers.md#what-azlb-creates]",
			"service default/aks: status.loadBalancer.ingress lists [20.0.0.2] but no frontend has those addresses"+lb),
			l("service default/web: a LoadBalancer Service of another implementation (loadBalancerClass " + testClass + "), yet load balancer azlb of azlb's holds its frontends: left alone")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := classFixture(t)
			tc.change(s)
			r := Check(s)
			if got := strings.Split(strings.TrimSpace(findings(r)), "\n"); len(tc.want) > 0 && !slices.Equal(got, tc.want) || len(tc.want) == 0 && !r.Clean() {
				t.Errorf("findings:\n%s\nwant:\n%s", findings(r), strings.Join(tc.want, "\n"))
			}
			if got := skips(r); !slices.Equal(got, tc.skipped) {
				t.Errorf("skipped:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.skipped, "\n"))
			}
			if len(r.Warnings) != 0 {
				t.Errorf("warnings %v", r.Warnings)
			}
		})
	}
}

// Without a class, a Service of another class is not azlb's: no load
// balancer is expected for it.
func TestAnotherClassIsNotExpected(t *testing.T) {
	s := fixture()
	other := aksService()
	other.Spec.LoadBalancerClass = ptr.To("other.example/lb")
	s.Services = append(s.Services, other)
	if r := Check(s); !r.Clean() || len(r.Skipped) != 0 {
		t.Fatalf("%s %v", findings(r), r.Skipped)
	}
}

// A class under the load balancer name AKS's controller uses is warned
// about, as the controller does; the report stays clean for it.
func TestClassUnderTheDefaultNameWarns(t *testing.T) {
	s := fixture()
	s.Class = testClass
	s.Services[0].Spec.LoadBalancerClass = ptr.To(testClass)
	r := Check(s)
	if !r.Clean() || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], `load balancer name "kubernetes" with --load-balancer-class=example.com/azlb`) {
		t.Fatalf("findings:\n%s\nwarnings %v", findings(r), r.Warnings)
	}
	s.Config.LoadBalancerName = "azlb-lb"
	if r := Check(s); len(r.Warnings) != 0 {
		t.Fatalf("loadBalancerName set: warnings %v", r.Warnings)
	}
}

// classNSG is the class fixture with the NSG azlb and AKS share: one
// Internet rule on port 80 for web (20.0.0.1) and aks (20.0.0.2).
func classNSG(t *testing.T) *Snapshot {
	s := classFixture(t)
	s.Config.SecurityGroupName = "nsg"
	s.SecurityGroup = &armnetwork.SecurityGroup{Name: ptr.To("nsg"), Properties: &armnetwork.SecurityGroupPropertiesFormat{}}
	setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "20.0.0.2"), l("80")))
	return s
}

// With a class the NSG's collection removes no address (security-groups.md):
// an address that is no frontend of azlb's nor a node may be one of AKS's
// Services', and the rules that hold only such addresses are AKS's
// business. azlb's own Services' rules, and node ports no Service of any
// class has, are judged as without a class.
func TestNSGWithLoadBalancerClass(t *testing.T) {
	tcpRanges80 := allowName("IPv4", "Tcp_10.0.0.0/24_80")
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   []string
	}{
		{"a rule shared with AKS's Service", func(*Snapshot) {}, nil},
		{"an address of nobody may be AKS's: never collected", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "20.0.0.2", "20.0.0.9"), l("80")))
		}, nil},
		{"AKS's deny-all before a shared allow and its own, and a rule not of azlb's layout", func(s *Snapshot) {
			setRules(s, allow(webInternet, 600, l("Internet"), l("20.0.0.1", "20.0.0.2"), l("80")),
				denyAll("IPv4", 501, "20.0.0.2", "20.0.0.9"),
				allow(tcpRanges80, 502, l("10.0.0.0/24"), l("20.0.0.2"), l("80")),
				allow(allowName("IPv4", "theirs"), 503, l("Internet"), l("20.0.0.2"), l("443")))
		}, nil},
		{"AKS's Service with floating IP off: its node port on the nodes", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")),
				allow(allowName("IPv4", "Tcp_Internet_31080"), 501, l("Internet"), l("10.0.0.1", "10.0.0.2"), l("31080")))
		}, nil},
		{"a node port of no Service of any class", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")),
				allow(allowName("IPv4", "Tcp_Internet_32999"), 501, l("Internet"), l("10.0.0.1"), l("32999")))
		}, l(nsgObj + "rule " + allowName("IPv4", "Tcp_Internet_32999") + " grants node address 10.0.0.1 port 32999, which is the node port of no LoadBalancer Service with floating IP off: it should have left the rule" + layout)},
		{"the class's Service is still judged: its allow is missing", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.2"), l("80")))
		}, l(svcWeb + "no azlb allow rule lets Internet reach 20.0.0.1 on Tcp port 80 (want it in rule " + webInternet + ")" + who)},
		{"the class's Service is still judged: a deny-all nothing calls for", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "20.0.0.2"), l("80")), denyAll("IPv4", 4095, "20.0.0.1", "20.0.0.2"))
		}, l(svcWeb + "rule k8s-azure-lb_deny-all_IPv4 holds its address 20.0.0.1, but nothing in its spec calls for one" + who)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := classNSG(t)
			tc.change(s)
			var got []string
			for _, f := range Check(s).Findings {
				got = append(got, f.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// Without a class the collection removes every address no frontend of
// azlb's holds, another class's Services' included, but no node port any
// Service has.
func TestNSGWithoutClassOtherClasses(t *testing.T) {
	s := nsgFixture()
	other := aksService()
	other.Spec.LoadBalancerClass = ptr.To("other.example/lb")
	s.Services = append(s.Services, other)
	setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")),
		allow(allowName("IPv4", "Tcp_Internet_31080"), 501, l("Internet"), l("10.0.0.1", "10.0.0.2"), l("31080")))
	if r := Check(s); !r.Clean() {
		t.Errorf("another class's node port: %s", findings(r))
	}
	setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "20.0.0.2"), l("80")))
	want := nsgObj + "rule " + webInternet + " holds destination 20.0.0.2, which is the address of no LoadBalancer Service's frontend nor of a node: it should have left the rule" + layout
	if r := Check(s); len(r.Findings) != 1 || r.Findings[0].String() != want {
		t.Errorf("another class's address:\n%s\nwant:\n%s", findings(r), want)
	}
}
