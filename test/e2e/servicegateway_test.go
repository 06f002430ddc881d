package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/sandbox"
)

// podIPConfig is azure.json for pod-based load balancing.
func podIPConfig(t *testing.T) string {
	t.Helper()
	if err := suite.env.SeedServiceGateway(context.Background()); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, map[string]any{
		"serviceGatewayEnabled":                    true,
		"loadBalancerBackendPoolConfigurationType": "podIP",
		"loadBalancerSku":                          "service",
	})
}

// podSlice creates a Service's slice with ready endpoints (node ->
// pod IPs), as the EndpointSlice controller would.
func podSlice(t *testing.T, svc *v1.Service, eps map[string][]string) {
	t.Helper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-e2e",
			Labels:          map[string]string{discoveryv1.LabelServiceName: svc.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, node := range slices.Sorted(func(yield func(string) bool) {
		for n := range eps {
			if !yield(n) {
				return
			}
		}
	}) {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: eps[node], NodeName: ptr.To(node), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	ctx := context.Background()
	cur, err := suite.cs.DiscoveryV1().EndpointSlices(svc.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err == nil {
		s.ResourceVersion = cur.ResourceVersion
		_, err = suite.cs.DiscoveryV1().EndpointSlices(svc.Namespace).Update(ctx, s, metav1.UpdateOptions{})
	} else {
		_, err = suite.cs.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx, s, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// gatewayAddresses lists the gateway's addresses as "location address
// services" lines.
func gatewayAddresses(t *testing.T) []string {
	t.Helper()
	locs, err := arm(t).ServiceGateway.GetAddressLocations(context.Background(), devenv.ResourceGroup, names.ServiceGateway)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range locs {
		for _, a := range l.Addresses {
			var s []string
			for _, x := range a.Services {
				s = append(s, *x)
			}
			out = append(out, *l.AddressLocation+" "+*a.Address+" "+strings.Join(s, ","))
		}
	}
	slices.Sort(out)
	return out
}

func writesSince(since time.Time) []string {
	var out []string
	for _, r := range suite.env.Emulator().Requests() {
		if r.Kind == "arm" && r.Method != http.MethodGet && !r.Time.Before(since) {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

// Pod-based load balancing with the real controller binary and API server:
// a Service gets its own load balancer, public IP and gateway registration,
// its pods are registered under their nodes, a refused Service gets a
// Warning event, a restart writes nothing, and a deletion removes it all.
func TestPodBasedLoadBalancing(t *testing.T) {
	ctx := context.Background()
	cfg := podIPConfig(t)
	createNode(t, "clb-n1", "10.240.3.1", nil)
	createNode(t, "clb-n2", "10.240.3.2", nil)
	first := startController(t, "first", cfg, false)
	ns := createNamespace(t)

	svc, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := names.ServiceUID(svc.UID)
	podSlice(t, svc, map[string][]string{"clb-n1": {"10.244.3.10"}, "clb-n2": {"10.244.3.20"}})
	ip := ingressIP(t, ns, "web")
	lb := getLB(t, uid)
	if lb == nil || string(*lb.SKU.Name) != "Service" || len(lb.Properties.LoadBalancingRules) != 1 {
		t.Fatalf("load balancer %s: %+v", uid, lb)
	}
	pip, err := arm(t).PublicIP.Get(ctx, devenv.ResourceGroup, uid+"-pip")
	if err != nil || *pip.Properties.IPAddress != ip || string(*pip.SKU.Name) != "StandardV2" {
		t.Fatalf("public IP %+v %v, ingress %s", pip, err, ip)
	}
	want := []string{"10.240.3.1 10.244.3.10 " + uid, "10.240.3.2 10.244.3.20 " + uid}
	eventually(t, 30*time.Second, "pods registered", func(context.Context) (bool, error) {
		return slices.Equal(gatewayAddresses(t), want), nil
	})
	cur, _ := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if !slices.Contains(cur.Finalizers, "servicegateway.azure.com/service-cleanup") {
		t.Errorf("finalizers %v", cur.Finalizers)
	}

	t.Run("refused Service", func(t *testing.T) {
		bad := loadBalancerService(ns, "sticky", 81)
		bad.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, bad, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "UnsupportedSessionAffinity event", func(ctx context.Context) (bool, error) {
			evs, err := suite.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == "sticky" && e.Reason == "UnsupportedSessionAffinity" && e.Type == v1.EventTypeWarning {
					return true, nil
				}
			}
			return false, nil
		})
		deleteService(t, ns, "sticky")
	})

	outer := t
	t.Run("restart writes nothing", func(t *testing.T) {
		first.stop()
		since := time.Now()
		second := startController(outer, "second", cfg, false) // runs on for the deletion
		eventually(t, 60*time.Second, "the second controller started", func(context.Context) (bool, error) {
			return strings.Contains(second.logText(t), "Starting pod-based load balancing"), nil
		})
		// A change after the restart is the only write.
		podSlice(t, svc, map[string][]string{"clb-n1": {"10.244.3.10", "10.244.3.11"}, "clb-n2": {"10.244.3.20"}})
		want = []string{"10.240.3.1 10.244.3.10 " + uid, "10.240.3.1 10.244.3.11 " + uid, "10.240.3.2 10.244.3.20 " + uid}
		eventually(t, 30*time.Second, "new pod registered", func(context.Context) (bool, error) {
			return slices.Equal(gatewayAddresses(t), want), nil
		})
		if w := writesSince(since); len(w) != 1 || !strings.HasSuffix(w[0], "/updateAddressLocations") {
			t.Errorf("writes after the restart: %v, want the one address update", w)
		}
	})

	t.Run("delete", func(t *testing.T) {
		deleteService(t, ns, "web")
		eventually(t, 60*time.Second, "Service and its Azure resources gone", func(ctx context.Context) (bool, error) {
			if _, err := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
				return false, nil
			}
			if getLB(t, uid) != nil {
				return false, nil
			}
			return len(gatewayAddresses(t)) == 0, nil
		})
		svcs, err := arm(t).ServiceGateway.GetServices(ctx, devenv.ResourceGroup, names.ServiceGateway)
		if err != nil || len(svcs) != 1 || *svcs[0].Name != names.DefaultOutboundService {
			t.Errorf("gateway services after the deletion: %v %v (default-natgw must stay)", svcs, err)
		}
	})
}

// make sandbox SANDBOX=container: the pod-based demo comes up and azlb
// status shows each Service's load balancer, the pods per node location
// and the egress identity of the demo's egress pod, whose "curl" (azlb
// sandbox egress-curl) reaches a loopback server from the identity's
// public IP.
func TestContainerSandbox(t *testing.T) {
	sb, out := upSandbox(t, sandbox.VariantContainer)
	for _, want := range []string{"service gateway holds the 5 demo pods", "egress identity team-a set up",
		"pod demo/egress-client reached a loopback server, which saw it come from 127."} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox up lacks %q:\n%s", want, out)
		}
	}
	clients, cs, render := sandboxClients(t, sb)
	got := render()
	for _, want := range []string{"(demo/web)", "(demo/api)", "SERVICE GATEWAY servicegateway", "3 locations, 6 addresses",
		"node aks-nodepool1-0", "10.244.0.10", "default-natgw", "EGRESS IDENTITY", "team-a", "10.244.1.30"} {
		if !strings.Contains(got, want) {
			t.Errorf("status lacks %q:\n%s", want, got)
		}
	}
	// The README's "curl from the pod" (bin/azlb sandbox egress-curl): the
	// loopback server sees team-a's public IP; a pod without an identity
	// has no route.
	ctx := context.Background()
	pip, err := clients.PublicIP.Get(ctx, devenv.ResourceGroup, sandbox.EgressDemoIdentity+"-pip")
	if err != nil {
		t.Fatal(err)
	}
	curl, err := sb.azlb(t, "sandbox", "egress-curl", "--dir", sb.Dir, sandbox.EgressDemoPod)
	if err != nil {
		t.Fatalf("azlb sandbox egress-curl: %v\n%s", err, curl)
	}
	if want := "source address: " + *pip.Properties.IPAddress + "\n"; !strings.HasPrefix(curl, want) {
		t.Errorf("egress-curl printed %q, want it to start with %q", curl, want)
	}
	if out, err := sb.azlb(t, "sandbox", "egress-curl", "--dir", sb.Dir, "nope/absent"); err == nil {
		t.Errorf("egress-curl of a missing pod succeeded:\n%s", out)
	}
	verifySandbox(t, sb)

	// bin/kubectl -n demo delete pod egress-client returns: a simulated
	// kubelet confirms the pod's end once azlb has torn its identity down
	// and removed its finalizer (it used to wait for ever).
	kubectl := exec.Command(filepath.Join(suite.root, "bin", "kubectl"), "--kubeconfig", filepath.Join(sb.Dir, sandbox.KubeconfigFile),
		"-n", sandbox.DemoNamespace, "delete", "pod", sandbox.EgressDemoPod, "--timeout=60s")
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl delete pod %s: %v\n%s", sandbox.EgressDemoPod, err, out)
	}
	if _, err := cs.CoreV1().Pods(sandbox.DemoNamespace).Get(ctx, sandbox.EgressDemoPod, metav1.GetOptions{}); err == nil {
		t.Errorf("pod %s still exists after kubectl delete returned", sandbox.EgressDemoPod)
	}
	eventually(t, 30*time.Second, "no egress identity in azlb status", func(context.Context) (bool, error) {
		return !strings.Contains(render(), "EGRESS IDENTITY"), nil
	})
	sb.down(t)
	checkSandboxRaces(t, sb.Dir)
}
