package azure

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"

	"github.com/azlb/azlb/internal/metrics"
)

// userAgent starts the User-Agent of every request, reads and writes
// alike, before the SDK's own telemetry.
func TestUserAgentStartsEveryRequest(t *testing.T) {
	f := newFakeARM(t)
	cfg := fakeConfig(f.srv.URL)
	cfg.UserAgent = "azlb-replica-a"
	c := newFakeClients(t, f, cfg, uniqueSource("test-user-agent"))
	ctx := context.Background()
	if _, err := c.LoadBalancer.Get(ctx, "rg", "lb1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoadBalancer.CreateOrUpdate(ctx, "rg", "lb1", armnetwork.LoadBalancer{}, ""); err != nil {
		t.Fatal(err)
	}
	recs := f.records()
	if len(recs) < 3 {
		t.Fatalf("%d requests, want a GET, a PUT and its poll", len(recs))
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.userAgent, "azlb-replica-a ") || !strings.Contains(r.userAgent, "azsdk-go-") {
			t.Errorf("%s %s: User-Agent %q, want azure.json's userAgent then the SDK's", r.method, r.path, r.userAgent)
		}
	}
}

// A closed fence refuses every write before it is sent, and never reads:
// the error names the request and the fence's reason, and the SDK does not
// retry it.
func TestWriteFence(t *testing.T) {
	f := newFakeARM(t)
	src := uniqueSource("test-fence")
	c := newFakeClients(t, f, fakeConfig(f.srv.URL), src)
	ctx := context.Background()
	var calls atomic.Int32
	reason := errors.New("lease renewed 12s ago, renew deadline 10s")
	c.SetWriteFence(func() error {
		calls.Add(1)
		return reason
	})
	if _, err := c.LoadBalancer.Get(ctx, "rg", "lb1"); err != nil {
		t.Fatalf("a read must pass a closed fence: %v", err)
	}
	_, err := c.LoadBalancer.CreateOrUpdate(ctx, "rg", "lb1", armnetwork.LoadBalancer{}, "")
	if !errors.Is(err, ErrWriteFenced) || !errors.Is(err, reason) || !strings.Contains(err.Error(), "PUT") {
		t.Fatalf("write through a closed fence: %v", err)
	}
	if err := c.LoadBalancer.Delete(ctx, "rg", "lb1"); !errors.Is(err, ErrWriteFenced) {
		t.Fatalf("delete through a closed fence: %v", err)
	}
	for _, r := range f.records() {
		if r.method != "GET" {
			t.Errorf("a fenced write reached ARM: %s %s", r.method, r.path)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("fence asked %d times, want once per write", n)
	}
	if Classify(err) != ClassOther {
		t.Errorf("fenced write classified %v, want final (other)", Classify(err))
	}
	fenced, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, metrics.APIRequestErrorsName,
		map[string]string{"source": src, "code": "fenced"}, "request")
	if err != nil {
		t.Fatal(err)
	}
	if fenced["loadbalancer_create_or_update"] != 1 || fenced["loadbalancer_delete"] != 1 {
		t.Errorf("api_request_errors{code=fenced} by request = %v, want each refusal counted once", fenced)
	}

	c.SetWriteFence(func() error { return nil })
	if _, err := c.LoadBalancer.CreateOrUpdate(ctx, "rg", "lb1", armnetwork.LoadBalancer{}, ""); err != nil {
		t.Fatalf("open fence: %v", err)
	}
	c.SetWriteFence(nil)
	if err := c.LoadBalancer.Delete(ctx, "rg", "lb1"); err != nil {
		t.Fatalf("no fence: %v", err)
	}
}

// failingTransport answers every request 500 and counts them.
type failingTransport struct{ n atomic.Int32 }

func (f *failingTransport) Do(r *http.Request) (*http.Response, error) {
	f.n.Add(1)
	return &http.Response{StatusCode: http.StatusInternalServerError, Request: r, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(`{"error":{"code":"InternalServerError","message":"fake"}}`))}, nil
}

// The fence is asked before every attempt, not once per call: a write that
// was admitted and failed is not retried once the fence has closed (a
// replica frozen during the SDK's retry delay wakes with a stale lease).
func TestWriteFenceIsAskedPerAttempt(t *testing.T) {
	tr := &failingTransport{}
	c, err := NewClients(context.Background(), fakeConfig("https://arm.invalid"), ClientOptions{
		Clock: newFakeClock(), Transport: tr, Credential: staticCredential{},
		PollFrequency: 5 * time.Millisecond, RetryDelay: time.Millisecond, Source: uniqueSource("test-fence-attempt"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var asked atomic.Int32
	c.SetWriteFence(func() error {
		if asked.Add(1) == 1 {
			return nil
		}
		return errors.New("lease renewed 9s ago, renew deadline 7s")
	})
	_, err = c.LoadBalancer.CreateOrUpdate(context.Background(), "rg", "lb1", armnetwork.LoadBalancer{}, "")
	if !errors.Is(err, ErrWriteFenced) {
		t.Fatalf("write whose retry met a closed fence: %v, want ErrWriteFenced", err)
	}
	if n := tr.n.Load(); n != 1 {
		t.Errorf("%d attempts reached ARM, want 1 (the retry must be fenced)", n)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("fence asked %d times, want 2 (once per attempt)", n)
	}
}
