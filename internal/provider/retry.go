package provider

import (
	"github.com/azlb/azlb/internal/azure"
	"k8s.io/cloud-provider/api"
)

// throttled is a throttling error that is also cloud-provider's RetryError:
// the service controller retries the Service after exactly the Retry-After
// Azure gave (instead of its exponential backoff), and azure.Classify still
// sees the throttling.
type throttled struct {
	retry *api.RetryError
	err   error
}

func (e *throttled) Error() string   { return e.err.Error() }
func (e *throttled) Unwrap() []error { return []error{e.retry, e.err} }

// retryAfterThrottle turns an error that carries a Retry-After in the future
// into a throttled error; other errors are returned as they are.
func (p *Provider) retryAfterThrottle(err error) error {
	if err == nil || azure.Classify(err) != azure.ClassThrottled {
		return err
	}
	until, ok := azure.ThrottleRetryAfter(err)
	if !ok {
		return err
	}
	d := until.Sub(p.clock.Now())
	if d <= 0 {
		return err
	}
	return &throttled{retry: api.NewRetryError(err.Error(), d), err: err}
}
