package azure

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/azlb/azlb/internal/config"
)

func TestRetriableStatusCodes(t *testing.T) {
	got := RetriableStatusCodes()
	if want := []int{408, 500, 502, 503, 504}; !slices.Equal(got, want) {
		t.Fatalf("RetriableStatusCodes() = %v, want %v", got, want)
	}
	if slices.Contains(got, http.StatusTooManyRequests) {
		t.Error("429 must not be retried by the SDK")
	}
	got[0] = 999
	if RetriableStatusCodes()[0] != 408 {
		t.Error("RetriableStatusCodes returned the shared slice")
	}
}

func TestRetryOptions(t *testing.T) {
	tests := []struct {
		name      string
		backoff   config.BackoffConfig
		override  time.Duration
		wantMax   int32
		wantDelay time.Duration
	}{
		{"defaults", config.BackoffConfig{}, 0, 3, 0},
		{"backoff off ignores retries and duration", config.BackoffConfig{CloudProviderBackoffRetries: 7, CloudProviderBackoffDuration: 9}, 0, 3, 0},
		{"backoff on overrides", config.BackoffConfig{CloudProviderBackoff: true, CloudProviderBackoffRetries: 6, CloudProviderBackoffDuration: 5}, 0, 6, 5 * time.Second},
		{"backoff on with retries 0 keeps SDK default", config.BackoffConfig{CloudProviderBackoff: true}, 0, 3, 0},
		{"negative retries ignored", config.BackoffConfig{CloudProviderBackoff: true, CloudProviderBackoffRetries: -2}, 0, 3, 0},
		{"exponent and jitter unused", config.BackoffConfig{CloudProviderBackoff: true, CloudProviderBackoffExponent: 4, CloudProviderBackoffJitter: 2}, 0, 3, 0},
		{"test override wins", config.BackoffConfig{CloudProviderBackoff: true, CloudProviderBackoffDuration: 5}, time.Millisecond, 3, time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := retryOptions(tc.backoff, tc.override)
			if o.MaxRetries != tc.wantMax || o.RetryDelay != tc.wantDelay {
				t.Errorf("MaxRetries=%d RetryDelay=%v, want %d %v", o.MaxRetries, o.RetryDelay, tc.wantMax, tc.wantDelay)
			}
			if !slices.Equal(o.StatusCodes, RetriableStatusCodes()) {
				t.Errorf("StatusCodes = %v", o.StatusCodes)
			}
			if o.ShouldRetry != nil {
				t.Error("ShouldRetry must stay nil so StatusCodes decide")
			}
		})
	}
}

// TestSDKRetryBehaviour runs statuses through the real SDK retry policy with
// our options: RetriableStatusCodes get 1 + MaxRetries attempts, 429 and
// others exactly one.
func TestSDKRetryBehaviour(t *testing.T) {
	tests := []struct {
		status       int
		wantAttempts int
		wantClass    ErrorClass
	}{
		{500, 4, ClassRetriedBySDK},
		{502, 4, ClassRetriedBySDK},
		{503, 4, ClassRetriedBySDK},
		{504, 4, ClassRetriedBySDK},
		{408, 4, ClassRetriedBySDK},
		{429, 1, ClassThrottled},
		{409, 1, ClassConflict},
		{412, 1, ClassConflict},
		{404, 1, ClassStale},
		{501, 1, ClassOther},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			tp, tr := newTestThrottle()
			tr.responses = append(tr.responses, status(tc.status))
			resp, err := doRequest(t, newTestPipeline(tr, tp), http.MethodPut)
			if err == nil {
				// The raw pipeline returns the final response; generated
				// clients turn it into a ResponseError.
				err = azcoreErr(resp)
			}
			if n := tr.count(); n != tc.wantAttempts {
				t.Errorf("attempts = %d, want %d", n, tc.wantAttempts)
			}
			if got := Classify(err); got != tc.wantClass {
				t.Errorf("Classify = %v, want %v (%v)", got, tc.wantClass, err)
			}
		})
	}
}

func azcoreErr(resp *http.Response) error {
	if resp.StatusCode < 400 {
		return nil
	}
	return runtime.NewResponseError(resp)
}
