package provider

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/azlb/azlb/internal/azure"
)

// TestRetryAfterThrottle: a throttled Service comes back when ARM said, or
// a second from now once that time has passed, never on the service
// controller's exponential backoff; other errors are left alone.
func TestRetryAfterThrottle(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &Provider{clock: clocktesting.NewFakeClock(now)}
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration // 0: not a RetryError
	}{
		{"Retry-After ahead", &azure.ThrottleError{RetryAfter: now.Add(7 * time.Second)}, 7 * time.Second},
		{"Retry-After passed in a store round", fmt.Errorf("write network security group: %w", &azure.ThrottleError{RetryAfter: now.Add(-3 * time.Second)}), time.Second},
		{"no Retry-After", &azure.ThrottleError{RetryAfter: now}, time.Second},
		{"client-side limiter", &azure.RateLimitedError{Client: "loadBalancer", Write: true, RetryAfter: now.Add(2 * time.Second)}, 2 * time.Second},
		{"another error", errors.New("boom"), 0},
	} {
		err := p.retryAfterThrottle(tc.err)
		var re *api.RetryError
		if got := errors.As(err, &re); got != (tc.want != 0) || (got && re.RetryAfter() != tc.want) {
			t.Errorf("%s: %v (RetryError %v), want a RetryError of %v", tc.name, err, re, tc.want)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: the error no longer wraps %v", tc.name, tc.err)
		}
	}
}
