package localservice

// The retry behaviour of the updater, one test per case of the retry
// design's list, in its order (the test names state the behaviour). The
// ThrottleError cases are covered by internal/azure/throttle_test.go.
//
// A 409 or 412 is first retried by the store within the same round, with a
// fresh read (lbstore.MaxConflictRetries times); the updater sees a conflict
// only when it outlasts those, so the tests below inject conflictsPerTick
// conflicts for every tick that must fail.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/testutil"
)

const (
	reasonRetrying = EventReasonPoolUpdateRetrying
	reasonFailed   = EventReasonPoolUpdateFailed
	reasonUpdated  = EventReasonPoolUpdated

	// conflictsPerTick make one round of the store fail with a conflict.
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

// expectQueued asserts the queued entries as service@pool/retries.
func (h *harness) expectQueued(want ...string) {
	h.t.Helper()
	var got []string
	for _, op := range h.queueList() {
		got = append(got, fmt.Sprintf("%s@%s/%d", op.service, op.pool, op.retryCount))
	}
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(got, want) {
		h.t.Fatalf("queue = %v, want %v", h.queueList(), want)
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
// registered on the test load balancer with an empty pool and endpoints on
// n1 and n2, queued.
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

func TestRetry_01_ThrottleFromGetParksUntilRetryAfter(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})

	h.tick(testInterval)
	notBefore := h.clock.Now().Add(60 * time.Second)
	evs := h.expectEvents(key + " " + reasonRetrying)
	if !strings.Contains(evs[0].message, "retry 1 of 3 not before "+notBefore.UTC().Format(time.RFC3339)) {
		t.Errorf("retrying message = %q", evs[0].message)
	}
	op := h.queued(key, webPool)
	if op == nil || op.retryCount != 1 || !op.nextEligibleAt.Equal(notBefore) {
		t.Fatalf("queued = %v, want retry 1 parked until %v", op, notBefore)
	}
	if g, p := h.armCalls(webPool); g != 1 || p != 0 {
		t.Fatalf("first attempt: %d GET, %d PUT; want 1 GET (429), no PUT", g, p)
	}
	h.expectMetrics(0, 0)

	// Ticks before the Retry-After: queue preservation only.
	h.resetRequests()
	h.tick(testInterval)
	h.expectNoARM(webPool)
	h.expectEvents()
	h.expectMetrics(0, 0)
	if op := h.queued(key, webPool); op == nil || op.retryCount != 1 || !op.nextEligibleAt.Equal(notBefore) {
		t.Fatalf("after a parked tick, queued = %v; want retry 1 unchanged", op)
	}
	if n := h.pools.attempts("get"); n != 1 {
		t.Fatalf("client GET attempts = %d, want 1", n)
	}

	// The tick at the Retry-After applies the update.
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectQueued()
	h.expectMetrics(1, 0)
}

func TestRetry_02_ThrottleFromCreateOrUpdateParksUntilRetryAfter(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "45", Count: 1})

	h.tick(testInterval)
	notBefore := h.clock.Now().Add(45 * time.Second)
	h.expectEvents(key + " " + reasonRetrying)
	if op := h.queued(key, webPool); op == nil || op.retryCount != 1 || !op.nextEligibleAt.Equal(notBefore) {
		t.Fatalf("queued = %v, want retry 1 parked until %v", op, notBefore)
	}
	if _, p := h.armCalls(webPool); p != 1 {
		t.Fatalf("PUTs = %d, want 1 (429 not retried by the SDK)", p)
	}

	h.resetRequests()
	h.tick(testInterval) // +30 s < +45 s
	h.expectNoARM(webPool)
	h.expectEvents()
	h.expectMetrics(0, 0)

	h.tick(testInterval) // +60 s: a fresh GET, then the PUT
	if g, p := h.armCalls(webPool); g < 1 || p != 1 {
		t.Fatalf("eligible tick: %d GET, %d PUT; want a fresh GET and one PUT", g, p)
	}
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectQueued()
	h.expectMetrics(1, 0)
}

func TestRetry_03_ARM429WithoutRetryAfterRetriesNextTick(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, Count: 1})

	h.tick(testInterval)
	evs := h.expectEvents(key + " " + reasonRetrying)
	if !strings.Contains(evs[0].message, "retry 1 of 3 at the next update") {
		t.Errorf("retrying message = %q", evs[0].message)
	}
	op := h.queued(key, webPool)
	if op == nil || op.retryCount != 1 || !op.nextEligibleAt.IsZero() {
		t.Fatalf("queued = %v, want retry 1, not parked", op)
	}
	if g, _ := h.armCalls(webPool); g != 1 {
		t.Fatalf("GETs = %d, want 1", g)
	}

	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectQueued()
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

func TestRetry_04_LocalGateThrottleParks(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.clock.Step(testInterval)
	until := h.closeReadGate("120")

	h.u.process(h.ctx) // the tick: the GET is blocked by the closed gate
	if n := len(h.env.Emulator().Requests()); n != 0 {
		t.Fatalf("the local gate let %d requests reach ARM", n)
	}
	if n := h.pools.attempts("get"); n != 1 {
		t.Fatalf("client GET attempts = %d, want 1", n)
	}
	h.expectEvents(key + " " + reasonRetrying)
	if op := h.queued(key, webPool); op == nil || op.retryCount != 1 || !op.nextEligibleAt.Equal(until) {
		t.Fatalf("queued = %v, want retry 1 parked until %v", op, until)
	}
	for range 3 { // +30, +60, +90 s: parked
		h.tick(testInterval)
	}
	h.expectNoARM(webPool)
	h.expectEvents()
	h.tick(testInterval) // +120 s
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
	h.expectMetrics(1, 0)
}

func TestRetry_05_LocalGateExpiredFallsBackToNextTick(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.clock.Step(testInterval)
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
	h.u.process(h.ctx)
	if n := len(h.env.Emulator().Requests()); n != 0 {
		t.Fatalf("%d requests reached ARM; want the local gate to block", n)
	}
	evs := h.expectEvents(key + " " + reasonRetrying)
	if !strings.Contains(evs[0].message, "at the next update") {
		t.Errorf("retrying message = %q, want the next-update fallback", evs[0].message)
	}
	if op := h.queued(key, webPool); op == nil || op.retryCount != 1 || !op.nextEligibleAt.IsZero() {
		t.Fatalf("queued = %v, want retry 1, not parked", op)
	}
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n1", "n2")
}

func TestRetry_06_ConflictAndPreconditionFailedRetryAfterFreshGet(t *testing.T) {
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
			h.tick(testInterval)
			evs := h.expectEvents(key + " " + reasonRetrying)
			if !strings.Contains(evs[0].message, "ARM answered HTTP") {
				t.Errorf("retrying message = %q, want the ARM status", evs[0].message)
			}
			h.expectQueued(key + "@" + webPool + "/1")
			h.expectMetrics(0, 0)
			if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != conflictsPerTick || p != conflictsPerTick {
				t.Fatalf("tick 1: %d GET, %d PUT; want a fresh GET before each of %d PUTs", g, p, conflictsPerTick)
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
	t.Run("412 from a concurrent writer is absorbed by a fresh read in the same tick", func(t *testing.T) {
		h, key := webHarness(t, harnessOptions{})
		h.pools.setHook(func(op, pool string, call func() error) error {
			if op == "put" {
				h.pools.setHook(nil)
				h.concurrentWrite(pool)
			}
			return call()
		})
		h.tick(testInterval)
		h.expectEvents(key + " " + reasonUpdated)
		h.expectPool(webPool, "n1", "n2") // the foreign entry is not a desired one
		if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != 2 || p != 2 {
			t.Fatalf("%d GET, %d PUT; want the 412, a fresh GET and the PUT", g, p)
		}
		h.expectMetrics(1, 0)
	})
}

func TestRetry_07_ParkedOperationPreservesWholeGroup(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonRetrying)

	// A fresh change for the same pool joins the parked entry: it waits too.
	h.setEndpoints("default", "web", "n2", "n3")
	h.resetRequests()
	h.tick(testInterval) // +30 s: parked
	h.expectNoARM(webPool)
	h.expectEvents()
	h.expectQueued(key + "@" + webPool + "/1")
	h.expectPool(webPool)

	h.tick(testInterval) // +60 s: eligible; one GET and one PUT for both
	if g, p := h.pools.attempts("get"), h.pools.attempts("put"); g != 2 || p != 1 {
		t.Fatalf("client calls: %d GET, %d PUT; want 2 GET (one per attempt), 1 PUT", g, p)
	}
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n2", "n3")
	h.expectQueued()
	h.expectMetrics(1, 0)
}

func TestRetry_08_FreshOperationsWhileParkedAppliedInOrder(t *testing.T) {
	h, web := webHarness(t, harnessOptions{})
	api := h.localService("default", "api") // no endpoints yet: not queued
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "60", Count: 1})
	// While the tick runs (after web's throttled GET), web gets newer
	// endpoints and api its first: both land in the live queue.
	h.pools.setHook(func(op, pool string, call func() error) error {
		err := call()
		if op == "get" && pool == webPool {
			h.pools.setHook(nil)
			h.setEndpoints("default", "web", "n3")
			h.setEndpoints("default", "api", "n1")
		}
		return err
	})
	h.tick(testInterval) // T+30: web throttled until T+90
	h.expectEvents(web + " " + reasonRetrying)
	// The requeued (parked) entry comes first and takes the newest target;
	// the fresh entry for api follows.
	h.expectQueued(web+"@"+webPool+"/1", api+"@default.api/0")
	if op := h.queued(web, webPool); op.nextEligibleAt.IsZero() || fmt.Sprint(sortedKeys(op)) != "[n3]" {
		t.Fatalf("web entry = %v; want parked, target [n3]", op)
	}

	// T+60: web's group is preserved. api is attempted, but the 429 closed
	// the client's read gate until T+90, so its GET is refused locally and
	// it parks behind the same Retry-After.
	h.resetRequests()
	h.tick(testInterval)
	h.expectEvents(api + " " + reasonRetrying)
	if n := len(h.env.Emulator().Requests()); n != 0 {
		t.Fatalf("%d ARM requests while the read gate is closed", n)
	}
	h.expectQueued(web+"@"+webPool+"/1", api+"@default.api/1")
	h.expectPool(webPool)

	h.tick(testInterval) // T+90: both applied, in order
	h.expectEvents(web+" "+reasonUpdated, api+" "+reasonUpdated)
	h.expectPool(webPool, "n3") // the newest desired state, not n1+n2
	h.expectPool("default.api", "n1")
	h.expectQueued()
	h.expectMetrics(2, 0)
}

func sortedKeys(op *operation) []string { return sets.List(op.nodes) }

func TestRetry_09_MergedOperationsKeepOwnRetryCounters(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: 2 * conflictsPerTick})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonRetrying)
	h.expectQueued(key + "@" + webPool + "/1")

	// A fresh desired state replaces the target; the entry keeps the old
	// attempt's counter, and the fresh change starts its own.
	h.setEndpoints("default", "web", "n3")
	if op := h.queued(key, webPool); op.retryCount != 1 || op.freshRetries != 0 {
		t.Fatalf("merged entry %v fresh %d; want retries 1, fresh 0", op, op.freshRetries)
	}

	h.tick(testInterval) // the group fails: both consume one retry
	h.expectEvents(key + " " + reasonRetrying)
	if op := h.queued(key, webPool); op.retryCount != 2 || op.freshRetries != 1 {
		t.Fatalf("after the failure %v fresh %d; want retries 2, fresh 1", op, op.freshRetries)
	}

	h.tick(testInterval)
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n3")
	h.expectMetrics(1, 0)
}

// A fresh change that arrives while the entry is at its retry limit is not
// lost with it: the exhausted attempt is reported and dropped, the fresh
// change lives on with its own budget.
func TestRetry_10_MixedRetryBudgetsDropExhaustedRequeueFresh(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: 4 * conflictsPerTick})
	for i := 1; i <= 3; i++ {
		h.tick(testInterval)
		h.expectEvents(key + " " + reasonRetrying)
	}
	h.expectQueued(key + "@" + webPool + "/3")
	h.setEndpoints("default", "web", "n3") // fresh, while at the limit

	h.tick(testInterval) // 4th failure of the old attempt, 1st of the fresh one
	evs := h.expectEvents(key+" "+reasonFailed, key+" "+reasonRetrying)
	if !strings.Contains(evs[0].message, "failed after 3 retries") || !strings.Contains(evs[0].message, "To retrigger") {
		t.Errorf("failed message = %q", evs[0].message)
	}
	if !strings.Contains(evs[1].message, "retry 1 of 3") {
		t.Errorf("retrying message = %q, want the fresh change's first retry", evs[1].message)
	}
	h.expectQueued(key + "@" + webPool + "/1")
	h.expectMetrics(1, 1)

	h.tick(testInterval) // the fresh change succeeds
	h.expectEvents(key + " " + reasonUpdated)
	h.expectPool(webPool, "n3")
	h.expectQueued()
	h.expectMetrics(2, 1)
}

func TestRetry_11_ExhaustionEmitsFailedWithGuidance(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict})
	for i := 1; i <= 3; i++ {
		h.tick(testInterval)
		evs := h.expectEvents(key + " " + reasonRetrying)
		if want := fmt.Sprintf("retry %d of 3", i); !strings.Contains(evs[0].message, want) {
			t.Errorf("attempt %d: message %q does not say %q", i, evs[0].message, want)
		}
		h.expectMetrics(0, 0)
	}
	h.tick(testInterval)
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
	// Nothing more happens.
	h.tick(testInterval)
	h.expectEvents()
}

func TestRetry_12_SDKRetriedStatusesAreTerminal(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	defer func() { h.t = t }()
	variants := [][]string{{"n1"}, {"n1", "n2", "n3"}, {"n2"}, {"n3"}, {"n1", "n3"}, {"n2", "n3"}}
	for i, status := range azure.RetriableStatusCodes() {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h.t = t
			h.env.Emulator().ClearFaults()
			if i > 0 { // queue the Service again
				h.setEndpoints("default", "web", variants[i%len(variants)]...)
			}
			h.resetRequests()
			getsBefore := h.pools.attempts("get")
			h.fault(http.MethodGet, webPool, emulator.Fault{Status: status})
			h.tick(testInterval)
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

func TestRetry_13_OtherErrorsAreTerminal(t *testing.T) {
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
			h.tick(testInterval)
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

func TestRetry_14_NotFoundIsStaleAndQuiet(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *harness)
	}{
		{"pool deleted", func(h *harness) {
			if err := h.inspect.BackendPool.Delete(h.ctx, h.rg(), testLB, webPool); err != nil {
				h.t.Fatalf("delete pool: %v", err)
			}
			h.resetRequests()
		}},
		{"load balancer deleted", func(h *harness) {
			if err := h.inspect.LoadBalancer.Delete(h.ctx, h.rg(), testLB); err != nil {
				h.t.Fatalf("delete lb: %v", err)
			}
			h.resetRequests()
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
			h.tick(testInterval)
			h.expectEvents()
			h.expectQueued()
			h.expectMetrics(0, 0)
			if g := h.pools.attempts("get"); g != 1 {
				t.Fatalf("GET attempts = %d, want 1", g)
			}
		})
	}
}

func TestRetry_15_StaleServiceOrMovedLBDroppedBeforeRequeue(t *testing.T) {
	cases := []struct {
		name   string
		during func(h *harness, key string) // runs during the failing PUT
	}{
		{"Service deleted", func(h *harness, _ string) { h.deleteService("default", "web") }},
		{"Service now ExternalTrafficPolicy=Cluster", func(h *harness, _ string) {
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
		{"pool removed from its load balancer", func(h *harness, _ string) {
			// What the Service reconcile does when the Service moves away
			// (here behind the store's back: its round is busy with us).
			if err := h.inspect.BackendPool.Delete(h.ctx, h.rg(), testLB, webPool); err != nil {
				h.t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, key := webHarness(t, harnessOptions{})
			h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
			h.pools.setHook(func(op, _ string, call func() error) error {
				if op == "put" {
					h.pools.setHook(nil)
					tc.during(h, key)
				}
				return call()
			})
			h.tick(testInterval)
			h.expectEvents()
			h.expectQueued()
			h.expectMetrics(0, 0)
		})
	}

	t.Run("stale at drain: no ARM call", func(t *testing.T) {
		h, key := webHarness(t, harnessOptions{})
		h.unregister(key, testLB)
		h.resetRequests()
		h.tick(testInterval)
		h.expectNoARM(webPool)
		h.expectEvents()
		h.expectQueued()
	})
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

// A requeued entry follows its Service: when the Service reconcile moves
// it to another load balancer, the retry writes the pool where it is now,
// and nothing is written where it was.
func TestRetry_16_RequeuedEntryFollowsAServiceThatMoved(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: conflictsPerTick})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonRetrying)
	h.expectQueued(key + "@" + webPool + "/1")

	// The Service reconcile moves the Service to lb-2: its pool leaves
	// kubernetes and is created there.
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

// A requeued entry of a Service deleted meanwhile is dropped by the next
// tick's relevance check, quietly and without an ARM call.
func TestRetry_17_RequeuedEntryOfADeletedServiceIsDropped(t *testing.T) {
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
			h.tick(testInterval)
			h.expectEvents(key + " " + reasonRetrying)
			h.expectQueued(key + "@" + webPool + "/1")
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

func TestRetry_18_ServiceGoneWhileParkedDroppedQuietly(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "300", Count: 1})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonRetrying)
	h.deleteService("default", "web")
	h.resetRequests()
	h.tick(testInterval)
	h.expectQueued()
	h.expectEvents()
	h.expectNoARM(webPool)
	h.expectMetrics(0, 0)
}

// With collision-free pool names a group holds one Service's entry, but
// settle still reports once per distinct Service of a group: a group built
// with two Services' entries gets one event each, not one in all.
func TestRetry_19_OneEventPerDistinctServiceInGroup(t *testing.T) {
	one := 1
	h := newHarness(t, harnessOptions{maxRetries: &one})
	h.addNode("n1", "10.240.0.4")
	a := h.localService("default", "web")
	h.addService("default", "api")
	b := "default/api"
	g := &opGroup{key: groupKey{lb: testLB, pool: webPool}, lb: testLB, pool: webPool, family: v1.IPv4Protocol, ops: []*operation{
		{service: a, pool: webPool, family: v1.IPv4Protocol, nodes: sets.New("n1")},
		{service: a, pool: webPool, family: v1.IPv4Protocol, nodes: sets.New("n1")},
		{service: b, pool: webPool, family: v1.IPv4Protocol, nodes: sets.New("n1")},
	}}
	conflict := &poolError{op: "update", lb: testLB, pool: webPool, err: testutil.RespErr(http.StatusConflict, "AnotherOperationInProgress")}
	requeued := h.u.settle(h.ctx, g, result{err: conflict, mc: metrics.NewMetricContext(MetricPrefix, MetricRequest, "rg", "s", h.source)})
	h.expectEvents(a+" "+reasonRetrying, b+" "+reasonRetrying)
	if len(requeued) != 3 {
		t.Fatalf("requeued %d entries, want all 3", len(requeued))
	}
	g.ops = requeued
	h.u.settle(h.ctx, g, result{err: conflict, mc: metrics.NewMetricContext(MetricPrefix, MetricRequest, "rg", "s", h.source)})
	h.expectEvents(a+" "+reasonFailed, b+" "+reasonFailed)
	h.expectMetrics(1, 1)
	h.u.settle(h.ctx, g, result{diff: backendpool.Diff{Changed: true, Members: 1}, mc: metrics.NewMetricContext(MetricPrefix, MetricRequest, "rg", "s", h.source)})
	h.expectEvents(a+" "+reasonUpdated, b+" "+reasonUpdated)
}

// A parked entry whose pool is removed (the Service left its load balancer)
// is dropped at the next tick, before its Retry-After, without an ARM call.
func TestRetry_20_ParkedOperationOfARemovedPoolIsDropped(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "300", Count: 1})
	h.tick(testInterval)
	h.expectEvents(key + " " + reasonRetrying)
	if op := h.queued(key, webPool); op == nil || !op.nextEligibleAt.After(h.clock.Now()) {
		t.Fatalf("queued = %v, want parked", op)
	}
	h.unregister(key, testLB)
	h.resetRequests()
	h.tick(testInterval)
	h.expectQueued()
	h.expectNoARM(webPool)
	h.expectEvents()
}

func TestRetry_21_ShutdownWithParkedOperationsIsQuiet(t *testing.T) {
	t.Run("Run stops with a parked entry", func(t *testing.T) {
		h, key := webHarness(t, harnessOptions{})
		h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "600", Count: 1})
		ctx, cancel := context.WithCancel(h.ctx)
		done := make(chan error, 1)
		go func() { done <- h.u.Run(ctx) }()
		h.eventually("ticker started", h.clock.HasWaiters)
		h.clock.Step(testInterval)
		h.eventually("parked", func() bool {
			op := h.queued(key, webPool)
			return op != nil && op.retryCount == 1
		})
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
		// the leader's context ends); the updater requeues nothing and
		// reports no retry or failure.
		h, key := webHarness(t, harnessOptions{})
		ctx, cancel := context.WithCancel(h.ctx)
		h.pools.setHook(func(op, _ string, call func() error) error {
			if op == "put" {
				cancel()
			}
			return call()
		})
		h.clock.Step(testInterval)
		h.u.process(ctx)
		h.expectQueued()
		h.expectEvents(key + " " + reasonUpdated)
	})
}

func TestRetry_22_ExplicitZeroMaxRetriesDisablesRetry(t *testing.T) {
	probe := newHarness(t, harnessOptions{})
	cases := []struct {
		extra string
		isNil bool
		want  int
	}{
		{`"loadBalancerBackendPoolUpdateIntervalInSeconds": 30`, false, 3}, // unset: SetDefaults fills 3
		{`"loadBalancerBackendPoolUpdateMaxRetries": 0`, false, 0},
		{`"loadBalancerBackendPoolUpdateMaxRetries": -4`, false, 0},
		{`"loadBalancerBackendPoolUpdateMaxRetries": 5`, false, 5},
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
	h.tick(testInterval)
	evs := h.expectEvents(key + " " + reasonFailed)
	if !strings.Contains(evs[0].message, "failed after 0 retries") {
		t.Errorf("message = %q", evs[0].message)
	}
	h.expectQueued()
	h.expectMetrics(1, 1)
}

func TestRetry_23_RetriedThenSucceededRecordsOneSuccessMetric(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	h.fault(http.MethodPut, webPool, emulator.Fault{Status: http.StatusConflict, Count: 2 * conflictsPerTick})
	h.fault(http.MethodGet, webPool, emulator.Fault{Status: http.StatusTooManyRequests, RetryAfter: "40", Count: 1})
	h.tick(testInterval) // GET 429: parked
	h.tick(testInterval) // parked
	h.tick(testInterval) // PUT 409
	h.tick(testInterval) // PUT 409
	h.expectMetrics(0, 0)
	h.tick(testInterval) // success
	h.expectEvents(key+" "+reasonRetrying, key+" "+reasonRetrying, key+" "+reasonRetrying, key+" "+reasonUpdated)
	h.expectMetrics(1, 0)
	h.expectPool(webPool, "n1", "n2")
}
