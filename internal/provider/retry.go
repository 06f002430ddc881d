package provider

import (
	"time"

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

// retryAfterThrottle turns an error that carries a Retry-After into a
// throttled error: the Service comes back when ARM said, or a second from
// now when that time has passed already (the error came through a store
// round, or ARM sent no Retry-After), never on the service controller's
// exponential backoff (5 s doubling to 5 minutes), which would leave ARM's
// tokens idle. Other errors are returned as they are.
func (p *Provider) retryAfterThrottle(err error) error {
	if err == nil || azure.Classify(err) != azure.ClassThrottled {
		return err
	}
	until, ok := azure.ThrottleRetryAfter(err)
	if !ok {
		return err
	}
	d := until.Sub(p.clock.Now())
	if d < retryPassedThrottle {
		d = retryPassedThrottle
	}
	return &throttled{retry: api.NewRetryError(err.Error(), d), err: err}
}

// retryPassedThrottle is how soon a throttled Service comes back when its
// Retry-After has passed.
const retryPassedThrottle = time.Second
