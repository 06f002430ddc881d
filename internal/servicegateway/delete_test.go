package servicegateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/testutil"
)

// provisioned starts a harness with one Service with an endpoint on n1.
func provisioned(t *testing.T) (*harness, *v1.Service) {
	t.Helper()
	h := newHarness(t)
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.waitReady(svc)
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc))
	h.idle()
	h.arm.ResetCalls()
	return h, svc
}

// B21: deletion drains the addresses first, then unlinks the pool, deletes
// the load balancer, unregisters, deletes the public IP and removes the
// finalizers.
func TestDeleteOrder(t *testing.T) {
	h, svc := provisioned(t)
	h.remove(svc)
	h.waitGone(svc)
	got := ops(writes(h.arm.Calls()))
	want := []string{"sgw.update_locations", "sgw.update_services", "lb.delete", "sgw.update_services", "pip.delete"}
	if !slices.Equal(got, want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	var reqs []*armnetwork.ServiceGatewayUpdateServicesRequest
	for _, c := range h.arm.Calls() {
		if c.Op == "sgw.update_services" {
			reqs = append(reqs, c.Body.(*armnetwork.ServiceGatewayUpdateServicesRequest))
		}
	}
	if p := reqs[0].ServiceRequests[0].Service.Properties; p == nil || p.LoadBalancerBackendPools == nil || len(p.LoadBalancerBackendPools) != 0 {
		t.Errorf("first step unlinks the pool: %+v", reqs[0].ServiceRequests[0].Service)
	}
	if !*reqs[1].ServiceRequests[0].IsDelete {
		t.Error("the unregistration is not isDelete")
	}
	if len(h.arm.Addresses()) != 0 || !slices.Equal(h.arm.GatewayServices(), nil) {
		t.Errorf("left behind: %v %v", h.arm.Addresses(), h.arm.GatewayServices())
	}
}

// B22, bug 20: a resource already gone counts as removed.
func TestDeleteWhatIsAlreadyGone(t *testing.T) {
	h, svc := provisioned(t)
	h.setFail(func(c testutil.Call) error {
		if c.Op == "lb.delete" || c.Op == "pip.delete" {
			return testutil.RespErr(http.StatusNotFound, "ResourceNotFound")
		}
		return nil
	})
	h.remove(svc)
	testutil.Poll(t, waitFor, "Service gone", func() bool { return h.get(svc) == nil })
}

// B22, bug 19, 33: a failed step fails the deletion and keeps the
// finalizer; the retry finishes from where it stopped.
func TestDeleteStepFailureKeepsFinalizer(t *testing.T) {
	h, svc := provisioned(t)
	h.setFail(func(c testutil.Call) error {
		if c.Op == "pip.delete" {
			return testutil.RespErr(http.StatusInternalServerError, "InternalServerError")
		}
		return nil
	})
	h.remove(svc)
	testutil.Poll(t, waitFor, "public IP deletion attempted", func() bool { return h.arm.Count("pip.delete", "") > 0 })
	h.idle()
	if cur := h.get(svc); cur == nil || !slices.Contains(cur.Finalizers, Finalizer) {
		t.Fatalf("finalizer removed although a step failed: %v", cur)
	}
	h.setFail(nil)
	h.stepUntil(time.Second, "torn down", func() bool { return h.get(svc) == nil })
	h.waitGone(svc)
	if n := h.arm.Count("lb.delete", ""); n != 1 {
		t.Errorf("the load balancer was deleted %d times; the retry starts where it stopped", n)
	}
	// Bug 33: a finalizer removal failure after Azure cleanup fails the
	// deletion (retried), never success.
	h2, svc2 := provisioned(t)
	var failUpdates atomic.Bool
	failUpdates.Store(true)
	h2.cs.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc := a.(k8stesting.UpdateAction).GetObject().(*v1.Service)
		if failUpdates.Load() && !slices.Contains(svc.Finalizers, Finalizer) {
			return true, nil, errors.New("API server unavailable")
		}
		return false, nil, nil
	})
	h2.remove(svc2)
	testutil.Poll(t, waitFor, "Azure torn down", func() bool { return h2.arm.LB(uid(svc2)) == nil && h2.arm.PublicIP(uid(svc2)+"-pip") == nil })
	h2.idle()
	h2.engine.mu.Lock()
	_, still := h2.engine.states[uid(svc2)]
	h2.engine.mu.Unlock()
	if !still || h2.get(svc2) == nil {
		t.Fatal("the deletion reported success while the finalizer could not be removed")
	}
	failUpdates.Store(false)
	h2.stepUntil(time.Second, "Service gone", func() bool { return h2.get(svc2) == nil })
}

// B23, bug 18: NRP refuses to unregister a Service it still maps addresses
// to (the mirror missed them): the addresses are read again and drained,
// then the deletion finishes.
func TestDeleteRedrainsOverlayMappings(t *testing.T) {
	h, svc := provisioned(t)
	var once atomic.Bool
	h.setBefore(func(c testutil.Call) {
		// Just before the unlink, someone maps another pod to the Service
		// behind azlb's back.
		if c.Op == "sgw.update_services" && once.CompareAndSwap(false, true) {
			h.arm.SeedAddress("10.1.0.9", "10.2.0.99", uid(svc))
		}
	})
	h.remove(svc)
	testutil.Poll(t, waitFor, "refused unregistration", func() bool {
		for _, c := range h.arm.Calls() {
			if c.Op == "sgw.update_services" {
				if r := c.Body.(*armnetwork.ServiceGatewayUpdateServicesRequest); ptr.Deref(r.ServiceRequests[0].IsDelete, false) {
					return true
				}
			}
		}
		return false
	})
	h.waitGone(svc)
	if got := h.arm.Addresses(); len(got) != 0 {
		t.Errorf("addresses left: %v", got)
	}
	if n := h.arm.Count("sgw.locations", ""); n == 0 {
		t.Error("the address locations were not read again")
	}
}

// Bug 1, B24: a delete while the create is in flight turns its completion
// into a teardown: nothing leaks, the Service goes.
func TestDeleteDuringCreate(t *testing.T) {
	h := newHarness(t)
	putting, release := h.holdFirst("lb.put")
	h.start()
	svc := h.service("default", "web")
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	<-putting
	h.remove(svc)
	release()
	h.waitGone(svc)
	if n := h.arm.Count("sgw.update_locations", ""); n != 0 {
		t.Errorf("%d address updates for a Service deleted while being created", n)
	}
}

// Bug 3, 4: LoadBalancer -> ClusterIP -> LoadBalancer while the delete is
// in flight is created again afterwards, with its endpoints; a repeated
// delete cancels that.
func TestRecreateDuringDelete(t *testing.T) {
	h, svc := provisioned(t)
	deleting, release := h.holdFirst("lb.delete")
	// Retyped away: the service controller calls EnsureLoadBalancerDeleted.
	if err := h.lb.EnsureLoadBalancerDeleted(context.Background(), "k", h.get(svc)); err != nil {
		t.Fatal(err)
	}
	<-deleting
	// ...and back: EnsureLoadBalancer.
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	release()
	testutil.Poll(t, waitFor, "deleted and created again", func() bool {
		return h.arm.Count("pip.delete", "") == 1 && h.arm.GatewayService(uid(svc)) != nil
	})
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc))

	// A flap that ends deleted stays deleted.
	h.arm.ResetCalls()
	deleting, release = h.holdFirst("lb.delete")
	if err := h.lb.EnsureLoadBalancerDeleted(context.Background(), "k", h.get(svc)); err != nil {
		t.Fatal(err)
	}
	<-deleting
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	if err := h.lb.EnsureLoadBalancerDeleted(context.Background(), "k", h.get(svc)); err != nil {
		t.Fatal(err)
	}
	release()
	testutil.Poll(t, waitFor, "deleted", func() bool { return h.arm.PublicIP(uid(svc)+"-pip") == nil })
	h.idle()
	if n := h.arm.Count("pip.put", ""); n != 0 {
		t.Errorf("a repeated delete did not cancel the recreation: %d public IP writes", n)
	}
}

// Bug 2, 6, 7: a delete arriving while an update is in flight finishes;
// endpoints that appear meanwhile are not sent.
func TestDeleteDuringUpdate(t *testing.T) {
	h, svc := provisioned(t)
	putting, release := h.holdFirst("lb.put")
	cur := h.get(svc)
	cur.Spec.Ports[0].Port = 81
	if _, err := h.cs.CoreV1().Services("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	<-putting
	h.remove(svc)
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n1", "10.2.0.11"))
	release()
	h.waitGone(svc)
	for _, r := range h.locationRequests() {
		for _, l := range r.AddressLocations {
			for _, a := range l.Addresses {
				if *a.Address == "10.2.0.11" && len(a.Services) > 0 {
					t.Errorf("an endpoint added during the deletion was sent: %+v", r)
				}
			}
		}
	}
}

// Bug 34, 35: finalizer removal acts on the Service with the UID only; a
// transient read error is not "gone".
func TestFinalizersOfReplacementUntouched(t *testing.T) {
	h, svc := provisioned(t)
	var failGets atomic.Bool
	var failed atomic.Int32
	h.cs.PrependReactor("get", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if failGets.Load() && len(h.arm.GatewayServices()) == 0 {
			failed.Add(1)
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	failGets.Store(true)
	h.remove(svc)
	testutil.Poll(t, waitFor, "finalizer removal attempted", func() bool { return failed.Load() > 0 })
	h.idle()
	failGets.Store(false)
	// The Service is replaced by another of the same name before the
	// finalizers are removed.
	if h.get(svc) == nil {
		t.Fatal("the finalizer went although reading the Service failed")
	}
	cur := h.get(svc)
	cur.Finalizers = []string{"other.example.com/keep"}
	if _, err := h.cs.CoreV1().Services("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.cs.CoreV1().Services("default").Delete(context.Background(), svc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	repl := h.service("default", "web", func(s *v1.Service) { s.Finalizers = []string{Finalizer, "other.example.com/keep"} })
	h.stepUntil(time.Second, "deletion done", func() bool {
		h.engine.mu.Lock()
		defer h.engine.mu.Unlock()
		return h.engine.states[uid(svc)] == nil
	})
	if got := h.get(repl); got == nil || !slices.Contains(got.Finalizers, Finalizer) {
		t.Errorf("the replacement's finalizers were touched: %+v", got)
	}
}
