package azure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// armError builds the *azcore.ResponseError the SDK returns for an ARM error
// response.
func armError(status int, code string) error {
	body := `{"error":{"code":"` + code + `","message":"test"}}`
	req, _ := http.NewRequest(http.MethodGet, "https://arm.test/x", nil)
	return runtime.NewResponseError(&http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     http.Header{},
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	})
}

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("azure loadBalancer get rg/lb: %w", err) }
	tests := []struct {
		name string
		err  error
		want ErrorClass
	}{
		{"nil", nil, ClassNone},
		{"404 ResourceNotFound", armError(404, "ResourceNotFound"), ClassStale},
		{"404 NotFound", armError(404, "NotFound"), ClassStale},
		{"404 ResourceGroupNotFound", armError(404, "ResourceGroupNotFound"), ClassStale},
		{"404 ParentResourceNotFound", armError(404, "ParentResourceNotFound"), ClassStale},
		{"404 without code", armError(404, ""), ClassStale},
		{"stale code on other status", armError(400, "ResourceNotFound"), ClassStale},
		{"code case-insensitive", armError(404, "resourcenotfound"), ClassStale},
		{"wrapped 404", wrap(armError(404, "ResourceNotFound")), ClassStale},
		{"ThrottleError", &ThrottleError{RetryAfter: t0}, ClassThrottled},
		{"wrapped ThrottleError", wrap(&ThrottleError{}), ClassThrottled},
		{"sentinel", ErrTooManyRequest, ClassThrottled},
		{"raw ARM 429", armError(429, "SubscriptionRequestsThrottled"), ClassThrottled},
		{"429 beats conflict code", armError(429, "AnotherOperationInProgress"), ClassThrottled},
		{"RateLimitedError", &RateLimitedError{Client: "loadBalancer", Write: true}, ClassThrottled},
		{"wrapped RateLimitedError", wrap(&RateLimitedError{Client: "loadBalancer"}), ClassThrottled},
		{"409 Conflict", armError(409, "Conflict"), ClassConflict},
		{"409 AnotherOperationInProgress", armError(409, "AnotherOperationInProgress"), ClassConflict},
		{"412 PreconditionFailed", armError(412, "PreconditionFailed"), ClassConflict},
		{"412 no code", armError(412, ""), ClassConflict},
		{"LRO CanceledAndSuperseded (200)", armError(200, "CanceledAndSupersededDueToAnotherOperation"), ClassConflict},
		{"LRO RetryableError (200)", armError(200, "RetryableError"), ClassConflict},
		{"408", armError(408, "RequestTimeout"), ClassRetriedBySDK},
		{"500", armError(500, "InternalServerError"), ClassRetriedBySDK},
		{"502", armError(502, ""), ClassRetriedBySDK},
		{"503", armError(503, "ServiceUnavailable"), ClassRetriedBySDK},
		{"504", armError(504, "GatewayTimeout"), ClassRetriedBySDK},
		{"wrapped 503", wrap(armError(503, "")), ClassRetriedBySDK},
		{"501 not retried by SDK", armError(501, ""), ClassOther},
		{"400 InvalidRequestFormat", armError(400, "InvalidRequestFormat"), ClassOther},
		{"403", armError(403, "AuthorizationFailed"), ClassOther},
		{"LRO Failed (200)", armError(200, "InternalError"), ClassOther},
		{"context.Canceled", context.Canceled, ClassCanceled},
		{"context.DeadlineExceeded", wrap(context.DeadlineExceeded), ClassCanceled},
		{"plain error", errors.New("boom"), ClassOther},
		{"marked plain error", MarkRetriable(errors.New("boom")), ClassOther},
		{"nil *ResponseError", (*azcore.ResponseError)(nil), ClassOther},
		{"ResponseError without RawResponse", &azcore.ResponseError{StatusCode: 412}, ClassConflict},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.err); got != tc.want {
				t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorClassString(t *testing.T) {
	for c, want := range map[ErrorClass]string{
		ClassNone: "None", ClassStale: "Stale", ClassThrottled: "Throttled", ClassConflict: "Conflict",
		ClassRetriedBySDK: "RetriedBySDK", ClassCanceled: "Canceled", ClassOther: "Other", ErrorClass(99): "ErrorClass(99)",
		ErrorClass(-1): "ErrorClass(-1)",
	} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
}

func TestThrottleRetryAfter(t *testing.T) {
	at := t0.Add(time.Minute)
	tests := []struct {
		name   string
		err    error
		want   time.Time
		wantOK bool
	}{
		{"nil", nil, time.Time{}, false},
		{"ThrottleError", &ThrottleError{RetryAfter: at}, at, true},
		{"wrapped ThrottleError", fmt.Errorf("x: %w", &ThrottleError{RetryAfter: at}), at, true},
		{"RateLimitedError", &RateLimitedError{RetryAfter: at}, at, true},
		{"raw 429", armError(429, "SubscriptionRequestsThrottled"), time.Time{}, false},
		{"sentinel only", ErrTooManyRequest, time.Time{}, false},
		{"other", errors.New("x"), time.Time{}, false},
	}
	for _, tc := range tests {
		got, ok := ThrottleRetryAfter(tc.err)
		if ok != tc.wantOK || !got.Equal(tc.want) {
			t.Errorf("%s: ThrottleRetryAfter = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestMarkRetriable(t *testing.T) {
	base := errors.New("dial tcp: i/o timeout")
	if MarkRetriable(nil) != nil {
		t.Error("MarkRetriable(nil) != nil")
	}
	if IsMarkedRetriable(base) {
		t.Error("unmarked error reported as marked")
	}
	m := MarkRetriable(base)
	if !IsMarkedRetriable(m) || !IsMarkedRetriable(fmt.Errorf("outer: %w", m)) {
		t.Error("marked error (or a wrapper of it) not reported as marked")
	}
	if m.Error() != base.Error() {
		t.Errorf("marking changed the text: %q", m.Error())
	}
	if !errors.Is(m, base) {
		t.Error("errors.Is through the mark failed")
	}
}

func TestRetriable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"throttled", &ThrottleError{}, true},
		{"rate limited", &RateLimitedError{}, true},
		{"conflict", armError(409, "Conflict"), true},
		{"precondition", armError(412, "PreconditionFailed"), true},
		{"stale", armError(404, "NotFound"), false},
		{"retried by SDK", armError(503, ""), false},
		{"other", errors.New("x"), false},
		{"marked other", MarkRetriable(errors.New("x")), true},
		{"marked SDK-retried", MarkRetriable(armError(500, "")), true},
		{"marked canceled", MarkRetriable(context.Canceled), false},
	}
	for _, tc := range tests {
		if got := Retriable(tc.err); got != tc.want {
			t.Errorf("%s: Retriable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(404, "ResourceNotFound", `{"error":{"code":"ResourceNotFound"}}`, true, true)
	f.Add(429, "", `not json`, false, true)
	f.Add(0, "\x00", ``, true, false)
	f.Add(-1, "PreconditionFailed", `{"error":"x"}`, true, true)
	f.Add(200, "RetryableError", `<Code>Busy</Code>`, false, false)
	f.Fuzz(func(t *testing.T, status int, code, body string, withResp, wrapIt bool) {
		re := &azcore.ResponseError{StatusCode: status, ErrorCode: code}
		if withResp {
			re.RawResponse = &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {body}},
				Body: io.NopCloser(strings.NewReader(body))}
		}
		var err error = re
		if wrapIt {
			err = fmt.Errorf("w: %w", MarkRetriable(err))
		}
		c := Classify(err)
		if c < ClassNone || c > ClassOther {
			t.Fatalf("Classify returned out-of-range class %d", c)
		}
		if c == ClassNone {
			t.Fatal("non-nil error classified ClassNone")
		}
		_ = Retriable(err)
		_, _ = ThrottleRetryAfter(err)
		_ = c.String()
	})
}
