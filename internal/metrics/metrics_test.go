package metrics

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

// Metrics are process-global, so every test uses label values of its own.

func counterValue(t *testing.T, v float64, err error) float64 {
	t.Helper()
	if err != nil {
		t.Fatalf("reading metric: %v", err)
	}
	return v
}

func TestMetricContextObserve(t *testing.T) {
	resetMetrics()
	tests := []struct {
		name        string
		succeeded   bool
		elapsed     time.Duration
		wantFailure float64
	}{
		{name: "success", succeeded: true, elapsed: 3 * time.Second, wantFailure: 0},
		{name: "failure", succeeded: false, elapsed: 1500 * time.Millisecond, wantFailure: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			src := "test-observe-" + tc.name
			mc := NewMetricContextWithClock(clk, "services", "ensure_loadbalancer", "RG-One", "sub", src)
			clk.SetTime(clk.Now().Add(tc.elapsed))
			if got := mc.ObserveOperationWithResult(tc.succeeded, "service", "default/svc"); got != tc.elapsed {
				t.Fatalf("latency = %v, want %v", got, tc.elapsed)
			}
			labels := []string{"services_ensure_loadbalancer", "rg-one", "sub", src}
			sum, err := testutil.GetHistogramMetricValue(opDuration.WithLabelValues(labels...))
			if got := counterValue(t, sum, err); got != tc.elapsed.Seconds() {
				t.Errorf("op duration sum = %v, want %v", got, tc.elapsed.Seconds())
			}
			count, err := testutil.GetHistogramMetricCount(opDuration.WithLabelValues(labels...))
			if err != nil || count != 1 {
				t.Errorf("op duration count = %v (%v), want 1", count, err)
			}
			f, err := testutil.GetCounterMetricValue(opFailures.WithLabelValues(labels...))
			if got := counterValue(t, f, err); got != tc.wantFailure {
				t.Errorf("op failure count = %v, want %v", got, tc.wantFailure)
			}
		})
	}
}

func TestMetricContextRequestLabel(t *testing.T) {
	resetMetrics()
	tests := []struct {
		prefix, request, want string
	}{
		{"", "get", "get"},
		{"loadbalancer_adminstate", "update", "loadbalancer_adminstate_update"},
		{"services", "ensure_loadbalancer", "services_ensure_loadbalancer"},
	}
	for _, tc := range tests {
		mc := NewMetricContext(tc.prefix, tc.request, "rg", "sub", "src")
		if got := mc.Request(); got != tc.want {
			t.Errorf("Request(%q, %q) = %q, want %q", tc.prefix, tc.request, got, tc.want)
		}
	}
}

func TestMetricContextCounters(t *testing.T) {
	resetMetrics()
	mc := NewMetricContext("lb", "counters", "rg", "sub", "test-counters")
	mc.RateLimitedCount()
	mc.RateLimitedCount()
	mc.ThrottledCount()
	mc.CountFailedOperation()
	labels := []string{"lb_counters", "rg", "sub", "test-counters"}
	for _, c := range []struct {
		name string
		get  func() (float64, error)
		want float64
	}{
		{"ratelimited", func() (float64, error) {
			return testutil.GetCounterMetricValue(apiRateLimited.WithLabelValues(labels...))
		}, 2},
		{"throttled", func() (float64, error) {
			return testutil.GetCounterMetricValue(apiThrottled.WithLabelValues(labels...))
		}, 1},
		{"op failures", func() (float64, error) { return testutil.GetCounterMetricValue(opFailures.WithLabelValues(labels...)) }, 1},
	} {
		v, err := c.get()
		if got := counterValue(t, v, err); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAPIRequestHelpers(t *testing.T) {
	resetMetrics()
	r := APIRequest{Request: "loadbalancer_get", ResourceGroup: "MyRG", SubscriptionID: "sub", Source: "test-api-helpers"}
	ObserveAPIRequest(r, 250*time.Millisecond)
	ObserveAPIRequest(r, 750*time.Millisecond)
	CountAPIRequestError(r, "ResourceNotFound")
	CountAPIRequestError(r, "ResourceNotFound")
	CountAPIRequestError(r, "500")
	CountAPIRequestThrottled(r)
	CountAPIRequestRateLimited(r)

	base := []string{"loadbalancer_get", "myrg", "sub", "test-api-helpers"}
	sum, err := testutil.GetHistogramMetricValue(apiDuration.WithLabelValues(base...))
	if got := counterValue(t, sum, err); got != 1.0 {
		t.Errorf("api duration sum = %v, want 1", got)
	}
	got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, APIRequestErrorsName,
		map[string]string{LabelSource: "test-api-helpers"}, LabelCode)
	if err != nil {
		t.Fatal(err)
	}
	if got["ResourceNotFound"] != 2 || got["500"] != 1 || len(got) != 2 {
		t.Errorf("api errors by code = %v, want ResourceNotFound:2 500:1", got)
	}
	for name, want := range map[string]float64{APIRequestThrottledName: 1, APIRequestRateLimitedName: 1} {
		vals, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, name,
			map[string]string{LabelSource: "test-api-helpers"}, LabelRequest)
		if err != nil {
			t.Fatal(err)
		}
		if vals["loadbalancer_get"] != want {
			t.Errorf("%s = %v, want %v", name, vals, want)
		}
	}
}

func TestObserveLockWait(t *testing.T) {
	resetMetrics()
	ObserveLockWait("lbstore", "TestObserveLockWait", 250*time.Millisecond)
	ObserveLockWait("lbstore", "TestObserveLockWait", 2*time.Second)
	h := lockWait.WithLabelValues("lbstore", "TestObserveLockWait")
	sum, err := testutil.GetHistogramMetricValue(h)
	if got := counterValue(t, sum, err); got != 2.25 {
		t.Errorf("lock wait sum = %v, want 2.25", got)
	}
	count, err := testutil.GetHistogramMetricCount(h)
	if err != nil || count != 2 {
		t.Errorf("lock wait count = %d (%v), want 2", count, err)
	}
}

func TestLockWaitBuckets(t *testing.T) {
	resetMetrics()
	ObserveLockWait("buckets", "TestLockWaitBuckets", time.Millisecond)
	vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, LockWaitDurationName,
		map[string]string{LabelCaller: "TestLockWaitBuckets"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vec) != 1 {
		t.Fatalf("got %d histograms, want 1", len(vec))
	}
	buckets := vec[0].Bucket
	if len(buckets) != 14 {
		t.Fatalf("got %d buckets, want 14", len(buckets))
	}
	want := 0.001
	for i, b := range buckets {
		if diff := b.GetUpperBound() - want; diff > 1e-12 || diff < -1e-12 {
			t.Errorf("bucket %d upper bound = %v, want %v", i, b.GetUpperBound(), want)
		}
		want *= 2
	}
}

// TestSeriesNamesOnLegacyRegistry checks the exported series names and label
// sets as the /metrics endpoint would serve them.
func TestSeriesNamesOnLegacyRegistry(t *testing.T) {
	resetMetrics()
	r := APIRequest{Request: "names", ResourceGroup: "rg", SubscriptionID: "sub", Source: "test-names"}
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	NewMetricContextWithClock(clk, "", "names", "rg", "sub", "test-names").ObserveOperationWithResult(false)
	CountAPIRequestError(r, "Conflict")
	CountAPIRequestThrottled(r)
	CountAPIRequestRateLimited(r)

	expected := `
# HELP cloudprovider_azure_op_failure_count [ALPHA] Number of logical Azure operations that ended in a terminal failure.
# TYPE cloudprovider_azure_op_failure_count counter
cloudprovider_azure_op_failure_count{request="names",resource_group="rg",source="test-names",subscription_id="sub"} 1
# HELP cloudprovider_azure_api_request_errors [ALPHA] Number of ARM HTTP requests that failed, by ARM error code (or HTTP status, or 'transport', or 'fenced' for a write the leader fence refused).
# TYPE cloudprovider_azure_api_request_errors counter
cloudprovider_azure_api_request_errors{code="Conflict",request="names",resource_group="rg",source="test-names",subscription_id="sub"} 1
`
	// The names are fixed by the upstream Azure provider's dashboards, so
	// compare without promlint (which would ask for a _total suffix).
	if err := promtestutil.GatherAndCompare(filtered{"test-names"}, strings.NewReader(expected),
		OpFailureCountName, APIRequestErrorsName); err != nil {
		t.Error(err)
	}
	testutil.AssertHistogramTotalCount(t, OpDurationName, map[string]string{LabelSource: "test-names"}, 1)
	for _, name := range []string{APIRequestThrottledName, APIRequestRateLimitedName} {
		testutil.AssertVectorCount(t, name, map[string]string{LabelSource: "test-names"}, 1)
	}
}

func TestObserveLogsWithContextLogger(t *testing.T) {
	resetMetrics()
	var buf bytes.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", "4"); err != nil {
		t.Fatal(err)
	}
	if err := fs.Set("logtostderr", "false"); err != nil {
		t.Fatal(err)
	}
	klog.SetOutput(&buf)
	t.Cleanup(func() {
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(nil)
	})
	ctx := klog.NewContext(context.Background(), klog.Background().WithValues("controller", "adminstate"))
	mc := NewMetricContext("loadbalancer_adminstate", "update", "rg", "sub", "test-log").WithContext(ctx)
	mc.ObserveOperationWithResult(true, "node", "n1")
	klog.Flush()
	out := buf.String()
	for _, want := range []string{"Observed Azure operation", "controller=\"adminstate\"", "node=\"n1\"", "loadbalancer_adminstate_update"} {
		if !strings.Contains(out, want) {
			t.Errorf("log output %q lacks %q", out, want)
		}
	}
}
