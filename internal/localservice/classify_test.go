package localservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azlb/azlb/internal/azure"
)

func armErr(status int, code string) error {
	return &poolError{op: "update", lb: "lb", pool: "ns-svc", err: fmt.Errorf("azure backendPool create_or_update rg/lb/ns-svc: %w",
		&azcore.ResponseError{StatusCode: status, ErrorCode: code})}
}

func TestClassify(t *testing.T) {
	future := time.Unix(5000, 0)
	live := context.Background()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name  string
		ctx   context.Context
		err   error
		want  Outcome
		after time.Time
	}{
		{"404 NotFound", live, armErr(http.StatusNotFound, "NotFound"), OutcomeStale, time.Time{}},
		{"ResourceGroupNotFound", live, armErr(http.StatusNotFound, azure.CodeResourceGroupNotFound), OutcomeStale, time.Time{}},
		{"429 through the throttle policy", live, &poolError{err: &azure.ThrottleError{RetryAfter: future}}, OutcomeRetriable, future},
		{"429 raw", live, armErr(http.StatusTooManyRequests, "TooManyRequests"), OutcomeRetriable, time.Time{}},
		{"client-side rate limit", live, &azure.RateLimitedError{Client: "backendPool", RetryAfter: future}, OutcomeRetriable, future},
		{"409", live, armErr(http.StatusConflict, "Conflict"), OutcomeRetriable, time.Time{}},
		{"412", live, armErr(http.StatusPreconditionFailed, ""), OutcomeRetriable, time.Time{}},
		{"LRO RetryableError", live, armErr(http.StatusOK, azure.CodeRetryableError), OutcomeRetriable, time.Time{}},
		{"500 retried by the SDK", live, armErr(http.StatusInternalServerError, "InternalServerError"), OutcomeTerminal, time.Time{}},
		{"503 retried by the SDK", live, armErr(http.StatusServiceUnavailable, ""), OutcomeTerminal, time.Time{}},
		{"400", live, armErr(http.StatusBadRequest, "InvalidResourceReference"), OutcomeTerminal, time.Time{}},
		{"plain error", live, errors.New("boom"), OutcomeTerminal, time.Time{}},
		{"timeout-like non-ARM error", live, fmt.Errorf("dial: %w", errors.New("i/o timeout")), OutcomeTerminal, time.Time{}},
		{"marked retriable", live, fmt.Errorf("wrapped: %w", azure.MarkRetriable(errors.New("boom"))), OutcomeRetriable, time.Time{}},
		{"deadline, updater running", live, fmt.Errorf("x: %w", context.DeadlineExceeded), OutcomeTerminal, time.Time{}},
		{"canceled, updater running", live, context.Canceled, OutcomeTerminal, time.Time{}},
		{"canceled, updater stopping", done, context.Canceled, OutcomeShutdown, time.Time{}},
		{"409, updater stopping", done, armErr(http.StatusConflict, ""), OutcomeShutdown, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, after := Classify(tc.ctx, tc.err)
			if got != tc.want || !after.Equal(tc.after) {
				t.Fatalf("Classify = %v, %v; want %v, %v", got, after, tc.want, tc.after)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{OutcomeStale: "Stale", OutcomeRetriable: "Retriable", OutcomeTerminal: "Terminal", OutcomeShutdown: "Shutdown", 42: "Outcome(42)"} {
		if o.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(o), o.String(), want)
		}
	}
}

func TestEventError(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"ARM error: status and code, one line", armErr(http.StatusConflict, "AnotherOperationInProgress"),
			"update backend pool ns-svc of load balancer lb: ARM answered HTTP 409 (AnotherOperationInProgress)"},
		{"ARM error without code", armErr(http.StatusBadGateway, ""), "update backend pool ns-svc of load balancer lb: ARM answered HTTP 502"},
		{"multi-line error: first line", errors.New("first\nsecond"), "first"},
		{"nil", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := eventError(tc.err); got != tc.want {
				t.Fatalf("eventError = %q, want %q", got, tc.want)
			}
		})
	}
	long := eventError(errors.New(strings.Repeat("é", 600)))
	if len(long) > maxEventErrorLen+3 || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "é") {
		t.Fatalf("long error not truncated on a rune boundary: %d bytes", len(long))
	}
	if strings.ContainsRune(long, '\uFFFD') {
		t.Fatal("truncation split a rune")
	}
}
