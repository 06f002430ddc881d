package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	cloudfake "k8s.io/cloud-provider/fake"
	servicehelper "k8s.io/cloud-provider/service/helpers"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/lbclass"
)

const (
	testClass  = lbclass.Class("azlb.example/test")
	otherClass = "other.example/lb"
)

// fakeBalancer records the framework's load balancer calls by Service
// name, and has a load balancer for the names in have.
type fakeBalancer struct {
	mu    sync.Mutex
	calls []string // "<verb> <name>"
	have  map[string]bool
}

func (b *fakeBalancer) record(verb string, svc *v1.Service) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, verb+" "+svc.Name)
}

// callsFor lists the verbs called for the Service, in order.
func (b *fakeBalancer) callsFor(name string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, c := range b.calls {
		if verb, n, _ := strings.Cut(c, " "); n == name {
			out = append(out, verb)
		}
	}
	return out
}

func (b *fakeBalancer) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	b.record("get", svc)
	b.mu.Lock()
	defer b.mu.Unlock()
	return &v1.LoadBalancerStatus{}, b.have[svc.Name], nil
}

func (b *fakeBalancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return "a" + string(svc.UID)
}

func (b *fakeBalancer) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	b.record("ensure", svc)
	if svc.Spec.LoadBalancerClass != nil {
		return nil, fmt.Errorf("the cloud was handed class %q", *svc.Spec.LoadBalancerClass)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.have[svc.Name] = true
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "20.0.0.1"}}}, nil
}

func (b *fakeBalancer) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	b.record("update", svc)
	return nil
}

func (b *fakeBalancer) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	b.record("delete", svc)
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.have, svc.Name)
	return nil
}

// fakeCloud is the fake cloud with fakeBalancer as its LoadBalancer.
type fakeCloud struct {
	*cloudfake.Cloud
	lb *fakeBalancer
}

func (c fakeCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return c.lb, true }

// frameworkHarness runs the framework's service controller, one worker,
// on a fake clientset through classServices.
type frameworkHarness struct {
	t      *testing.T
	ctx    context.Context
	client *fake.Clientset
	lb     *fakeBalancer
}

func newFrameworkHarness(t *testing.T, class lbclass.Class) *frameworkHarness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	lb := &fakeBalancer{have: map[string]bool{}}
	sc, err := servicecontroller.New(fakeCloud{&cloudfake.Cloud{}, lb}, client,
		classServices{factory.Core().V1().Services(), class}, factory.Core().V1().Nodes(), "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc.Run(ctx, 1, controllersmetrics.NewControllerManagerMetrics("test"))
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return &frameworkHarness{t: t, ctx: ctx, client: client, lb: lb}
}

func (h *frameworkHarness) create(svc *v1.Service) {
	h.t.Helper()
	if _, err := h.client.CoreV1().Services(svc.Namespace).Create(h.ctx, svc, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *frameworkHarness) get(name string) *v1.Service {
	h.t.Helper()
	svc, err := h.client.CoreV1().Services("default").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return svc
}

func (h *frameworkHarness) update(name string, change func(*v1.Service)) {
	h.t.Helper()
	svc := h.get(name)
	change(svc)
	if _, err := h.client.CoreV1().Services("default").Update(h.ctx, svc, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// waitFor polls until cond holds about the Service.
func (h *frameworkHarness) waitFor(what string, cond func(*v1.Service) bool, name string) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(h.get(name)), nil
	})
	if err != nil {
		h.t.Fatalf("%s: %s never held; calls %v", name, what, h.lb.callsFor(name))
	}
}

// ensured waits until the Service has its finalizer and ingress: the one
// worker has handled every key queued before it.
func (h *frameworkHarness) ensured(name string) {
	h.t.Helper()
	h.waitFor("ensured", func(s *v1.Service) bool {
		return servicehelper.HasLBFinalizer(s) && len(s.Status.LoadBalancer.Ingress) == 1
	}, name)
}

// untouched fails unless the framework neither called the cloud for the
// Service nor patched it.
func (h *frameworkHarness) untouched(name string) {
	h.t.Helper()
	if calls := h.lb.callsFor(name); len(calls) != 0 {
		h.t.Errorf("%s: cloud calls %v, want none", name, calls)
	}
	for _, a := range h.client.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && p.GetName() == name {
			h.t.Errorf("%s: patched (%s %s)", name, p.GetSubresource(), p.GetPatch())
		}
	}
}

func classedService(name string, typ v1.ServiceType, class *string, finalizers ...string) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Finalizers: finalizers},
		Spec:       v1.ServiceSpec{Type: typ, LoadBalancerClass: class, Ports: []v1.ServicePort{{Port: 80, Protocol: v1.ProtocolTCP}}},
	}
}

// TestClassServicesWithTheFramework runs the framework's service
// controller through classServices: it serves the Services of azlb's class
// as its own, never calls the cloud for or patches another
// implementation's (class-less or of another class, being deleted or not,
// with the shared cleanup finalizer or not), and cleans up after a Service
// of azlb's that stops being a LoadBalancer (whose class the API server
// wipes), through the finalizer, also when it is found so at start.
func TestClassServicesWithTheFramework(t *testing.T) {
	h := newFrameworkHarness(t, testClass)
	lbFinalizer := servicehelper.LoadBalancerCleanupFinalizer
	h.lb.have["former"] = true // left by an earlier azlb

	// Another implementation's Services first: the one worker handles
	// keys in order, so once azlb's Service is ensured, these were handled.
	theirs := classedService("theirs", v1.ServiceTypeLoadBalancer, nil, lbFinalizer)
	theirs.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "20.1.0.1"}}
	h.create(theirs)
	h.create(classedService("other", v1.ServiceTypeLoadBalancer, ptr.To(otherClass)))
	h.create(classedService("former", v1.ServiceTypeClusterIP, nil, lbFinalizer))
	h.create(classedService("ours", v1.ServiceTypeLoadBalancer, ptr.To(string(testClass))))
	h.ensured("ours")
	if got := h.get("ours").Spec.LoadBalancerClass; got == nil || *got != string(testClass) {
		t.Errorf("ours: class %v after the framework's patches, want %s", got, testClass)
	}
	h.untouched("theirs")
	h.untouched("other")
	h.waitFor("cleaned up", func(s *v1.Service) bool { return !servicehelper.HasLBFinalizer(s) }, "former")
	if calls := h.lb.callsFor("former"); !slices.Equal(calls, []string{"get", "delete"}) {
		t.Errorf("former: cloud calls %v, want get, delete", calls)
	}

	// The other implementation deletes its Service (its finalizer holds
	// it); azlb's Service leaves LoadBalancer (the API server wipes its
	// class): cleaned up through the finalizer.
	h.update("theirs", func(s *v1.Service) { s.DeletionTimestamp = ptr.To(metav1.Now()) })
	h.update("ours", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		s.Spec.LoadBalancerClass = nil
	})
	h.waitFor("cleaned up", func(s *v1.Service) bool {
		return !servicehelper.HasLBFinalizer(s) && len(s.Status.LoadBalancer.Ingress) == 0
	}, "ours")
	if calls := h.lb.callsFor("ours"); !slices.Equal(calls, []string{"ensure", "get", "delete"}) {
		t.Errorf("ours: cloud calls %v, want ensure, get, delete", calls)
	}

	// A second Service of azlb's, ensured after the deletion above was
	// queued (if it was), then deleted itself.
	h.create(classedService("ours2", v1.ServiceTypeLoadBalancer, ptr.To(string(testClass))))
	h.ensured("ours2")
	h.untouched("theirs")
	if got := h.get("theirs"); !slices.Equal(got.Finalizers, []string{lbFinalizer}) || len(got.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("theirs: finalizers %v, status %v; want both as the other implementation left them", got.Finalizers, got.Status.LoadBalancer)
	}
	h.update("ours2", func(s *v1.Service) { s.DeletionTimestamp = ptr.To(metav1.Now()) })
	h.waitFor("finalizer removed", func(s *v1.Service) bool { return !servicehelper.HasLBFinalizer(s) }, "ours2")
	if calls := h.lb.callsFor("ours2"); !slices.Equal(calls, []string{"ensure", "get", "delete"}) {
		t.Errorf("ours2: cloud calls %v, want ensure, get, delete", calls)
	}
}

// TestDefaultClassWithTheFramework: without --load-balancer-class azlb
// serves the class-less Services, and another implementation's classed
// Service is none of its business even while it is deleted with the shared
// cleanup finalizer (the framework alone would ask the cloud about it and
// remove that finalizer, before its implementation has cleaned up).
func TestDefaultClassWithTheFramework(t *testing.T) {
	h := newFrameworkHarness(t, "")
	lbFinalizer := servicehelper.LoadBalancerCleanupFinalizer
	deleting := classedService("theirs", v1.ServiceTypeLoadBalancer, ptr.To(string(testClass)), lbFinalizer)
	deleting.DeletionTimestamp = ptr.To(metav1.Now())
	h.create(deleting)
	h.create(classedService("other", v1.ServiceTypeLoadBalancer, ptr.To(otherClass)))
	h.create(classedService("ours", v1.ServiceTypeLoadBalancer, nil))
	h.ensured("ours")
	h.untouched("theirs")
	h.untouched("other")
	if got := h.get("theirs"); !slices.Equal(got.Finalizers, []string{lbFinalizer}) {
		t.Errorf("theirs: finalizers %v, want the other implementation's left", got.Finalizers)
	}
}

// TestClassView: the three ways a Service is shown, and the informer's
// objects are never changed.
func TestClassView(t *testing.T) {
	lbFinalizer := servicehelper.LoadBalancerCleanupFinalizer
	ours := classedService("ours", v1.ServiceTypeLoadBalancer, ptr.To(string(testClass)), lbFinalizer)
	theirs := classedService("theirs", v1.ServiceTypeLoadBalancer, nil, lbFinalizer)
	theirs.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "20.1.0.1"}}
	plain := classedService("plain", v1.ServiceTypeClusterIP, nil, lbFinalizer)

	if v := classView(testClass, ours); v.Spec.LoadBalancerClass != nil || v.Spec.Type != v1.ServiceTypeLoadBalancer || !servicehelper.HasLBFinalizer(v) {
		t.Errorf("ours shown as %+v, want a class-less LoadBalancer with its finalizer", v.Spec)
	}
	if v := classView(testClass, theirs); v.Spec.Type != v1.ServiceTypeClusterIP || len(v.Finalizers) != 0 || len(v.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("theirs shown as %v %v %v, want ClusterIP without finalizers or status", v.Spec.Type, v.Finalizers, v.Status.LoadBalancer)
	}
	if v := classView(testClass, plain); v != plain {
		t.Errorf("a ClusterIP Service shown as a copy")
	}
	if ours.Spec.LoadBalancerClass == nil || theirs.Spec.Type != v1.ServiceTypeLoadBalancer || len(theirs.Finalizers) != 1 || len(theirs.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("the informer's objects were changed")
	}

	// Without a class: class-less Services as they are, classed ones hidden.
	if v := classView("", theirs); v != theirs {
		t.Errorf("a class-less LoadBalancer Service shown as a copy without a class")
	}
	if v := classView("", ours); v.Spec.Type != v1.ServiceTypeClusterIP || len(v.Finalizers) != 0 {
		t.Errorf("a classed Service shown as %v %v without a class, want ClusterIP without finalizers", v.Spec.Type, v.Finalizers)
	}

	// Tombstones are shown by their Service.
	s := classServices{class: testClass}
	tomb, ok := s.view(cache.DeletedFinalStateUnknown{Key: "default/theirs", Obj: theirs}).(cache.DeletedFinalStateUnknown)
	if !ok || tomb.Obj.(*v1.Service).Spec.Type != v1.ServiceTypeClusterIP {
		t.Errorf("tombstone shown as %+v", tomb)
	}
}
