package localservice

// The retry behaviour of the updater: one test per case of the local
// service updater's retry rules (docs/multiple-load-balancers.md, "Retries
// and error handling"), named after the behaviour. ThrottleError itself is
// covered by internal/azure/throttle_test.go.
//
// A pool is attempted at once when it is idle (the leading edge) and
// otherwise at the end of its batching window (testInterval); h.process()
// runs what is due, h.tick(d) moves the fake clock and runs what is then due.
//
// A 409 or 412 is first retried by the store within the same attempt, with
// a fresh read (lbstore.MaxConflictRetries times); the updater sees a
// conflict only when it outlasts those, so the tests inject conflictsPerTick
// conflicts for every attempt that must fail.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
)

const (
	reasonRetrying = EventReasonPoolUpdateRetrying
	reasonFailed   = EventReasonPoolUpdateFailed
	reasonUpdated  = EventReasonPoolUpdated

	// conflictsPerTick make one attempt fail with a conflict.
	conflictsPerTick = lbstore.MaxConflictRetries + 1
)

// expectEvents asserts the "object reason" list of the events since the
// last call.
func (h *harness) expectEvents(want ...string) []event {
	h.t.Helper()
	evs := h.rec.take()
	got := reasons(evs)
	if len(got) != len(want) || (len(want) > 0 && !reflect.DeepEqual(got, want)) {
		h.t.Fatalf("events = %v, want %v", evs, want)
	}
	return evs
}

// expectEventSet is expectEvents in any order (pools of one batch).
func (h *harness) expectEventSet(want ...string) {
	h.t.Helper()
	evs := h.rec.take()
	got := reasons(evs)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		h.t.Fatalf("events = %v, want %v in any order", evs, want)
	}
}

// expectNoARM asserts that no ARM request reached the pool since the last
// reset.
func (h *harness) expectNoARM(pool string) {
	h.t.Helper()
	if g, p := h.armCalls(pool); g != 0 || p != 0 {
		h.t.Fatalf("ARM calls on %s = %d GET, %d PUT; want none", pool, g, p)
	}
}

// expectMetrics asserts the operation metric totals.
func (h *harness) expectMetrics(observed, failed int) {
	h.t.Helper()
	o, f := h.opMetrics()
	if o != observed || f != failed {
		h.t.Fatalf("operation metric: %d observations, %d failures; want %d, %d", o, f, observed, failed)
	}
}

// expectQueued asserts the pools with work as service@pool/retries.
func (h *harness) expectQueued(want ...string) {
	h.t.Helper()
	var got []string
	for _, st := range h.queueList() {
		got = append(got, fmt.Sprintf("%s@%s/%d", st.service, st.pool, st.retries))
	}
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(got, want) {
		h.t.Fatalf("queue = %v, want %v", got, want)
	}
}

func (h *harness) expectPool(pool string, nodes ...string) {
	h.t.Helper()
	got := h.poolNodes(pool)
	if len(nodes) == 0 {
		nodes = nil
	}
	if !reflect.DeepEqual(got, nodes) {
		h.t.Fatalf("pool %s nodes = %v, want %v", pool, got, nodes)
	}
}

// webHarness: default retries, nodes n1..n3, the Local Service default/web
// placed on the test load balancer with an empty pool, and endpoints on n1
// and n2: a change due at once.
func webHarness(t testing.TB, ho harnessOptions) (*harness, string) {
	h := newHarness(t, ho)
	h.addNode("n1", "10.240.0.4")
	h.addNode("n2", "10.240.0.5")
	h.addNode("n3", "10.240.0.6")
	key := h.localService("default", "web")
	h.setEndpoints("default", "web", "n1", "n2")
	h.resetRequests()
	return h, key
}

const webPool = "default.web"

func TestThrottleFromGetParksThePoolUntilRetryAfter(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})

	h.process()
	notBefore := h.clock.Now().Add(60 * time.Second)
	evs := h.expectEvents(key + " " + reasonRetrying)
	if !strings.Contains(evs[0].message, "retry 1 of 3 not before "+notBefore.UTC().Format(time.RFC3339)) {
		t.Errorf("retrying message = %q", evs[0].message)
	}
	if st := h.queued(key, webPool); st == nil || st.retries != 1 || !st.notBefore.Equal(notBefore) {
		t.Fatalf("state = %+v, want retry 1 parked until %v", st, notBefore)
	}
	if g, p := h.armCalls(webPool); g != 1 || p != 0 {
		t.Fatalf("first attempt: %d GET, %d PUT; want 1 GET (429), no PUT", g, p)
	}
	h.expectMetrics(0, 0)

	h.quietTick(testInterval) // +30 s: parked, nothing due
	h.expectEvents()
	h.tick(testInterval) // +60 s: the Retry-After
	h.expectEvents(key + " " + reasonUpdated)
	if n := h.pools.attempts("get"); n != 2 {
		t.Fatalf("client GET attempts = %d, want 2 (none while parked)", n)
	}
	h.expectPool(webPool, "n1", "n2")
	h.expectQueued()
	h.expectMetrics(1, 0)
}

func TestThrottleFromCreateOrUpdateParksThePoolUntilRetryAfter(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "45", Count: 1})

	h.process()
	notBefore := h.clock.Now().Add(45 * time.Second)
	h.expectEvents(key + " " + reasonRetrying)
	if st := h.queued(key, webPool); st == nil || st.retries != 1 || !st.notBefore.Equal(notBefore) {
		t.Fatalf("state = %+v, want retry 1 parked until %v", st, notBefore)
	}
	if _, p := h.armCalls(webPool); p != 1 {
		t.Fatalf("PUTs = %d, want 1 (429 not retried by the SDK)", p)
	}
	h.resetRequests()
	h.quietTick(testInterval) // +30 s < +45 s
	h.tick(testInterval)      // +60 s: a fresh GET, then the PUT
	if g, p := h.armCalls(webPool); g < 1 || p != 1 {
		t.Fatalf("eligible attempt: %d GET, %d PUT; want a fresh GET and one PUT", g, p)
	}
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectMetrics(1, 0)
}

func TestARM429WithoutRetryAfterRetriesAtTheNextWindow(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, Count: 1})

	h.process()
	evs := h.expectEvents(key + " " + reasonRetrying)
	if !strings.Contains(evs[0].message, "retry 1 of 3 at the next update") {
		t.Errorf("retrying message = %q", evs[0].message)
	}
	if st := h.queued(key, webPool); st == nil || st.retries != 1 || !st.notBefore.IsZero() {
		t.Fatalf("state = %+v, want retry 1, not parked", st)
	}
	h.quietTick(testInterval - time.Second)
	h.tick(time.Second)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectMetrics(1, 0)
}

// closeReadGate makes ARM throttle a GET of the updater's own client, so
// that its read gate stays closed for retryAfter.
func (h *harness) closeReadGate(retryAfter string) time.Time {
	h.t.Helper()
	h.fault(http.MethodGet, "other", emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter, Count: 1})
	_, err := h.clients.BackendPool.Get(h.ctx, h.rg(), testLB, "other")
	until, ok := azure.ThrottleRetryAfter(err)
	if !ok || !until.After(h.clock.Now()) {
		h.t.Fatalf("closing the read gate: err = %v", err)
	}
	h.resetRequests()
	return until
}

// concurrentWrite writes the pool behind the updater's back (a foreign
// entry), changing its etag.
func (h *harness) concurrentWrite(pool string) {
	h.t.Helper()
	_, err := h.inspect.BackendPool.CreateOrUpdate(h.ctx, h.rg(), testLB, pool, armnetwork.BackendAddressPool{
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{{
				Name: to.Ptr("foreign"),
				Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress:      to.Ptr("10.240.0.99"),
					VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(h.u.policy.VNetID)},
				},
			}},
		},
	}, "")
	if err != nil {
		h.t.Fatalf("concurrent write: %v", err)
	}
}

func TestLocalThrottleGateParksThePool(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	until := h.closeReadGate("120")

	h.process() // the GET is refused by the closed gate, before ARM
	if n := len(h.env.Emulator().Requests()); n != 0 {
		t.Fatalf("the local gate let %d requests reach ARM", n)
	}
	h.expectEvents(key + " " + reasonRetrying)
	if st := h.queued(key, webPool); st == nil || st.retries != 1 || !st.notBefore.Equal(until) {
		t.Fatalf("state = %+v, want retry 1 parked until %v", st, until)
	}
	for range 3 { // +30, +60, +90 s: parked
		h.quietTick(testInterval)
	}
	h.expectNoARM(webPool)
	h.tick(testInterval) // +120 s
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectMetrics(1, 0)
}

func TestExpiredLocalThrottleFallsBackToTheNextWindow(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	until := h.closeReadGate("10")
	// The gate blocks the call; by the time the error reaches the updater,
	// the gate time has passed (as when it expires during SDK retries).
	h.pools.setHook(func(op, _ string, call func() error) error {
		err := call()
		if op == "get" {
			h.pools.setHook(nil)
			h.clock.SetTime(until.Add(time.Second))
		}
		return err
	})
	h.process()
	if n := len(h.env.Emulator().Requests()); n != 0 {
		t.Fatalf("%d requests reached ARM; want the local gate to block", n)
	}
	evs := h.expectEvents(key + " " + reasonRetrying)
	if !strings.Contains(evs[0].message, "at the next update") {
		t.Errorf("retrying message = %q, want the next-update fallback", evs[0].message)
	}
	if st := h.queued(key, webPool); st == nil || st.retries != 1 || !st.notBefore.IsZero() {
		t.Fatalf("state = %+v, want retry 1, not parked", st)
	}
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
}

func TestConflictRetriesAfterAFreshGet(t *testing.T) {
	cases := []struct {
		name   string
		status int
		code   string
	}{
		{"409 Conflict", http.StatusConflict, ""},
		{"409 AnotherOperationInProgress", http.StatusConflict, azure.CodeAnotherOperationInProgress},
		{"412 PreconditionFailed", http.StatusPreconditionFailed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, key := webHarness(t, harnessOptions{})
			h.fault(http.MethodPut, webPool, emulator.Fault{Status: tc.status, Code: tc.code, Count: conflictsPerTick})
			h.process()
			evs := h.expectEvents(key + " " + reasonRetrying)
			if !strings.Contains(evs[0].message, "ARM answered HTTP") {
				t.Errorf("retrying message = %q, want the ARM status", evs[0].message)
			}
			h.expectQueued(key + "@" + webPool + "/1")
			h.expectMetrics(0, 0)
			if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != conflictsPerTick || p != conflictsPerTick {
				t.Fatalf("attempt 1: %d GET, %d PUT; want a fresh GET before each of %d PUTs", g, p, conflictsPerTick)
			}
			h.tick(testInterval)
			if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != conflictsPerTick+1 || p != conflictsPerTick+1 {
				t.Fatalf("after the retry: %d GET, %d PUT; want one more of each", g, p)
			}
			h.expectEvents(key + " " + reasonUpdated)
			h.expectPool(webPool, "n1", "n2")
			h.expectQueued()
			h.expectMetrics(1, 0)
		})
	}
	t.Run("412 from a concurrent writer is absorbed by a fresh read in the same attempt", func(t *testing.T) {
		h, key := webHarness(t, harnessOptions{})
		h.pools.setHook(func(op, pool string, call func() error) error {
			if op == "put" {
				h.pools.setHook(nil)
				h.concurrentWrite(pool)
			}
			return call()
		})
		h.process()
		h.expectEvents(key + " " + reasonUpdated)
		h.expectPool(webPool, "n1", "n2") // the foreign entry is not a desired one
		if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != 2 || p != 2 {
			t.Fatalf("%d GET, %d PUT; want the 412, a fresh GET and the PUT", g, p)
		}
		h.expectMetrics(1, 0)
	})
}

func TestChangeWhileParkedWaitsWithThePool(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})
	h.process()
	h.expectEvents(key + " " + reasonRetrying)

	h.setEndpoints("default", "web", "n2", "n3") // a change while parked
	h.quietTick(testInterval)                    // +30 s: still parked
	h.expectQueued(key + "@" + webPool + "/1")
	h.expectPool(webPool)

	h.tick(testInterval) // +60 s: one GET and one PUT carry the newest state
	if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != 2 || p != 1 {
		t.Fatalf("client calls: %d GET, %d PUT; want 2 GET (one per attempt), 1 PUT", g, p)
	}
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n2", "n3")
	h.expectQueued()
	h.expectMetrics(1, 0)
}

func TestPoolsParkedBehindOneRetryAfterAreAppliedTogetherWithTheNewestState(t *testing.T) {
	h, web := webHarness(t, harnessOptions{})
	api := h.localService("default", "api")
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})
	h.process() // web throttled until +60; the 429 closes the client's read gate too
	h.expectEvents(web + " " + reasonRetrying)

	// web gets newer endpoints; api its first: api is due at once, but its
	// GET is refused by the closed gate, so it parks behind the same time.
	h.setEndpoints("default", "web", "n3")
	h.setEndpoints("default", "api", "n1")
	h.resetRequests()
	h.process()
	h.expectEvents(api + " " + reasonRetrying)
	if n := len(h.env.Emulator().Requests()); n != 0 {
		t.Fatalf("%d ARM requests while the read gate is closed", n)
	}
	h.expectQueued(api+"@default.api/1", web+"@"+webPool+"/1")

	h.tick(60 * time.Second) // both applied, in one batch
	h.expectEventSet(api+" "+reasonUpdated, web+" "+reasonUpdated)
	h.expectPool(webPool, "n3") // the newest desired state, not n1+n2
	h.expectPool("default.api", "n1")
	h.expectQueued()
	h.expectMetrics(2, 0)
}

func TestChangeMergedIntoARetryKeepsItsOwnCounter(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: 2 * conflictsPerTick})
	h.process()
	h.expectEvents(key + " " + reasonRetrying)
	h.expectQueued(key + "@" + webPool + "/1")

	h.setEndpoints("default", "web", "n3")
	if st := h.queued(key, webPool); st.retries != 1 || st.fresh != 0 {
		t.Fatalf("merged state %+v; want retries 1, fresh 0", st)
	}
	h.tick(testInterval) // the attempt fails: both changes consume a retry
	h.expectEvents(key + " " + reasonRetrying)
	if st := h.queued(key, webPool); st.retries != 2 || st.fresh != 1 {
		t.Fatalf("after the failure %+v; want retries 2, fresh 1", st)
	}
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n3")
	h.expectMetrics(1, 0)
}

// A fresh change that arrives while the pool's change is at its retry limit
// is not lost with it: the exhausted change is reported and dropped, the
// fresh one lives on with its own budget.
func TestExhaustedChangeIsDroppedWhileAFreshOneLivesOn(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: 4 * conflictsPerTick})
	h.process()
	for i := 2; i <= 3; i++ {
		h.expectEvents(key + " " + reasonRetrying)
		h.tick(testInterval)
	}
	h.expectEvents(key + " " + reasonRetrying)
	h.expectQueued(key + "@" + webPool + "/3")
	h.setEndpoints("default", "web", "n3") // fresh, while at the limit

	h.tick(testInterval) // 4th failure of the old change, 1st of the fresh one
	evs := h.expectEvents(key+" "+reasonFailed, key+" "+reasonRetrying)
	if !strings.Contains(evs[0].message, "failed after 3 retries") || !strings.Contains(evs[0].message, "To retrigger") {
		t.Errorf("failed message = %q", evs[0].message)
	}
	if !strings.Contains(evs[1].message, "retry 1 of 3") {
		t.Errorf("retrying message = %q, want the fresh change's first retry", evs[1].message)
	}
	h.expectQueued(key + "@" + webPool + "/1")
	h.expectMetrics(1, 1)

	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n3")
	h.expectQueued()
	h.expectMetrics(2, 1)
}

func TestExhaustedRetriesEmitFailedWithGuidance(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict})
	h.process()
	for i := 1; i <= 3; i++ {
		evs := h.expectEvents(key + " " + reasonRetrying)
		if want := fmt.Sprintf("retry %d of 3", i); !strings.Contains(evs[0].message, want) {
			t.Errorf("attempt %d: message %q does not say %q", i, evs[0].message, want)
		}
		h.expectMetrics(0, 0)
		h.tick(testInterval)
	}
	evs := h.expectEvents(key + " " + reasonFailed)
	want := "Backend pool update failed after 3 retries: update backend pool default.web of load balancer kubernetes: ARM answered HTTP 409 (Conflict). " +
		"To retrigger, cause an endpoint change for the Service (e.g., restart or scale a backing pod)."
	if evs[0].message != want {
		t.Errorf("failed message =\n%q\nwant\n%q", evs[0].message, want)
	}
	if evs[0].typ != v1.EventTypeWarning {
		t.Errorf("event type = %s", evs[0].typ)
	}
	h.expectQueued()
	h.expectMetrics(1, 1)
	if p := h.pools.attempts("put"); p != 4*conflictsPerTick {
		t.Fatalf("PUT attempts = %d, want %d (1 + 3 retries, each with the store's own retries)", p, 4*conflictsPerTick)
	}
	h.quietTick(testInterval) // nothing more happens
	h.expectEvents()
}

func TestSDKRetriedStatusesAreTerminal(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	defer func() { h.t = t }()
	variants := [][]string{{"n1"}, {"n1", "n2", "n3"}, {"n2"}, {"n3"}, {"n1", "n3"}, {"n2", "n3"}}
	for i, status := range azure.RetriableStatusCodes() {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h.t = t
			h.env.Emulator().ClearFaults()
			h.fault(http.MethodGet, webPool, emulator.Fault{Status: status})
			h.resetRequests()
			getsBefore := h.pools.attempts("get")
			if i == 0 {
				h.process()
			} else { // a new change, due at the end of the last window
				h.setEndpoints("default", "web", variants[i%len(variants)]...)
				h.tick(testInterval)
			}
			evs := h.expectEvents(key + " " + reasonFailed)
			if !strings.HasPrefix(evs[0].message, "Backend pool update failed (non-retriable): ") ||
				!strings.Contains(evs[0].message, fmt.Sprintf("HTTP %d", status)) {
				t.Errorf("failed message = %q", evs[0].message)
			}
			h.expectQueued()
			if n := h.pools.attempts("get") - getsBefore; n != 1 {
				t.Errorf("updater GET attempts = %d, want 1 (no updater retry)", n)
			}
			if g, _ := h.armCalls(webPool); g != 1+azure.DefaultMaxRetries {
				t.Errorf("ARM GETs = %d, want %d (the SDK retried)", g, 1+azure.DefaultMaxRetries)
			}
			h.expectMetrics(i+1, i+1)
		})
	}
}

func TestOtherErrorsAreTerminal(t *testing.T) {
	boom := errors.New("boom: the node lister exploded")
	cases := []struct {
		name      string
		setup     func(h *harness)
		retriable bool
		contains  string
	}{
		{name: "ARM 400 BadRequest", setup: func(h *harness) {
			h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusBadRequest, Code: "InvalidResourceReference"})
		}, contains: "ARM answered HTTP 400 (InvalidResourceReference)"},
		{name: "ARM LRO Failed", setup: func(h *harness) {
			h.fault(http.MethodPut, webPool, emulator.Fault{LROResult: "Failed"})
		}},
		{name: "non-ARM error", setup: func(h *harness) {
			h.pools.setHook(func(op, _ string, call func() error) error {
				if op == "put" {
					return boom
				}
				return call()
			})
		}, contains: "boom: the node lister exploded"},
		{name: "deadline of the call, updater running", setup: func(h *harness) {
			h.pools.setHook(func(op, _ string, call func() error) error {
				if op == "put" {
					return fmt.Errorf("call: %w", context.DeadlineExceeded)
				}
				return call()
			})
		}},
		{name: "non-ARM error marked retriable", retriable: true, setup: func(h *harness) {
			h.pools.setHook(func(op, _ string, call func() error) error {
				if op == "put" {
					return azure.MarkRetriable(boom)
				}
				return call()
			})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, key := webHarness(t, harnessOptions{})
			tc.setup(h)
			h.process()
			if tc.retriable {
				h.expectEvents(key + " " + reasonRetrying)
				h.expectQueued(key + "@" + webPool + "/1")
				h.expectMetrics(0, 0)
				return
			}
			evs := h.expectEvents(key + " " + reasonFailed)
			if !strings.HasPrefix(evs[0].message, "Backend pool update failed (non-retriable): ") || !strings.Contains(evs[0].message, tc.contains) {
				t.Errorf("failed message = %q, want it to contain %q", evs[0].message, tc.contains)
			}
			h.expectQueued()
			h.expectMetrics(1, 1)
		})
	}
}

func TestNotFoundIsStaleAndQuiet(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness)
	}{
		{"pool deleted", func(h *harness) {
			if err := h.inspect.BackendPool.Delete(h.ctx, h.rg(), testLB, webPool); err != nil {
				h.t.Fatalf("delete pool: %v", err)
			}
		}},
		{"load balancer deleted", func(h *harness) {
			if err := h.inspect.LoadBalancer.Delete(h.ctx, h.rg(), testLB); err != nil {
				h.t.Fatalf("delete lb: %v", err)
			}
		}},
		{"GET 404 ResourceNotFound", func(h *harness) {
			h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusNotFound, Code: azure.CodeResourceNotFound})
		}},
		{"PUT 404 (gone between GET and PUT)", func(h *harness) {
			h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusNotFound})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := webHarness(t, harnessOptions{})
			tc.setup(h)
			h.process()
			h.expectEvents()
			h.expectQueued()
			h.expectMetrics(0, 0)
			if g := h.pools.attempts("get"); g != 1 {
				t.Fatalf("GET attempts = %d, want 1", g)
			}
		})
	}
}

func TestStaleServiceOrRemovedPoolIsDroppedQuietly(t *testing.T) {
	cases := []struct {
		name   string
		during func(h *harness) // runs during the failing PUT
	}{
		{"Service deleted", func(h *harness) { h.deleteService("default", "web") }},
		{"Service now ExternalTrafficPolicy=Cluster", func(h *harness) {
			svc, err := h.kube.CoreV1().Services("default").Get(h.ctx, "web", metav1.GetOptions{})
			if err != nil {
				h.t.Fatal(err)
			}
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
			if _, err := h.kube.CoreV1().Services("default").Update(h.ctx, svc, metav1.UpdateOptions{}); err != nil {
				h.t.Fatal(err)
			}
			h.eventually("lister sees Cluster", func() bool {
				s, err := h.u.services.Services("default").Get("web")
				return err == nil && s.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyCluster
			})
		}},
		{"pool removed from its load balancer", func(h *harness) {
			// What the Service reconcile does when the Service moves away
			// (here behind the store's back: its round is busy with us).
			if err := h.inspect.BackendPool.Delete(h.ctx, h.rg(), testLB, webPool); err != nil {
				h.t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := webHarness(t, harnessOptions{})
			h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
			h.pools.setHook(func(op, _ string, call func() error) error {
				if op == "put" {
					h.pools.setHook(nil)
					tc.during(h)
				}
				return call()
			})
			h.process()
			// The failure is reported as it happened; the next window finds
			// the pool no longer relevant and drops it without an ARM call.
			h.rec.take()
			h.resetRequests()
			if h.u.QueueLen() > 0 {
				h.tick(testInterval)
			}
			h.expectNoARM(webPool)
			h.expectEvents()
			h.expectQueued()
		})
	}
	t.Run("stale before the attempt: no ARM call", func(t *testing.T) {
		h, key := webHarness(t, harnessOptions{})
		h.unregister(key, testLB)
		h.resetRequests()
		h.process()
		h.expectNoARM(webPool)
		h.expectEvents()
		h.expectQueued()
	})
}

// A retried pool follows its Service: when the Service reconcile moves it
// to another load balancer, the retry writes the pool where it is now, and
// nothing is written where it was.
func TestRetryFollowsAServiceThatMoved(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
	h.process()
	h.expectEvents(key + " " + reasonRetrying)
	h.expectQueued(key + "@" + webPool + "/1")

	h.createLB(otherLB)
	h.unregister(key, testLB)
	h.register(key, otherLB)
	h.resetRequests()
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	if lb := h.poolLB(webPool); lb != otherLB {
		t.Fatalf("the pool is on %s", lb)
	}
	h.expectPool(webPool, "n1", "n2")
	for _, r := range h.env.Emulator().Requests() {
		if r.Method == http.MethodPut && strings.Contains(r.Path, "/loadBalancers/"+testLB+"/backendAddressPools/") {
			t.Errorf("wrote the old location: %s", r.Path)
		}
	}
	h.expectQueued()
}

// A retried pool of a Service deleted meanwhile is dropped at its next
// window, quietly and without an ARM call.
func TestRetryOfADeletedServiceIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete func(h *harness, key string)
	}{
		{"the Service is gone", func(h *harness, _ string) { h.deleteService("default", "web") }},
		{"its pool is gone", func(h *harness, key string) { h.unregister(key, testLB) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, key := webHarness(t, harnessOptions{})
			h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
			h.process()
			h.expectEvents(key + " " + reasonRetrying)
			tc.delete(h, key)
			h.resetRequests()
			h.tick(testInterval)
			h.expectNoARM(webPool)
			h.expectEvents()
			h.expectQueued()
			h.expectMetrics(0, 0)
		})
	}
}

func TestServiceGoneWhileParkedIsDroppedQuietly(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "300", Count: 1})
	h.process()
	h.expectEvents(key + " " + reasonRetrying)
	h.deleteService("default", "web")
	h.resetRequests()
	h.tick(300 * time.Second)
	h.expectQueued()
	h.expectEvents()
	h.expectNoARM(webPool)
	h.expectMetrics(0, 0)
}

// Pools of several Services failing in one batch get one event each.
func TestOneEventPerServiceWhenSeveralFailTogether(t *testing.T) {
	one := 1
	h, web := webHarness(t, harnessOptions{maxRetries: &one})
	api := h.localService("default", "api")
	h.setEndpoints("default", "api", "n3")
	for _, pool := range []string{webPool, "default.api"} {
		h.fault(http.MethodPut, pool, emulator.Fault{Status: http.StatusConflict, Count: 2 * conflictsPerTick})
	}
	h.process() // both due: one batch
	h.expectEventSet(api+" "+reasonRetrying, web+" "+reasonRetrying)
	h.tick(testInterval)
	h.expectEventSet(api+" "+reasonFailed, web+" "+reasonFailed)
	h.expectMetrics(2, 2)
	h.expectQueued()
}

func TestParkedPoolWhosePoolWasRemovedIsDroppedWithoutARMCall(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "300", Count: 1})
	h.process()
	h.expectEvents(key + " " + reasonRetrying)
	h.unregister(key, testLB)
	h.resetRequests()
	h.tick(300 * time.Second)
	h.expectQueued()
	h.expectNoARM(webPool)
	h.expectEvents()
}

func TestShutdownWithParkedPoolsIsQuiet(t *testing.T) {
	t.Run("Run stops with a parked pool", func(t *testing.T) {
		h, key := webHarness(t, harnessOptions{})
		h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "600", Count: 1})
		ctx, cancel := context.WithCancel(h.ctx)
		done := make(chan error, 1)
		go func() { done <- h.u.Run(ctx) }()
		h.eventually("parked", func() bool {
			st := h.queued(key, webPool)
			return st != nil && st.retries == 1
		})
		h.eventually("the Retrying event", func() bool { return h.rec.count() > 0 })
		h.expectEvents(key + " " + reasonRetrying)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		h.expectQueued()
		h.expectEvents()
		h.expectMetrics(0, 0)
	})
	t.Run("cancellation during an ARM call", func(t *testing.T) {
		// The store finishes a write it started (it stops writing only when
		// the leader's context ends); the updater reports the outcome and
		// keeps nothing.
		h, key := webHarness(t, harnessOptions{})
		ctx, cancel := context.WithCancel(h.ctx)
		h.pools.setHook(func(op, _ string, call func() error) error {
			if op == "put" {
				cancel()
			}
			return call()
		})
		h.eventually("a pool due", func() bool { return h.u.queue.Len() > 0 })
		h.u.processNextWorkItem(ctx)
		h.expectQueued()
		h.expectEvents(key + " " + reasonUpdated)
	})
}

func TestExplicitZeroMaxRetriesDisablesRetry(t *testing.T) {
	probe := newHarness(t, harnessOptions{})
	cases := []struct {
		extra string
		want  int
	}{
		{`"loadBalancerBackendPoolUpdateIntervalInSeconds": 30`, 3}, // unset: SetDefaults fills 3
		{`"loadBalancerBackendPoolUpdateMaxRetries": 0`, 0},
		{`"loadBalancerBackendPoolUpdateMaxRetries": -4`, 0},
		{`"loadBalancerBackendPoolUpdateMaxRetries": 5`, 5},
	}
	for _, tc := range cases {
		cfg := testConfig(t, probe.env, tc.extra)
		if cfg.LoadBalancerBackendPoolUpdateMaxRetries == nil {
			t.Fatalf("%s: the pointer is nil after config load", tc.extra)
		}
		if got := EffectiveMaxRetries(FromConfig(cfg, Options{}).MaxRetries); got != tc.want {
			t.Errorf("%s: max retries = %d, want %d", tc.extra, got, tc.want)
		}
	}
	if got := EffectiveMaxRetries(nil); got != DefaultMaxRetries {
		t.Errorf("nil max retries = %d, want %d", got, DefaultMaxRetries)
	}

	cfg := testConfig(t, probe.env, `"loadBalancerBackendPoolUpdateMaxRetries": 0`)
	opts := FromConfig(cfg, Options{})
	h, key := webHarness(t, harnessOptions{maxRetries: opts.MaxRetries})
	if h.u.MaxRetries() != 0 {
		t.Fatalf("MaxRetries() = %d", h.u.MaxRetries())
	}
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
	h.process()
	evs := h.expectEvents(key + " " + reasonFailed)
	if !strings.Contains(evs[0].message, "failed after 0 retries") {
		t.Errorf("message = %q", evs[0].message)
	}
	h.expectQueued()
	h.expectMetrics(1, 1)
}

func TestRetriedThenSucceededRecordsOneSuccessMetric(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: 2 * conflictsPerTick})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "40", Count: 1})
	h.process() // GET 429: parked until +40
	h.quietTick(30 * time.Second)
	h.tick(10 * time.Second) // PUT 409
	h.tick(testInterval)     // PUT 409
	h.expectMetrics(0, 0)
	h.tick(testInterval) // success
	h.expectEvents(key+" "+reasonRetrying, key+" "+reasonRetrying, key+" "+reasonRetrying, key+" "+reasonUpdated)
	h.expectMetrics(1, 0)
	h.expectPool(webPool, "n1", "n2")
}
