package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/metrics"
)

// fakeARM is a minimal ARM stand-in for the mechanics this package owns
// (headers, LRO waiting, paging, labels). Behaviour fidelity is tested
// against internal/emulator.
type fakeARM struct {
	srv *httptest.Server
	mu  sync.Mutex
	log []fakeRecord
}

type fakeRecord struct {
	method, path, ifMatch, userAgent string
}

const lbPath = "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/loadBalancers"

func newFakeARM(t *testing.T) *fakeARM {
	f := &fakeARM{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeARM) records() []fakeRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRecord(nil), f.log...)
}

func (f *fakeARM) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.log = append(f.log, fakeRecord{method: r.Method, path: r.URL.Path, ifMatch: r.Header.Get("If-Match"), userAgent: r.UserAgent()})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	writeErr := func(status int, code string) {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%q,"message":"fake"}}`, code)
	}
	lb := func(name string) string {
		return fmt.Sprintf(`{"name":%q,"id":"%s/%s","etag":"W/\"2\"","properties":{"provisioningState":"Succeeded"}}`, name, lbPath, name)
	}
	switch {
	case r.URL.Path == "/operations/1":
		fmt.Fprint(w, `{"status":"Succeeded"}`)
	case r.URL.Path == "/locations/1":
		w.WriteHeader(http.StatusOK)
	case r.URL.Path == lbPath && r.Method == http.MethodGet:
		if r.URL.Query().Get("page") == "2" {
			fmt.Fprintf(w, `{"value":[%s]}`, lb("lb3"))
			return
		}
		fmt.Fprintf(w, `{"value":[%s,%s],"nextLink":"%s%s?api-version=2025-05-01&page=2"}`, lb("lb1"), lb("lb2"), f.srv.URL, lbPath)
	case r.URL.Path == lbPath+"/missing":
		writeErr(http.StatusNotFound, "ResourceNotFound")
	case strings.HasPrefix(r.URL.Path, lbPath+"/") && r.Method == http.MethodGet:
		fmt.Fprint(w, lb(strings.TrimPrefix(r.URL.Path, lbPath+"/")))
	case strings.HasPrefix(r.URL.Path, lbPath+"/") && r.Method == http.MethodPut:
		if m := r.Header.Get("If-Match"); m != "" && m != `W/"1"` {
			writeErr(http.StatusPreconditionFailed, "PreconditionFailed")
			return
		}
		w.Header().Set("Azure-AsyncOperation", f.srv.URL+"/operations/1")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"name":%q,"properties":{"provisioningState":"Updating"}}`, strings.TrimPrefix(r.URL.Path, lbPath+"/"))
	case strings.HasPrefix(r.URL.Path, lbPath+"/") && r.Method == http.MethodDelete:
		w.Header().Set("Location", f.srv.URL+"/locations/1")
		w.WriteHeader(http.StatusAccepted)
	default:
		writeErr(http.StatusBadRequest, "Unexpected")
	}
}

func fakeConfig(endpoint string) *config.Config {
	return &config.Config{
		SubscriptionID: "sub",
		AuthConfig: config.AuthConfig{
			TenantID: "tenant", AADClientID: "client", AADClientSecret: "unused-secret",
			ResourceManagerEndpoint: endpoint, ActiveDirectoryAuthorityHost: endpoint,
		},
	}
}

func newFakeClients(t *testing.T, f *fakeARM, cfg *config.Config, source string) *Clients {
	t.Helper()
	c, err := NewClients(context.Background(), cfg, ClientOptions{
		Clock:         newFakeClock(),
		Transport:     f.srv.Client(),
		Credential:    staticCredential{},
		PollFrequency: 5 * time.Millisecond,
		RetryDelay:    time.Millisecond,
		Source:        source,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestLoadBalancerClientAgainstFakeARM(t *testing.T) {
	f := newFakeARM(t)
	src := uniqueSource("test-fake-arm")
	c := newFakeClients(t, f, fakeConfig(f.srv.URL), src)
	ctx := context.Background()

	got, err := c.LoadBalancer.Get(ctx, "rg", "lb1")
	if err != nil || ptr.Deref(got.Name, "") != "lb1" {
		t.Fatalf("Get = %v, %v", got, err)
	}

	all, err := c.LoadBalancer.List(ctx, "rg")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lb := range all {
		names = append(names, ptr.Deref(lb.Name, ""))
	}
	if strings.Join(names, ",") != "lb1,lb2,lb3" {
		t.Errorf("List over two pages = %v", names)
	}

	_, err = c.LoadBalancer.Get(ctx, "rg", "missing")
	if Classify(err) != ClassStale {
		t.Errorf("missing LB: Classify(%v) = %v, want Stale", err, Classify(err))
	}
	if !strings.Contains(err.Error(), "azure loadBalancer get rg/missing") {
		t.Errorf("error does not name the call and object: %v", err)
	}

	// Write with etag: If-Match on the PUT only, LRO awaited, final GET result.
	before := len(f.records())
	res, err := c.LoadBalancer.CreateOrUpdate(ctx, "rg", "lb1", armnetwork.LoadBalancer{Location: to.Ptr("eastus")}, `W/"1"`)
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(res.Properties.ProvisioningState, "") != "Succeeded" || ptr.Deref(res.Etag, "") != `W/"2"` {
		t.Errorf("CreateOrUpdate returned %+v, want the final resource", res)
	}
	writes := f.records()[before:]
	if len(writes) < 3 {
		t.Fatalf("write issued %d requests, want PUT + poll + final GET: %+v", len(writes), writes)
	}
	if writes[0].method != http.MethodPut || writes[0].ifMatch != `W/"1"` {
		t.Errorf("first request %+v, want PUT with If-Match", writes[0])
	}
	for _, r := range writes[1:] {
		if r.ifMatch != "" {
			t.Errorf("poll %+v carries If-Match", r)
		}
	}

	// Without etag: no If-Match at all.
	before = len(f.records())
	if _, err := c.LoadBalancer.CreateOrUpdate(ctx, "rg", "lb9", armnetwork.LoadBalancer{}, ""); err != nil {
		t.Fatal(err)
	}
	if r := f.records()[before]; r.ifMatch != "" {
		t.Errorf("PUT without etag sent If-Match %q", r.ifMatch)
	}

	// Stale etag: 412 surfaces and classifies as conflict.
	_, err = c.LoadBalancer.CreateOrUpdate(ctx, "rg", "lb1", armnetwork.LoadBalancer{}, `W/"0"`)
	if Classify(err) != ClassConflict {
		t.Errorf("stale etag: Classify(%v) = %v, want Conflict", err, Classify(err))
	}

	if err := c.LoadBalancer.Delete(ctx, "rg", "lb1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}

	// API metrics: labels per operation, polls labelled separately.
	counts := map[string]int{}
	for _, r := range []string{"loadbalancer_get", "loadbalancer_list", "loadbalancer_create_or_update",
		"loadbalancer_create_or_update_poll", "loadbalancer_delete", "loadbalancer_delete_poll"} {
		vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, metrics.APIRequestDurationName,
			map[string]string{"source": src, "request": r})
		if err != nil {
			t.Fatal(err)
		}
		counts[r] = int(vec.GetAggregatedSampleCount())
	}
	want := map[string]int{"loadbalancer_get": 2, "loadbalancer_list": 2, "loadbalancer_create_or_update": 3,
		"loadbalancer_create_or_update_poll": 4, "loadbalancer_delete": 1, "loadbalancer_delete_poll": 1}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("api_request_duration count for %s = %d, want %d (all: %v)", k, counts[k], v, counts)
		}
	}
	codes, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, metrics.APIRequestErrorsName,
		map[string]string{"source": src}, "code")
	if err != nil {
		t.Fatal(err)
	}
	if codes["ResourceNotFound"] != 1 || codes["PreconditionFailed"] != 1 {
		t.Errorf("api_request_errors by code = %v", codes)
	}
}

func TestClientRateLimitRejectsWithoutSending(t *testing.T) {
	f := newFakeARM(t)
	cfg := fakeConfig(f.srv.URL)
	cfg.RateLimitConfig = config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 1, CloudProviderRateLimitBucket: 2,
		CloudProviderRateLimitQPSWrite: 1, CloudProviderRateLimitBucketWrite: 1}
	cfg.PublicIPAddressRateLimit = &config.RateLimitConfig{CloudProviderRateLimit: false}
	src := uniqueSource("test-ratelimit-client")
	c := newFakeClients(t, f, cfg, src)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := c.LoadBalancer.Get(ctx, "rg", "lb1"); err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
	}
	sent := len(f.records())
	_, err := c.LoadBalancer.Get(ctx, "rg", "lb1")
	var rle *RateLimitedError
	if !errors.As(err, &rle) || rle.Client != ClientLoadBalancer || rle.Write {
		t.Fatalf("3rd get: %v, want read RateLimitedError for loadBalancer", err)
	}
	if Classify(err) != ClassThrottled {
		t.Errorf("Classify = %v", Classify(err))
	}
	if _, ok := ThrottleRetryAfter(err); !ok {
		t.Error("ThrottleRetryAfter not available for a rate-limited call")
	}
	// The backend pool client has its own buckets (same stanza).
	if _, err := c.BackendPool.List(ctx, "rg", "lb1"); errors.As(err, &rle) {
		t.Errorf("backend pool rejected by the load balancer's bucket: %v", err)
	}
	if len(f.records()) == sent {
		t.Error("backend pool call did not reach ARM")
	}
	sent = len(f.records())
	if _, err := c.LoadBalancer.Get(ctx, "rg", "lb1"); err == nil {
		t.Error("4th get accepted")
	}
	if n := len(f.records()); n != sent {
		t.Errorf("rejected call reached ARM (%d -> %d requests)", sent, n)
	}
	testutil.AssertVectorCount(t, metrics.APIRequestRateLimitedName,
		map[string]string{"source": src, "request": "loadbalancer_get"}, 2)
}

func TestNewClientsErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  *config.Config
		want string
	}{
		{"nil config", nil, "nil config"},
		{"no subscription", &config.Config{}, "subscriptionId is required"},
		{"bad cloud", &config.Config{SubscriptionID: "s", AuthConfig: config.AuthConfig{Cloud: "Mars"}}, `cloud "Mars"`},
		{"bad CA file", &config.Config{SubscriptionID: "s", AuthConfig: config.AuthConfig{CACertFile: "/nonexistent/ca.pem", AADClientSecret: "x", TenantID: "t", AADClientID: "c"}}, "caCertFile"},
		{"no credential", &config.Config{SubscriptionID: "s"}, "no Azure credential configured"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClients(context.Background(), tc.cfg, ClientOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewClients = %v, %v; want error containing %q", c, err, tc.want)
			}
		})
	}
}

func TestClientsString(t *testing.T) {
	f := newFakeARM(t)
	cfg := fakeConfig(f.srv.URL)
	cfg.AADClientSecret = "very-secret-value"
	c, err := NewClients(context.Background(), cfg, ClientOptions{Transport: f.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, s := range []string{c.String(), fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", *c)} {
		if strings.Contains(s, "very-secret-value") {
			t.Errorf("formatted clients leak the secret: %s", s)
		}
	}
	if c.SubscriptionID() != "sub" || c.Credential() == nil || c.ARMClientOptions("natGateway") == nil {
		t.Error("accessors")
	}
}

func TestBaseWrapRedactsSecret(t *testing.T) {
	b := &base{client: ClientLoadBalancer, secrets: []string{"s3cr3t-value"}}
	inner := &ThrottleError{RetryAfter: t0}
	err := b.wrap(opGet, "rg/lb", &wrapWithText{msg: "token endpoint said: bad secret s3cr3t-value", err: inner})
	if strings.Contains(err.Error(), "s3cr3t-value") {
		t.Errorf("secret in error: %v", err)
	}
	if !strings.Contains(err.Error(), "azure loadBalancer get rg/lb") {
		t.Errorf("error does not name the call: %v", err)
	}
	if at, ok := ThrottleRetryAfter(err); !ok || !at.Equal(t0) {
		t.Error("redaction broke errors.As")
	}
}

// TestConcurrentCalls drives one client from many goroutines, for the race
// detector and for exact token accounting.
func TestConcurrentCalls(t *testing.T) {
	f := newFakeARM(t)
	cfg := fakeConfig(f.srv.URL)
	cfg.RateLimitConfig = config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 1000, CloudProviderRateLimitBucket: 50}
	src := uniqueSource("test-concurrent")
	c := newFakeClients(t, f, cfg, src)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				var err error
				if i%4 == 0 {
					_, err = c.LoadBalancer.CreateOrUpdate(context.Background(), "rg", "lb1", armnetwork.LoadBalancer{}, "")
				} else {
					_, err = c.LoadBalancer.Get(context.Background(), "rg", "lb1")
				}
				if err != nil && Classify(err) != ClassThrottled {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("unexpected error: %v", err)
	}
	// With a frozen clock each bucket admits exactly 50: 120 reads -> 70
	// rejected; 40 writes (own bucket of 50) -> none rejected.
	testutil.AssertVectorCount(t, metrics.APIRequestRateLimitedName, map[string]string{"source": src, "request": "loadbalancer_get"}, 70)
	testutil.AssertVectorCount(t, metrics.APIRequestRateLimitedName, map[string]string{"source": src, "request": "loadbalancer_create_or_update"}, 0)
}
