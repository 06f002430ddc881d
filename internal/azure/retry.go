package azure

import (
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/azlb/azlb/internal/config"
)

// DefaultMaxRetries is the SDK retry budget: one attempt plus this many
// retries for statuses in RetriableStatusCodes and transport errors.
const DefaultMaxRetries = 3

// retriableStatusCodes is what the SDK retry policy retries. 429 is absent on
// purpose: throttling is handled by the throttle gates and by the callers,
// using Retry-After.
var retriableStatusCodes = []int{408, 500, 502, 503, 504}

// RetriableStatusCodes returns (a copy of) the HTTP statuses the Azure SDK
// retry policy retries inside a single call: 408, 500, 502, 503, 504. An
// error with one of these statuses has already been retried, so Classify
// reports ClassRetriedBySDK for it.
func RetriableStatusCodes() []int { return slices.Clone(retriableStatusCodes) }

// retryOptions builds the SDK retry options from the cloudProviderBackoff*
// settings:
//
//   - StatusCodes is RetriableStatusCodes; MaxRetries is DefaultMaxRetries.
//   - When CloudProviderBackoff is true and CloudProviderBackoffRetries > 0,
//     CloudProviderBackoffRetries replaces MaxRetries. (0 does not disable SDK
//     retries: the SDK treats MaxRetries 0 as "use the default".)
//   - When CloudProviderBackoff is true and CloudProviderBackoffDuration > 0,
//     it (seconds) becomes the SDK's base RetryDelay; otherwise the SDK default
//     (800ms) applies.
//   - CloudProviderBackoffExponent and CloudProviderBackoffJitter are not used:
//     the SDK's delay is always (2^try - 1) * RetryDelay with a fixed
//     [0.8, 1.3) jitter, capped at 60s.
//
// retryDelay, when non-zero, overrides RetryDelay (tests use it to make SDK
// retries fast).
func retryOptions(b config.BackoffConfig, retryDelay time.Duration) policy.RetryOptions {
	o := policy.RetryOptions{
		MaxRetries:  DefaultMaxRetries,
		StatusCodes: RetriableStatusCodes(),
	}
	if b.CloudProviderBackoff {
		if b.CloudProviderBackoffRetries > 0 {
			o.MaxRetries = int32(min(b.CloudProviderBackoffRetries, 1<<20))
		}
		if b.CloudProviderBackoffDuration > 0 {
			o.RetryDelay = time.Duration(min(b.CloudProviderBackoffDuration, 24*3600)) * time.Second
		}
	}
	if retryDelay != 0 {
		o.RetryDelay = retryDelay
	}
	return o
}
