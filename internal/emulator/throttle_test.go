package emulator

import (
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func groupPath(rg string) string {
	return "/subscriptions/" + testSub + "/resourcegroups/" + rg + "?api-version=" + ResourcesAPIVersion
}

// TestThrottleAzureBuckets: by default reads, writes and deletes each have
// Azure's bucket per subscription and principal; the headers count down; a
// request without a token is answered 429 with Retry-After; polls are reads.
func TestThrottleAzureBuckets(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHandlerEnv(t, Options{Clock: fc})
	h.mustDo(t, http.StatusCreated, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`) // write 1
	rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}}`, nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create public IP: %d %s", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("x-ms-ratelimit-remaining-subscription-writes"); got != "198" {
		t.Fatalf("writes left %q, want 198", got)
	}
	// The operation's poll is a read: the first read leaves 249.
	op, err := url.Parse(rec.Header().Get("Azure-AsyncOperation"))
	if err != nil || op.Path == "" {
		t.Fatalf("Azure-AsyncOperation %q", rec.Header().Get("Azure-AsyncOperation"))
	}
	poll := h.do(t, http.MethodGet, op.Path+"?"+op.RawQuery, "", nil)
	if poll.Code != http.StatusOK {
		t.Fatalf("poll: %d %s", poll.Code, poll.Body)
	}
	if got, g := poll.Header().Get("x-ms-ratelimit-remaining-subscription-reads"), poll.Header().Get("x-ms-ratelimit-remaining-subscription-global-reads"); got != "249" || g != "3749" {
		t.Fatalf("reads left after the poll %q (global %q), want 249 (3749)", got, g)
	}
	for i := 0; i < 249; i++ {
		if rec := h.do(t, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "", nil); rec.Code != http.StatusOK {
			t.Fatalf("read %d: %d %s", i+2, rec.Code, rec.Body)
		}
	}
	rec = h.do(t, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "", nil)
	if rec.Code != http.StatusTooManyRequests || errCodeOf(rec) != "SubscriptionRequestsThrottled" {
		t.Fatalf("read 251: %d %s", rec.Code, rec.Body)
	}
	if rec.Header().Get("Retry-After") != "1" || rec.Header().Get("x-ms-ratelimit-remaining-subscription-reads") != "0" ||
		!strings.Contains(rec.Body.String(), "Number of 'read' requests for subscription '"+testSub+"' actor '") {
		t.Fatalf("read 429: headers %v body %s", rec.Header(), rec.Body)
	}
	// Reads are refused; writes and deletes have buckets of their own.
	h.mustDo(t, http.StatusOK, http.MethodPatch, netPath("rg", "publicIPAddresses", "pip"), `{"tags":{"a":"b"}}`)
	rec = h.do(t, http.MethodDelete, netPath("rg", "publicIPAddresses", "pip"), "", nil)
	if rec.Code != http.StatusAccepted || rec.Header().Get("x-ms-ratelimit-remaining-subscription-deletes") != "199" ||
		rec.Header().Get("x-ms-ratelimit-remaining-subscription-global-deletes") != "2999" ||
		rec.Header().Get("x-ms-ratelimit-remaining-subscription-writes") != "" {
		t.Fatalf("delete: %d %v", rec.Code, rec.Header())
	}
	// 25 reads a second come back, but not before the Retry-After given.
	fc.Step(999 * time.Millisecond)
	if rec := h.do(t, http.MethodGet, groupPath("rg"), "", nil); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("read before Retry-After elapsed: %d %v", rec.Code, rec.Header())
	}
	fc.Step(time.Millisecond)
	for i := 0; i < 25; i++ {
		if rec := h.do(t, http.MethodGet, groupPath("rg"), "", nil); rec.Code != http.StatusOK {
			t.Fatalf("read %d after 1 s: %d %s", i, rec.Code, rec.Body)
		}
	}
	if rec := h.do(t, http.MethodGet, groupPath("rg"), "", nil); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("read 26 after 1 s: %d, want 429", rec.Code)
	}
}

// TestThrottleWritesAndRetryAfter: the 201st write is refused for the
// seconds until a token (10 a second); requests of another kind still pass.
func TestThrottleWritesAndRetryAfter(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHandlerEnv(t, Options{Clock: fc, Throttle: Throttle{Writes: Limit{Bucket: 3, Refill: 0.25}}})
	h.mustDo(t, http.StatusCreated, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`)
	for i := 0; i < 2; i++ {
		h.mustDo(t, http.StatusOK, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`)
	}
	rec := h.do(t, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`, nil)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "4" ||
		rec.Header().Get("x-ms-ratelimit-remaining-subscription-writes") != "0" {
		t.Fatalf("4th write: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	// The global bucket is 15 times the principal's: it still holds 42.
	if got := rec.Header().Get("x-ms-ratelimit-remaining-subscription-global-writes"); got != "42" {
		t.Fatalf("global writes left %q, want 42", got)
	}
	fc.Step(3 * time.Second)
	if rec := h.do(t, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`, nil); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("write 1 s before Retry-After: %d %v", rec.Code, rec.Header())
	}
	fc.Step(time.Second)
	h.mustDo(t, http.StatusOK, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`)
	h.mustDo(t, http.StatusOK, http.MethodGet, groupPath("rg"), "")
	// Throttled counts the two 429s; refilling the buckets keeps the count.
	h.emu.RefillLimits()
	if n := h.emu.Throttled(); n != 2 {
		t.Fatalf("Throttled() = %d, want 2", n)
	}
}

// TestThrottleNetworkProvider: Microsoft.Network's own limit applies after
// Azure Resource Manager's, which has counted the refused request; other
// providers are not held to it.
func TestThrottleNetworkProvider(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHandlerEnv(t, Options{Clock: fc, Throttle: Throttle{NetworkWrites: Limit{Bucket: 2, Refill: 1.0 / 60}}})
	h.mustDo(t, http.StatusCreated, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`)
	body := `{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}}`
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "a"), body)
	h.mustDo(t, http.StatusAccepted, http.MethodDelete, netPath("rg", "publicIPAddresses", "a"), "")
	rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "b"), body, nil)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "60" ||
		rec.Header().Get("x-ms-ratelimit-remaining-subscription-writes") != "197" ||
		!strings.Contains(rec.Body.String(), "Microsoft.Network exceeded the limit of 2:1/m") {
		t.Fatalf("third network write: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	// Compute and resource groups are not Microsoft.Network's.
	h.mustDo(t, http.StatusOK, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`)
	h.mustDo(t, http.StatusOK, http.MethodGet, netPath("rg", "publicIPAddresses", ""), "")
}

// TestThrottleModes: the former single write bucket and no limit at all
// are settings.
func TestThrottleModes(t *testing.T) {
	off := newHandlerEnv(t, Options{Throttle: NoThrottle})
	for i := 0; i < 300; i++ {
		if rec := off.do(t, http.MethodGet, groupPath("none"), "", nil); rec.Code != http.StatusNotFound ||
			rec.Header().Get("x-ms-ratelimit-remaining-subscription-reads") != "" {
			t.Fatalf("unthrottled read %d: %d %v", i, rec.Code, rec.Header())
		}
	}
	budget := newHandlerEnv(t, Options{Throttle: Throttle{Mode: ThrottleWriteBudget}, WriteBudget: 2, WriteBudgetWindow: time.Hour})
	budget.mustDo(t, http.StatusCreated, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`)
	budget.mustDo(t, http.StatusAccepted, http.MethodDelete, groupPath("rg"), "")
	if rec := budget.do(t, http.MethodPut, groupPath("rg"), `{"location":"eastus"}`, nil); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1800" {
		t.Fatalf("third write under a budget of 2 an hour: %d %v", rec.Code, rec.Header())
	}
	for i := 0; i < 300; i++ {
		budget.mustDo(t, http.StatusNotFound, http.MethodGet, groupPath("none"), "")
	}
	if n, m := off.emu.Throttled(), budget.emu.Throttled(); n != 0 || m != 1 {
		t.Fatalf("Throttled(): %d without limits, %d under the budget; want 0 and 1", n, m)
	}
}

// TestThrottleGlobalAcrossPrincipals: the global bucket counts every
// principal's requests.
func TestThrottleGlobalAcrossPrincipals(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	th := newThrottler(Options{Throttle: Throttle{Writes: Limit{Bucket: 2, Refill: 1}, GlobalFactor: 1.5}})
	for i, want := range []bool{true, true, false} {
		if v := th.admit(testSub, "a", kindWrite, false, now); v.ok != want {
			t.Fatalf("principal a write %d: %+v", i, v)
		}
	}
	v := th.admit(strings.ToUpper(testSub), "b", kindWrite, false, now)
	if !v.ok || v.left != 1 || v.globalLeft != 0 {
		t.Fatalf("principal b's first write: %+v, want admitted with 1 left and the global bucket (3) empty", v)
	}
	if v := th.admit(testSub, "b", kindWrite, false, now); v.ok || v.by != layerGlobal || v.retryAfter != 1 {
		t.Fatalf("principal b's second write: %+v, want refused by the global bucket", v)
	}
	if v := th.admit(testSub, "b", kindDelete, false, now); !v.ok {
		t.Fatalf("a delete: %+v", v)
	}
}

func TestParseLimit(t *testing.T) {
	for in, want := range map[string]Limit{
		"200:10/s": {200, 10}, "250:25/1s": {250, 25}, "1000:1000/5m": {1000, 1000.0 / 300},
		"5:1/m": {5, 1.0 / 60}, " none ": NoLimit, "3:0.5/s": {3, 0.5},
	} {
		got, err := ParseLimit(in)
		if err != nil || got != want {
			t.Errorf("ParseLimit(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, err := ParseLimit(got.String()); err != nil || back.Bucket != got.Bucket || back.Refill-got.Refill > 1e-9*got.Refill {
			t.Errorf("%q: String %q reads back as %v, %v", in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "200", "200:10", "0:10/s", "-1:10/s", "200:0/s", "200:x/s", "200:10/0s", "200:10/-1s", "200:10/parsec", "200:NaN/s", "200:+Inf/s"} {
		if l, err := ParseLimit(in); err == nil {
			t.Errorf("ParseLimit(%q) = %v, want an error", in, l)
		}
	}
	if DefaultNetworkWriteLimit.String() != "1000:200/m" || DefaultReadLimit.String() != "250:25/s" {
		t.Errorf("defaults render as %s and %s", DefaultNetworkWriteLimit, DefaultReadLimit)
	}
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{"200:10/s", "1000:1000/5m", "none", "1:1e-300/h", "9999999999:1/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLimit(s)
		if err != nil {
			return
		}
		if l.Bucket < 0 {
			if l != NoLimit {
				t.Fatalf("%q: negative bucket %v", s, l)
			}
			return
		}
		if l.Bucket < 1 || !(l.Refill > 0) {
			t.Fatalf("%q parsed to an invalid limit %v", s, l)
		}
		if err := (Throttle{Reads: l}).validate(); err != nil {
			t.Fatalf("%q parsed to %v, which validate refuses: %v", s, l, err)
		}
		if _, err := ParseLimit(l.String()); err != nil {
			t.Fatalf("%q: String %q does not parse: %v", s, l.String(), err)
		}
	})
}

func TestThrottleOptionsRefused(t *testing.T) {
	for name, o := range map[string]Options{
		"budget without its mode": {WriteBudget: 5},
		"window under azure":      {Throttle: Throttle{Mode: ThrottleAzure}, WriteBudgetWindow: time.Minute},
		"unknown mode":            {Throttle: Throttle{Mode: "lenient"}},
		"refill without bucket":   {Throttle: Throttle{Reads: Limit{Refill: 3}}},
		"bucket without refill":   {Throttle: Throttle{Deletes: Limit{Bucket: 3}}},
		"global factor below one": {Throttle: Throttle{GlobalFactor: 0.5}},
		"negative budget":         {Throttle: Throttle{Mode: ThrottleWriteBudget}, WriteBudget: -1},
		"negative window":         {Throttle: Throttle{Mode: ThrottleWriteBudget}, WriteBudgetWindow: -time.Second},
		"network refill infinite": {Throttle: Throttle{NetworkReads: Limit{Bucket: 1, Refill: math.Inf(1)}}},
	} {
		if srv, err := Start(o, "", true); err == nil {
			_ = srv.Close()
			t.Errorf("%s: Start accepted %+v", name, o)
		}
	}
}
