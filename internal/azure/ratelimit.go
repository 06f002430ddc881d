package azure

import (
	"fmt"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/config"
)

// RateLimitedError is returned, without contacting ARM, when a client's
// client-side token bucket has no token for the call. Classify reports it as
// ClassThrottled; it does not unwrap to ErrTooManyRequest because ARM did not
// throttle anything.
type RateLimitedError struct {
	// Client is the client name, e.g. "loadBalancer".
	Client string
	// Write is true for the write bucket (CreateOrUpdate, Delete), false for
	// the read bucket (Get, List).
	Write bool
	// RetryAfter is when the bucket will next hold a token, assuming no other
	// caller takes it first.
	RetryAfter time.Time
}

// Kind is "write" or "read".
func (e *RateLimitedError) Kind() string {
	if e.Write {
		return "write"
	}
	return "read"
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("azure %s client: client-side %s rate limit reached, call not sent to ARM (next token at %s; tune %s or cloudProviderRateLimit*)",
		e.Client, e.Kind(), e.RetryAfter.UTC().Format(time.RFC3339Nano), rateLimitStanza(e.Client))
}

// rateLimitStanza names the azure.json stanza that overrides the top-level
// cloudProviderRateLimit* settings for a client, or "" when none does.
func rateLimitStanza(client string) string {
	switch client {
	case ClientLoadBalancer, ClientBackendPool:
		return "loadBalancerRateLimit"
	case ClientPublicIPAddress:
		return "publicIPAddressRateLimit"
	default:
		return "cloudProviderRateLimit*"
	}
}

// effectiveRateLimit is the rate-limit stanza in force for a client: the
// load balancer and backend pool clients use loadBalancerRateLimit, the
// public IP client publicIPAddressRateLimit, the scale set and scale set
// VM clients virtualMachineScaleSetRateLimit, the VM client
// virtualMachineRateLimit, the network interface client interfaceRateLimit,
// others the top-level
// cloudProviderRateLimit* fields (see config.RateLimitFor for inheritance and
// defaults). Limiting is off when the stanza's cloudProviderRateLimit is
// false.
func effectiveRateLimit(cfg *config.Config, client string) config.RateLimitConfig {
	switch client {
	case ClientLoadBalancer, ClientBackendPool:
		return cfg.RateLimitFor(config.RateLimitClientLoadBalancer)
	case ClientPublicIPAddress:
		return cfg.RateLimitFor(config.RateLimitClientPublicIPAddress)
	case ClientScaleSet, ClientScaleSetVM:
		return cfg.RateLimitFor(config.RateLimitClientScaleSet)
	case ClientVM:
		return cfg.RateLimitFor(config.RateLimitClientVM)
	case ClientInterface:
		return cfg.RateLimitFor(config.RateLimitClientInterface)
	case ClientServiceGateway:
		return cfg.RateLimitFor(config.RateLimitClientServiceGateway)
	default:
		return cfg.RateLimitFor("")
	}
}

// rateLimiter is one client's pair of token buckets. A nil bucket means
// unlimited.
type rateLimiter struct {
	client string
	clock  clock.PassiveClock
	read   *rate.Limiter
	write  *rate.Limiter
}

func newRateLimiter(client string, rl config.RateLimitConfig, clk clock.PassiveClock) *rateLimiter {
	r := &rateLimiter{client: client, clock: clk}
	if !rl.CloudProviderRateLimit {
		return r
	}
	// Buckets start full. Time only enters through the *N/*At methods with
	// the injected clock's now.
	r.read = rate.NewLimiter(rate.Limit(rl.CloudProviderRateLimitQPS), rl.CloudProviderRateLimitBucket)
	r.write = rate.NewLimiter(rate.Limit(rl.CloudProviderRateLimitQPSWrite), rl.CloudProviderRateLimitBucketWrite)
	return r
}

// tryAccept takes one token from the read or write bucket, or returns a
// *RateLimitedError without blocking.
func (r *rateLimiter) tryAccept(write bool) error {
	b := r.read
	if write {
		b = r.write
	}
	if b == nil {
		return nil
	}
	now := r.clock.Now()
	if b.AllowN(now, 1) {
		return nil
	}
	wait := time.Duration(0)
	if lim := float64(b.Limit()); lim > 0 {
		missing := 1 - b.TokensAt(now)
		wait = time.Duration(missing / lim * float64(time.Second))
	}
	return &RateLimitedError{Client: r.client, Write: write, RetryAfter: now.Add(wait)}
}
