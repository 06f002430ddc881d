package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/lbclass"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/verify"
)

// TestLoadBalancerClass runs azlb as it runs beside AKS's own controller
// (docs/install.md, AKS): --load-balancer-class and load balancers of its
// own (clusterName). The Service of its class gets a load balancer, and
// loses it when deleted; a class-less Service and one of another class are
// another implementation's: no status, no finalizer, no event, and not one
// ARM write names them.
func TestLoadBalancerClass(t *testing.T) {
	const (
		class  = "azlb.example/test"
		azlbLB = "azlb"
	)
	ctx := context.Background()
	createNode(t, "cls-n1", "10.240.9.1", nil)
	cfgPath := writeConfig(t, map[string]any{"clusterName": azlbLB})
	startController(t, "a", cfgPath, false, "--load-balancer-class="+class)
	ns := createNamespace(t)

	// The other implementations' Services first, then azlb's: once azlb's
	// has its second rule (below), the service controller has long handled
	// every event of the others.
	classless := loadBalancerService(ns, "classless", 80)
	other := loadBalancerService(ns, "other", 81)
	other.Spec.LoadBalancerClass = ptr.To("other.example/lb")
	ours := loadBalancerService(ns, "ours", 82)
	ours.Spec.LoadBalancerClass = ptr.To(class)
	theirs := map[string]*v1.Service{}
	for _, svc := range []*v1.Service{classless, other, ours} {
		created, err := suite.cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Name != "ours" {
			theirs[created.Name] = created
			t.Cleanup(func() { deleteService(t, ns, created.Name) }) // no finalizer holds them
		}
	}
	ingressIP(t, ns, "ours")
	svc, err := suite.cs.CoreV1().Services(ns).Get(ctx, "ours", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports = append(svc.Spec.Ports, loadBalancerService(ns, "ours", 443).Spec.Ports...)
	if _, err := suite.cs.CoreV1().Services(ns).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "two rules for ours", func(context.Context) (bool, error) {
		return ruleCount(getLB(t, azlbLB)) == 2, nil
	})

	// azlb verify with the same class judges only azlb's Service: clean.
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "azlb verify --load-balancer-class clean", func(ctx context.Context) (bool, error) {
		rep, err := verify.RunClass(ctx, cfg, arm(t), suite.cs, lbclass.Class(class))
		return err == nil && rep.Clean(), nil
	})

	for name, created := range theirs {
		got, err := suite.cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.LoadBalancer.Ingress) != 0 || len(got.Finalizers) != 0 {
			t.Errorf("%s: status %v, finalizers %v; want neither", name, got.Status.LoadBalancer, got.Finalizers)
		}
		evs, err := suite.cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			if apiserverEvent(e) {
				t.Logf("%s: the kube-apiserver's own event, not azlb's: %s %s %q", name, e.ReportingController, e.Reason, e.Message)
				continue
			}
			t.Errorf("%s: event from %q/%q: %s %q", name, e.ReportingController, e.Source.Component, e.Reason, e.Message)
		}
		base := strings.ToLower(names.FrontendBase(created))
		for _, r := range suite.env.Emulator().Requests() {
			if r.Kind == "arm" && r.Method != http.MethodGet && strings.Contains(strings.ToLower(r.Path+" "+r.Body), base) {
				t.Errorf("%s: ARM write %s %s", name, r.Method, r.Path)
			}
		}
		lb := getLB(t, azlbLB)
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			if strings.HasPrefix(strings.ToLower(ptr.Deref(fe.Name, "")), base) {
				t.Errorf("%s: frontend %s on %s", name, *fe.Name, azlbLB)
			}
		}
	}

	deleteService(t, ns, "ours")
	eventually(t, 30*time.Second, "azlb's load balancer and public IP deleted", func(ctx context.Context) (bool, error) {
		if getLB(t, azlbLB) != nil {
			return false, nil
		}
		pips, err := arm(t).PublicIP.List(ctx, devenv.ResourceGroup)
		if err != nil {
			return false, err
		}
		for _, p := range pips {
			if strings.Contains(strings.ToLower(ptr.Deref(p.Name, "")), strings.ToLower(names.FrontendBase(svc))) {
				return false, nil
			}
		}
		return true, nil
	})
	eventually(t, 30*time.Second, "ours gone (finalizer removed)", func(ctx context.Context) (bool, error) {
		_, err := suite.cs.CoreV1().Services(ns).Get(ctx, "ours", metav1.GetOptions{})
		return err != nil, nil
	})
}

// apiserverEvent reports an event the kube-apiserver itself records about
// a Service: its ClusterIP and node-port repair loops, which may find a
// Service created a moment ago before its allocation is in their cache
// (seen in CI: ClusterIPNotAllocated on a class-less Service).
func apiserverEvent(e v1.Event) bool {
	for _, c := range []string{e.ReportingController, e.Source.Component} {
		if c == "ipallocator-repair-controller" || c == "portallocator-repair-controller" {
			return true
		}
	}
	return false
}
