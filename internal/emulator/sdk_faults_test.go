package emulator

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	clocktesting "k8s.io/utils/clock/testing"
)

func stdPIP() armnetwork.PublicIPAddress {
	return armnetwork.PublicIPAddress{
		Location: to.Ptr("eastus"),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
	}
}

func TestSDKAnotherOperationInProgress(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	env := newSDKEnv(t, Options{Clock: fc, OperationDuration: time.Minute})
	ctx := ctxT(t)
	env.createGroup(t, "rg", "eastus")
	p, err := env.pips.BeginCreateOrUpdate(ctx, "rg", "pip", stdPIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Done() {
		t.Fatal("create with OperationDuration > 0 must not be done immediately")
	}
	if _, err := p.Poll(ctx); err != nil || p.Done() {
		t.Fatalf("first poll: err=%v done=%v, want InProgress", err, p.Done())
	}
	_, err = env.pips.BeginCreateOrUpdate(ctx, "rg", "pip", stdPIP(), nil)
	if code, status := errorCode(err); status != http.StatusConflict || code != "AnotherOperationInProgress" {
		t.Fatalf("write during operation: %v", err)
	}
	fc.Step(time.Minute)
	res, err := p.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatalf("poll after duration: %v", err)
	}
	if *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded || res.Properties.IPAddress == nil {
		t.Fatalf("final state %v ip %v", *res.Properties.ProvisioningState, res.Properties.IPAddress)
	}
	// With OperationDuration > 0 an update is asynchronous too.
	up, err := env.pips.BeginCreateOrUpdate(ctx, "rg", "pip", stdPIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if up.Done() {
		t.Fatal("update with OperationDuration > 0 must be polled")
	}
	fc.Step(time.Minute)
	if _, err := up.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
}

// TestSDKWriteBudgetThrottles is the former model, kept as a setting: one
// write bucket per subscription, reads unlimited.
func TestSDKWriteBudgetThrottles(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	env := newSDKEnv(t, Options{Clock: fc, Throttle: Throttle{Mode: ThrottleWriteBudget}, WriteBudget: 3, WriteBudgetWindow: 90 * time.Second})
	ctx := ctxT(t)
	env.createGroup(t, "rg", "eastus") // write 1
	for i := 0; i < 2; i++ {           // writes 2 and 3
		p, err := env.pips.BeginCreateOrUpdate(ctx, "rg", "pip", stdPIP(), nil)
		if err != nil {
			t.Fatalf("write %d: %v", i+2, err)
		}
		if _, err := p.PollUntilDone(ctx, pollOpts); err != nil {
			t.Fatal(err)
		}
	}
	// Reads are not limited.
	for i := 0; i < 5; i++ {
		if _, err := env.pips.Get(ctx, "rg", "pip", nil); err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	_, err := env.pips.BeginCreateOrUpdate(ctx, "rg", "pip", stdPIP(), nil)
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusTooManyRequests || re.ErrorCode != "SubscriptionRequestsThrottled" {
		t.Fatalf("4th write: %v", err)
	}
	// 3 writes per 90s: one token every 30s.
	if got := re.RawResponse.Header.Get("Retry-After"); got != "30" {
		t.Fatalf("Retry-After %q, want 30", got)
	}
	if got := re.RawResponse.Header.Get("x-ms-ratelimit-remaining-subscription-writes"); got != "0" {
		t.Fatalf("remaining writes %q, want 0", got)
	}
	fc.Step(29 * time.Second)
	if _, err := env.pips.BeginDelete(ctx, "rg", "pip", nil); err == nil {
		t.Fatal("a token appeared before Retry-After elapsed")
	}
	fc.Step(2 * time.Second)
	p, err := env.pips.BeginDelete(ctx, "rg", "pip", nil)
	if err != nil {
		t.Fatalf("write after refill: %v", err)
	}
	if _, err := p.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
}

func TestSDKFaults(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	env.createGroup(t, "rg", "eastus")
	cases := []struct {
		name   string
		fault  Fault
		status int
		code   string
		retry  string
	}{
		{"throttle with junk Retry-After", Fault{Method: "GET", PathRegex: `/publicIPAddresses/`, Count: 1, Status: 429, Code: "TooManyRequests", RetryAfter: "soon"}, 429, "TooManyRequests", "soon"},
		{"conflict with seconds", Fault{PathRegex: `(?i)/publicipaddresses/`, Count: 1, Status: 409, Code: "RetryableError", RetryAfter: "7"}, 409, "RetryableError", "7"},
		{"server error with date", Fault{Count: 1, Status: 500, RetryAfter: "Wed, 21 Oct 2015 07:28:00 GMT"}, 500, "InternalServerError", "Wed, 21 Oct 2015 07:28:00 GMT"},
		{"precondition", Fault{Count: 1, Status: 412, Code: "PreconditionFailed", Message: "etag moved"}, 412, "PreconditionFailed", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := env.emu.AddFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			_, err := env.pips.Get(ctx, "rg", "pip", nil)
			var re *azcore.ResponseError
			if !errors.As(err, &re) || re.StatusCode != tc.status || re.ErrorCode != tc.code {
				t.Fatalf("got %v, want %d %s", err, tc.status, tc.code)
			}
			if got := re.RawResponse.Header.Get("Retry-After"); got != tc.retry {
				t.Fatalf("Retry-After %q, want %q", got, tc.retry)
			}
			// Count 1: the next call reaches ARM (the IP does not exist).
			_, err = env.pips.Get(ctx, "rg", "pip", nil)
			if code, _ := errorCode(err); code != "ResourceNotFound" {
				t.Fatalf("fault did not expire: %v", err)
			}
		})
	}
	if n := len(env.emu.Faults()); n != 0 {
		t.Fatalf("%d faults left installed", n)
	}
	var faulted int
	for _, r := range env.emu.Requests() {
		if r.Faulted {
			faulted++
			if r.Kind != "arm" {
				t.Fatalf("faulted record %+v", r)
			}
		}
	}
	if faulted != len(cases) {
		t.Fatalf("request log has %d faulted records, want %d", faulted, len(cases))
	}
}

func TestSDKResetConnectionFault(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	env.createGroup(t, "rg", "eastus")
	if _, err := env.emu.AddFault(Fault{Method: http.MethodGet, PathRegex: "publicIPAddresses", Count: 1, ResetConnection: true}); err != nil {
		t.Fatal(err)
	}
	_, err := env.pips.Get(ctx, "rg", "pip", nil)
	if err == nil {
		t.Fatal("reset connection produced a response")
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		t.Fatalf("reset connection produced an HTTP error %v", re)
	}
	recs := env.emu.Requests()
	last := recs[len(recs)-1]
	if !last.Faulted || last.Status != 0 {
		t.Fatalf("request log for reset: %+v", last)
	}
	if _, err := env.pips.Get(ctx, "rg", "pip", nil); err == nil || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Fatalf("after the reset fault: %v", err)
	}
}

func TestSDKLROResultFaults(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, env, "rg")
	if _, err := env.emu.AddFault(Fault{Method: "PUT", PathRegex: "/publicIPAddresses/bad$", Count: 1, LROResult: "Failed", Code: "ignored"}); err != nil {
		t.Fatal(err)
	}
	p, err := env.pips.BeginCreateOrUpdate(ctx, "rg", "bad", stdPIP(), nil)
	if err != nil {
		t.Fatalf("the write must be accepted: %v", err)
	}
	_, err = p.PollUntilDone(ctx, pollOpts)
	if code, _ := errorCode(err); code != "InternalServerError" {
		t.Fatalf("failed LRO: %v", err)
	}
	got, err := env.pips.Get(ctx, "rg", "bad", nil)
	if err != nil || *got.Properties.ProvisioningState != armnetwork.ProvisioningStateFailed {
		t.Fatalf("state after failed create: %v %v", err, got.Properties)
	}
	// A later successful write recovers the resource.
	p, err = env.pips.BeginCreateOrUpdate(ctx, "rg", "bad", stdPIP(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := p.PollUntilDone(ctx, pollOpts); err != nil || *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("recovery: %v", err)
	}

	// Canceled on a backend pool update (subresource write).
	if _, err := env.emu.AddFault(Fault{PathRegex: "/backendAddressPools/", Count: 1, LROResult: "Canceled"}); err != nil {
		t.Fatal(err)
	}
	pp, err := env.pools.BeginCreateOrUpdate(ctx, "rg", "kubernetes", "kubernetes", armnetwork.BackendAddressPool{
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp.Done() {
		t.Fatal("a write whose operation will be canceled must be polled")
	}
	_, err = pp.PollUntilDone(ctx, pollOpts)
	if code, _ := errorCode(err); code != "Canceled" {
		t.Fatalf("canceled LRO: %v", err)
	}
	lb, err := env.lbs.Get(ctx, "rg", "kubernetes", nil)
	if err != nil || *lb.Properties.ProvisioningState != armnetwork.ProvisioningStateFailed {
		t.Fatalf("LB after canceled pool write: %v", err)
	}
}

func TestLatencyUsesClock(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	h := newHandlerEnv(t, Options{Clock: fc})
	h.emu.SetLatency(2 * time.Second)
	if _, err := h.emu.AddFault(Fault{Method: "GET", Count: 1, Latency: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		done <- h.do(t, http.MethodGet, rgPath("rg"), "", nil).Code
	}()
	waitFor(t, fc.HasWaiters)
	fc.Step(4 * time.Second)
	select {
	case <-done:
		t.Fatal("answered before latency + fault latency elapsed")
	default:
	}
	waitFor(t, fc.HasWaiters)
	fc.Step(time.Second)
	select {
	case code := <-done:
		if code != http.StatusNotFound {
			t.Fatalf("status %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request did not finish after the latency elapsed")
	}
	if recs := h.emu.Requests(); recs[len(recs)-1].Duration != 5*time.Second || !recs[len(recs)-1].Faulted {
		t.Fatalf("recorded %+v", recs[len(recs)-1])
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met before the deadline")
		case <-time.After(time.Millisecond):
		}
	}
}

func TestSDKRequestLogAndReset(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	seedNetwork(t, env, "rg")
	var aad, arm int
	for _, r := range env.emu.Requests() {
		switch r.Kind {
		case "aad":
			aad++
		case "arm":
			arm++
			if r.Status == 0 || r.Method == "" || !strings.HasPrefix(r.Path, "/subscriptions/") {
				t.Fatalf("bad record %+v", r)
			}
		}
	}
	if aad == 0 || arm < 4 {
		t.Fatalf("request log counts aad=%d arm=%d", aad, arm)
	}
	env.emu.ResetRequests()
	if _, err := env.lbs.Get(ctx, "rg", "kubernetes", nil); err != nil {
		t.Fatal(err)
	}
	recs := env.emu.Requests()
	if len(recs) != 1 || recs[0].Method != "GET" || recs[0].Status != 200 || !strings.HasSuffix(recs[0].Path, "/loadBalancers/kubernetes") {
		t.Fatalf("after ResetRequests: %+v", recs)
	}
	if _, err := env.emu.AddFault(Fault{Status: 500}); err != nil {
		t.Fatal(err)
	}
	env.emu.Reset()
	if len(env.emu.Faults()) != 0 || len(env.emu.Requests()) != 0 {
		t.Fatal("Reset kept faults or the request log")
	}
	_, err := env.lbs.Get(ctx, "rg", "kubernetes", nil)
	if code, _ := errorCode(err); code != "ResourceGroupNotFound" {
		t.Fatalf("after Reset: %v", err)
	}
}
