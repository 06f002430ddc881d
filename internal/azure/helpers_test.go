package azure

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	clocktesting "k8s.io/utils/clock/testing"
)

// t0 is the fake clock's starting time (whole seconds, so RFC1123 round trips).
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// scriptedTransport answers requests with canned responses and records them.
type scriptedTransport struct {
	mu        sync.Mutex
	requests  []*http.Request
	responses []func(*http.Request) *http.Response // consumed in order; the last one repeats
}

func (s *scriptedTransport) Do(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	if len(s.responses) == 0 {
		return respond(req, http.StatusOK, nil, `{}`), nil
	}
	f := s.responses[0]
	if len(s.responses) > 1 {
		s.responses = s.responses[1:]
	}
	return f(req), nil
}

func (s *scriptedTransport) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func respond(req *http.Request, status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	if header.Get("Content-Type") == "" {
		header.Set("Content-Type", "application/json")
	}
	return &http.Response{
		StatusCode: status,
		Status:     http.StatusText(status),
		Header:     header,
		Body:       io.NopCloser(strings.NewReader(body)),
		Request:    req,
	}
}

func status(code int, kv ...string) func(*http.Request) *http.Response {
	return func(req *http.Request) *http.Response {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		body := `{}`
		if code >= 400 {
			body = `{"error":{"code":"` + http.StatusText(code) + `","message":"scripted"}}`
		}
		return respond(req, code, h, body)
	}
}

// throttled429 is ARM's throttling answer, with an optional Retry-After.
func throttled429(retryAfter string) func(*http.Request) *http.Response {
	return func(req *http.Request) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return respond(req, http.StatusTooManyRequests, h,
			`{"error":{"code":"SubscriptionRequestsThrottled","message":"Number of requests exceeded the limit"}}`)
	}
}

// newTestPipeline builds an SDK pipeline with the throttle (and metrics)
// policies inside the retry loop, as NewClients does.
func newTestPipeline(tr policy.Transporter, tp *throttlePolicy) runtime.Pipeline {
	return runtime.NewPipeline("azlbtest", "v0", runtime.PipelineOptions{}, &policy.ClientOptions{
		Transport:        tr,
		Retry:            policy.RetryOptions{MaxRetries: DefaultMaxRetries, StatusCodes: RetriableStatusCodes(), RetryDelay: time.Millisecond},
		PerRetryPolicies: []policy.Policy{tp, &metricsPolicy{clock: tp.clock, labels: tp.labels}},
		Telemetry:        policy.TelemetryOptions{Disabled: true},
	})
}

func doRequest(t *testing.T, pl runtime.Pipeline, method string) (*http.Response, error) {
	t.Helper()
	req, err := runtime.NewRequest(context.Background(), method, "https://arm.test/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb")
	if err != nil {
		t.Fatal(err)
	}
	return pl.Do(req)
}

func newFakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(t0) }

// staticCredential hands out a fixed token without any network call.
type staticCredential struct{}

func (staticCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "test-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

var sourceSeq atomic.Int64

// uniqueSource returns a metrics source label no other test run used, so
// metric assertions hold whatever ran before (the registry is global;
// go test -count=N reruns tests in one process).
func uniqueSource(name string) string {
	return fmt.Sprintf("%s-%d", name, sourceSeq.Add(1))
}
