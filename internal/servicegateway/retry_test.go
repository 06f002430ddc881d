package servicegateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/testutil"
)

// stepUntil steps the fake clock by d until cond holds.
func (h *harness) stepUntil(d time.Duration, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		h.idle()
		if cond() {
			return
		}
		h.clk.Step(d)
	}
}

// B19, bug 30: transient failures of an address update (429, 5xx, 409,
// a call that hangs until its timeout) are retried until it succeeds.
func TestLocationUpdateRetries(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"throttled", testutil.RespErr(http.StatusTooManyRequests, "TooManyRequests")},
		{"server error", testutil.RespErr(http.StatusServiceUnavailable, "ServiceUnavailable")},
		{"conflict", testutil.RespErr(http.StatusConflict, "AnotherOperationInProgress")},
		{"timeout", context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, svc := provisioned(t)
			var failures atomic.Int32
			h.setFail(func(c testutil.Call) error {
				if c.Op == "sgw.update_locations" && failures.Add(1) <= 3 {
					return tc.err
				}
				return nil
			})
			h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n1", "10.2.0.11"))
			h.stepUntil(time.Second, "address registered after retries", func() bool {
				return len(h.arm.Addresses()) == 1 && strings.Contains(h.arm.Addresses()[0], "10.2.0.11")
			})
			if n := failures.Load(); n != 4 {
				t.Errorf("%d attempts, want 3 failures and a success", n)
			}
		})
	}
}

// A call that hangs is cut off by OpTimeout and retried.
func TestHungLocationUpdateTimesOut(t *testing.T) {
	h := newHarness(t)
	var hung atomic.Bool
	hung.Store(true)
	h.opts = func(o *Options) {
		o.OpTimeout = 50 * time.Millisecond
		// The fake ignores contexts; this gateway hangs until the call's
		// context ends, as a stuck connection would.
		o.Gateway = hangingGateway{ServiceGatewayClient: o.Gateway, hang: &hung}
	}
	h.start()
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	// (The short timeout also bounds the create's steps: a slow run may
	// need its retries, hence the clock steps.)
	h.stepUntil(time.Second, "the hung call timed out", func() bool { return h.engine.locQueue.NumRequeues(locationsKey) > 0 })
	hung.Store(false)
	h.stepUntil(time.Second, "addresses", func() bool { return len(h.arm.Addresses()) == 1 })
}

type hangingGateway struct {
	azure.ServiceGatewayClient
	hang *atomic.Bool
}

func (g hangingGateway) UpdateAddressLocations(ctx context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateAddressLocationsRequest) error {
	if g.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return g.ServiceGatewayClient.UpdateAddressLocations(ctx, rg, gw, req)
}

// B19, bug 31: a request the gateway refuses (400) is given up, split to
// keep what it accepts, and not retried until those addresses change.
func TestRefusedLocationUpdateIsIsolated(t *testing.T) {
	h, svc := provisioned(t)
	h.node("n2", "10.1.0.5")
	h.setFail(func(c testutil.Call) error {
		if c.Op != "sgw.update_locations" {
			return nil
		}
		r := c.Body.(*armnetwork.ServiceGatewayUpdateAddressLocationsRequest)
		for _, l := range r.AddressLocations {
			if *l.AddressLocation == "10.1.0.5" {
				return testutil.RespErr(http.StatusBadRequest, "InvalidServiceGatewayAddress")
			}
		}
		return nil
	})
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n1", "10.2.0.11"), readyOn("n2", "10.2.0.12"))
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc) + " 10.2.0.11=" + uid(svc))
	h.idle()
	n := h.arm.Count("sgw.update_locations", "")
	h.clk.Step(time.Minute)
	h.idle()
	if m := h.arm.Count("sgw.update_locations", ""); m != n {
		t.Errorf("a refused update was retried %d times", m-n)
	}
}

// B26, bug 12, 13, 14: transient failures back off (1 s doubling), at
// most MaxBurst in a row, then park for Cooldown and try again by
// themselves; a delete starts with a clean budget.
func TestTransientFailuresBackOffAndPark(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setFail(func(c testutil.Call) error {
		if c.Op == "pip.put" {
			return testutil.RespErr(http.StatusInternalServerError, "InternalServerError")
		}
		return nil
	})
	svc := h.service("default", "web")
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	attempts := func() int { return h.arm.Count("pip.put", "") }
	testutil.Poll(t, waitFor, "first attempt", func() bool { return attempts() == 1 })
	h.idle()
	// Nothing happens before the backoff is over.
	h.clk.Step(500 * time.Millisecond)
	h.idle()
	if attempts() != 1 {
		t.Fatalf("retried before its backoff: %d", attempts())
	}
	h.stepUntil(time.Second, "a burst of attempts", func() bool { return attempts() >= MaxBurst })
	h.idle()
	if got := h.events.Find("default/web", EventOperationFailed); len(got) != 1 {
		t.Fatalf("parking events %v", h.events.All())
	}
	h.clk.Step(Cooldown - time.Second)
	h.idle()
	if attempts() != MaxBurst {
		t.Fatalf("%d attempts during the cooldown", attempts())
	}
	// (Stepped until it happens: the workqueue's timer may be set a step
	// late.)
	h.stepUntil(time.Second, "re-armed after the cooldown", func() bool { return attempts() > MaxBurst })
	// A deletion is not bound by the create's exhausted budget.
	h.setFail(nil)
	h.remove(svc)
	testutil.Poll(t, waitFor, "Service gone", func() bool { return h.get(svc) == nil })
}

// B26, bug 10, 11: what Azure refuses for the Service's spec parks until
// the spec changes (with a ServiceGatewayConfigurationRejected event); an
// unchanged resync does not retry it; a changed one does.
func TestTerminalFailureParksUntilSpecChanges(t *testing.T) {
	h := newHarness(t)
	h.start()
	h.setFail(func(c testutil.Call) error {
		if c.Op == "lb.put" && len(c.Body.(*armnetwork.LoadBalancer).Properties.LoadBalancingRules) == 1 {
			return testutil.RespErr(http.StatusBadRequest, "RulesUseSameBackendPortProtocolAndPool")
		}
		return nil
	})
	svc := h.service("default", "web")
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, waitFor, "refused", func() bool { return len(h.events.Find("default/web", EventConfigurationRejected)) == 1 })
	h.idle()
	n := h.arm.Count("lb.put", "")
	if err := h.ensure(svc); err != nil { // unchanged
		t.Fatal(err)
	}
	h.clk.Step(time.Hour)
	h.idle()
	if m := h.arm.Count("lb.put", ""); m != n {
		t.Fatalf("a parked Service was retried %d times", m-n)
	}
	cur := h.get(svc)
	cur.Spec.Ports = append(cur.Spec.Ports, v1.ServicePort{Name: "b", Port: 443, Protocol: v1.ProtocolTCP})
	if _, err := h.cs.CoreV1().Services("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.waitReady(svc)
}

// Bug 8: a terminal update failure keeps the live Service's addresses
// flowing.
func TestTerminalUpdateKeepsAddresses(t *testing.T) {
	h, svc := provisioned(t)
	h.setFail(func(c testutil.Call) error {
		if c.Op == "lb.put" {
			return testutil.RespErr(http.StatusBadRequest, "InvalidRequestFormat")
		}
		return nil
	})
	cur := h.get(svc)
	cur.Spec.Ports[0].Port = 81
	if _, err := h.cs.CoreV1().Services("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, waitFor, "update refused", func() bool { return len(h.events.Find("default/web", EventConfigurationRejected)) == 1 })
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"), readyOn("n1", "10.2.0.20"))
	h.waitAddresses("10.1.0.4: 10.2.0.10=" + uid(svc) + " 10.2.0.20=" + uid(svc))
}

// B20: a port change re-PUTs only the load balancer; rapid edits end on
// the last one.
func TestUpdateWritesOnlyTheLoadBalancer(t *testing.T) {
	h, svc := provisioned(t)
	for _, port := range []int32{81, 82, 83} {
		cur := h.get(svc)
		cur.Spec.Ports[0].Port = port
		if _, err := h.cs.CoreV1().Services("default").Update(context.Background(), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := h.ensure(svc); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Poll(t, waitFor, "last port applied", func() bool {
		lb := h.arm.LB(uid(svc))
		return lb != nil && *lb.Properties.LoadBalancingRules[0].Name == "rule-tcp-83"
	})
	h.idle()
	for _, c := range writes(h.arm.Calls()) {
		if c.Op != "lb.put" {
			t.Errorf("an update wrote %s", c.Op)
		}
	}
}

// Bug 17, 24: a panicking call is a failed attempt; no ARM call is made
// while the engine's lock is held.
func TestPanicRecoveredAndNoCallUnderLock(t *testing.T) {
	h := newHarness(t)
	var underLock atomic.Int32
	var panicked atomic.Bool
	var engine atomic.Pointer[Controller]
	h.setBefore(func(c testutil.Call) {
		// If the caller held the lock, taking it here would wait until the
		// call returned: it is not granted in time.
		if e := engine.Load(); e != nil {
			got := make(chan struct{})
			go func() {
				e.mu.Lock()
				e.mu.Unlock() //nolint:staticcheck // SA2001: taking the lock is the test
				close(got)
			}()
			select {
			case <-got:
			case <-time.After(2 * time.Second):
				underLock.Add(1)
			}
		}
		if c.Op == "pip.put" && panicked.CompareAndSwap(false, true) {
			panic("boom")
		}
	})
	h.start()
	engine.Store(h.engine)
	h.node("n1", "10.1.0.4")
	svc := h.service("default", "web")
	h.slice(svc, "a", discoveryv1.AddressTypeIPv4, readyOn("n1", "10.2.0.10"))
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	h.stepUntil(time.Second, "provisioned after the panic", func() bool { return len(h.arm.Addresses()) == 1 })
	if underLock.Load() != 0 {
		t.Errorf("%d ARM calls while the engine's lock was held", underLock.Load())
	}
}

// Bug 22, 23: a failing API server creates nothing in Azure before the
// finalizers are on; a failing status write keeps the registration and is
// retried.
func TestKubernetesFailures(t *testing.T) {
	h := newHarness(t)
	var failUpdate, failPatch atomic.Bool
	failUpdate.Store(true)
	failPatch.Store(true)
	h.cs.PrependReactor("update", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failUpdate.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	h.cs.PrependReactor("patch", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failPatch.Load() {
			return true, nil, errors.New("etcdserver: request timed out")
		}
		return false, nil, nil
	})
	h.start()
	svc := h.service("default", "web")
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, waitFor, "attempt", func() bool { return h.engine.svcQueue.NumRequeues(uid(svc)) > 0 })
	if w := writes(h.arm.Calls()); len(w) != 0 {
		t.Fatalf("ARM writes before the finalizers were on: %v", ops(w))
	}
	failUpdate.Store(false)
	h.stepUntil(time.Second, "registered", func() bool { return h.arm.GatewayService(uid(svc)) != nil })
	h.clk.Step(time.Minute)
	h.idle()
	if h.arm.GatewayService(uid(svc)) == nil {
		t.Fatal("a status failure unregistered the Service")
	}
	failPatch.Store(false)
	h.stepUntil(time.Second, "ingress written", func() bool {
		cur := h.get(svc)
		return cur != nil && len(cur.Status.LoadBalancer.Ingress) == 1
	})
}

// Bug 32: Run returns only after the call in flight has.
func TestStopWaitsForCallInFlight(t *testing.T) {
	h := newHarness(t)
	inCall, release := h.holdFirst("pip.put")
	h.start()
	svc := h.service("default", "web")
	if err := h.ensure(svc); err != nil {
		t.Fatal(err)
	}
	<-inCall
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		h.shutdown()
		close(stopped)
	})
	select {
	case <-stopped:
		t.Fatal("Run returned while a call was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	wg.Wait()
}

// Bug 15: double calls, unknown and empty UIDs.
func TestIdempotentCalls(t *testing.T) {
	h := newHarness(t)
	h.start()
	ctx := context.Background()
	ghost := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "y", UID: uidB}}
	if err := h.lb.EnsureLoadBalancerDeleted(ctx, "k", ghost); err != nil {
		t.Fatal(err)
	}
	if err := h.lb.EnsureLoadBalancerDeleted(ctx, "k", &v1.Service{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.lb.EnsureLoadBalancer(ctx, "k", &v1.Service{}, nil); err == nil {
		t.Error("a Service without UID was accepted")
	}
	svc := h.service("default", "web")
	for range 2 {
		if err := h.ensure(svc); err != nil {
			t.Fatal(err)
		}
	}
	h.waitReady(svc)
	h.idle()
	h.engine.mu.Lock()
	n := len(h.engine.states)
	h.engine.mu.Unlock()
	if n != 1 || h.arm.Count("pip.put", "") != 1 {
		t.Errorf("%d records, %d public IP writes", n, h.arm.Count("pip.put", ""))
	}
	h.remove(svc)
	if err := h.lb.EnsureLoadBalancerDeleted(ctx, "k", h.get(svc)); err != nil {
		t.Fatal(err)
	}
	h.waitGone(svc)
	if n := h.arm.Count("pip.delete", ""); n != 1 {
		t.Errorf("%d public IP deletions", n)
	}
}
