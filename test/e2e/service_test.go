package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/devenv"
)

const lbName = "kubernetes"

func TestServiceLifecycle(t *testing.T) {
	ctx := context.Background()
	createNode(t, "life-n1", "10.240.1.1", nil)
	createNode(t, "life-n2", "10.240.1.2", nil)
	startController(t, "a", writeConfig(t, nil), false)
	ns := createNamespace(t)

	svc, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ip := ingressIP(t, ns, "web")
	pip, err := arm(t).PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pip {
		if p.Properties != nil && p.Properties.IPAddress != nil && *p.Properties.IPAddress == ip {
			found = true
		}
	}
	if !found {
		t.Fatalf("ingress IP %s is not a public IP in the emulator", ip)
	}
	if lb := getLB(t, lbName); ruleCount(lb) != 1 {
		t.Fatalf("load balancer has %d rules, want 1", ruleCount(lb))
	}

	t.Run("update ports", func(t *testing.T) {
		svc, err = suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, loadBalancerService(ns, "web", 443).Spec.Ports...)
		if _, err := suite.cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "two rules", func(context.Context) (bool, error) {
			return ruleCount(getLB(t, lbName)) == 2, nil
		})
	})

	t.Run("node membership", func(t *testing.T) {
		wantPool := func(want ...string) {
			t.Helper()
			eventually(t, 30*time.Second, "pool members "+strings.Join(want, ","), func(context.Context) (bool, error) {
				got := poolMembers(getLB(t, lbName), lbName)
				slices.Sort(got)
				return slices.Equal(got, want), nil
			})
		}
		wantPool("life-n1", "life-n2")
		createNode(t, "life-n3", "10.240.1.3", nil)
		wantPool("life-n1", "life-n2", "life-n3")

		n2, err := suite.cs.CoreV1().Nodes().Get(ctx, "life-n2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n2.Labels = map[string]string{v1.LabelNodeExcludeBalancers: "true"}
		if _, err := suite.cs.CoreV1().Nodes().Update(ctx, n2, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		wantPool("life-n1", "life-n3")

		if err := suite.cs.CoreV1().Nodes().Delete(ctx, "life-n3", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		wantPool("life-n1")
	})

	t.Run("delete", func(t *testing.T) {
		deleteService(t, ns, "web")
		eventually(t, 30*time.Second, "load balancer and public IP deleted", func(ctx context.Context) (bool, error) {
			if getLB(t, lbName) != nil {
				return false, nil
			}
			pips, err := arm(t).PublicIP.List(ctx, devenv.ResourceGroup)
			if err != nil {
				return false, err
			}
			for _, p := range pips {
				if p.Properties != nil && p.Properties.IPAddress != nil && *p.Properties.IPAddress == ip {
					return false, nil
				}
			}
			return true, nil
		})
		eventually(t, 30*time.Second, "Service gone (finalizer removed)", func(ctx context.Context) (bool, error) {
			_, err := suite.cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
			return err != nil, nil
		})
	})
}

// ensuredCount sums the EnsuredLoadBalancer events of a Service.
func ensuredCount(t *testing.T, ns, name string) int32 {
	t.Helper()
	return ensuredCountIn(t, suite.cs, ns, name)
}

// ensuredCountIn is ensuredCount in the cluster of cs.
func ensuredCountIn(t *testing.T, cs kubernetes.Interface, ns, name string) int32 {
	t.Helper()
	evs, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, e := range evs.Items {
		if e.InvolvedObject.Name == name && e.Reason == "EnsuredLoadBalancer" {
			n += max(e.Count, 1)
		}
	}
	return n
}

func TestRestartMakesNoWrites(t *testing.T) {
	ctx := context.Background()
	createNode(t, "rst-n1", "10.240.2.1", nil)
	createNode(t, "rst-n2", "10.240.2.2", nil)
	cfg := writeConfig(t, nil)
	first := startController(t, "first", cfg, false)
	ns := createNamespace(t)
	names := []string{"a", "b", "c"}
	for i, name := range names {
		if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, name, int32(8080+i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before := map[string]int32{}
	for _, name := range names {
		ingressIP(t, ns, name)
		before[name] = ensuredCount(t, ns, name)
	}
	first.stop()

	suite.env.Emulator().ResetRequests()
	startController(t, "second", cfg, false)
	// The restarted service controller ensures every Service once.
	for _, name := range names {
		eventually(t, 60*time.Second, "re-sync of "+name, func(context.Context) (bool, error) {
			return ensuredCount(t, ns, name) > before[name], nil
		})
	}
	if w := armWrites(); w != 0 {
		t.Fatalf("restarted controller made %d ARM writes, want 0", w)
	}
	for _, name := range names {
		deleteService(t, ns, name)
	}
}

func TestLeaderElection(t *testing.T) {
	ctx := context.Background()
	createNode(t, "le-n1", "10.240.3.1", nil)
	cfg := writeConfig(t, nil)
	a := startController(t, "a", cfg, true)
	b := startController(t, "b", cfg, true)
	const acquired = "Successfully acquired lease"
	var leader, standby *controller
	eventually(t, 60*time.Second, "a leader", func(context.Context) (bool, error) {
		switch {
		case strings.Contains(a.logText(t), acquired):
			leader, standby = a, b
		case strings.Contains(b.logText(t), acquired):
			leader, standby = b, a
		}
		return leader != nil, nil
	})
	ns := createNamespace(t)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "one", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "one")
	if strings.Contains(standby.logText(t), "Created public IP") {
		t.Fatal("the standby replica reconciled a Service while the leader was alive")
	}

	leader.kill()
	eventually(t, 60*time.Second, "the standby to take over", func(context.Context) (bool, error) {
		return strings.Contains(standby.logText(t), acquired), nil
	})
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "two", 81), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "two")
	log := standby.logText(t)
	if i, j := strings.Index(log, acquired), strings.Index(log, "Created public IP"); j >= 0 && j < i {
		t.Fatal("the standby wrote to Azure before it held the lease")
	}
	deleteService(t, ns, "one")
	deleteService(t, ns, "two")
	eventually(t, 30*time.Second, "cleanup by the new leader", func(context.Context) (bool, error) {
		return getLB(t, lbName) == nil, nil
	})
}

func TestLocalServiceDedicatedPool(t *testing.T) {
	ctx := context.Background()
	createNode(t, "loc-n1", "10.240.4.1", nil)
	createNode(t, "loc-n2", "10.240.4.2", nil)
	createNode(t, "loc-n3", "10.240.4.3", nil)
	startController(t, "a", writeConfig(t, map[string]any{
		"loadBalancerBackendPoolUpdateIntervalInSeconds": 1,
		"multipleStandardLoadBalancerConfigurations":     []map[string]any{{"name": "kubernetes"}},
	}), false)
	ns := createNamespace(t)
	svc := loadBalancerService(ns, "local", 80)
	svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := endpointSlice(ns, "local", "loc-n1", "loc-n2")
	if _, err := suite.cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "local")
	pool := ns + ".local" // names.LocalServicePool
	wantPool := func(want ...string) {
		t.Helper()
		eventually(t, 30*time.Second, "pool "+pool+" = "+strings.Join(want, ","), func(context.Context) (bool, error) {
			got := poolMembers(getLB(t, lbName), pool)
			slices.Sort(got)
			return slices.Equal(got, want), nil
		})
	}
	wantPool("loc-n1", "loc-n2")
	if got := poolMembers(getLB(t, lbName), lbName); len(got) != 0 {
		t.Errorf("a Local Service's endpoints reached the cluster pool: %v", got)
	}

	// Endpoints move: the updater rewrites the pool within an interval.
	slice, err := suite.cs.DiscoveryV1().EndpointSlices(ns).Get(ctx, slice.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = endpointSlice(ns, "local", "loc-n3").Endpoints
	if _, err := suite.cs.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantPool("loc-n3")
	eventually(t, 30*time.Second, "a LoadBalancerBackendPoolUpdated event", func(ctx context.Context) (bool, error) {
		evs, err := suite.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "LoadBalancerBackendPoolUpdated" {
				return true, nil
			}
		}
		return false, nil
	})

	// Deleting the Service deletes its dedicated pool with the load balancer.
	deleteService(t, ns, "local")
	eventually(t, 30*time.Second, "load balancer deleted", func(context.Context) (bool, error) {
		return getLB(t, lbName) == nil, nil
	})
}

func endpointSlice(ns, svc string, nodes ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: ptr.To[int32](80)}},
	}
	for i, n := range nodes {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.244.9.%d", i+1)},
			NodeName:   ptr.To(n),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return s
}
