package azure

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/config"
)

func TestEffectiveRateLimit(t *testing.T) {
	top := config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 2, CloudProviderRateLimitBucket: 4,
		CloudProviderRateLimitQPSWrite: 0.5, CloudProviderRateLimitBucketWrite: 1}
	lbOverride := &config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 10, CloudProviderRateLimitBucketWrite: 20}
	tests := []struct {
		name   string
		cfg    config.Config
		client string
		want   config.RateLimitConfig
	}{
		{"top-level applies to subnet", config.Config{RateLimitConfig: top}, ClientSubnet, top},
		{"no override: load balancer uses top", config.Config{RateLimitConfig: top}, ClientLoadBalancer, top},
		{"lb override applies to load balancer", config.Config{RateLimitConfig: top, LoadBalancerRateLimit: lbOverride}, ClientLoadBalancer,
			config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 10, CloudProviderRateLimitBucket: 4,
				CloudProviderRateLimitQPSWrite: 0.5, CloudProviderRateLimitBucketWrite: 20}},
		{"lb override applies to backend pool", config.Config{RateLimitConfig: top, LoadBalancerRateLimit: lbOverride}, ClientBackendPool,
			config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 10, CloudProviderRateLimitBucket: 4,
				CloudProviderRateLimitQPSWrite: 0.5, CloudProviderRateLimitBucketWrite: 20}},
		{"lb override not applied to public IP", config.Config{RateLimitConfig: top, LoadBalancerRateLimit: lbOverride}, ClientPublicIPAddress, top},
		{"public IP override", config.Config{RateLimitConfig: top, PublicIPAddressRateLimit: &config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPSWrite: 3}}, ClientPublicIPAddress,
			config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 2, CloudProviderRateLimitBucket: 4,
				CloudProviderRateLimitQPSWrite: 3, CloudProviderRateLimitBucketWrite: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := effectiveRateLimit(&tc.cfg, tc.client); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// Disabled cases: the limiter lets everything through.
	for _, tc := range []struct {
		name   string
		cfg    config.Config
		client string
	}{
		{"top-level off", config.Config{}, ClientLoadBalancer},
		{"override present but off", config.Config{RateLimitConfig: top, LoadBalancerRateLimit: &config.RateLimitConfig{}}, ClientBackendPool},
	} {
		rl := newRateLimiter(tc.client, effectiveRateLimit(&tc.cfg, tc.client), newFakeClock())
		for i := 0; i < 1000; i++ {
			if err := rl.tryAccept(i%2 == 0); err != nil {
				t.Fatalf("%s: call %d rejected: %v", tc.name, i, err)
			}
		}
	}
}

func TestRateLimiterRejectsAndRefills(t *testing.T) {
	clk := newFakeClock()
	rl := newRateLimiter(ClientLoadBalancer, config.RateLimitConfig{CloudProviderRateLimit: true,
		CloudProviderRateLimitQPS: 2, CloudProviderRateLimitBucket: 3,
		CloudProviderRateLimitQPSWrite: 0.5, CloudProviderRateLimitBucketWrite: 1}, clk)
	for i := 0; i < 3; i++ {
		if err := rl.tryAccept(false); err != nil {
			t.Fatalf("read %d within bucket rejected: %v", i, err)
		}
	}
	err := rl.tryAccept(false)
	var rle *RateLimitedError
	if !errors.As(err, &rle) {
		t.Fatalf("4th read: %v, want *RateLimitedError", err)
	}
	if rle.Write || rle.Client != ClientLoadBalancer {
		t.Errorf("error = %+v", rle)
	}
	if want := t0.Add(500 * time.Millisecond); !rle.RetryAfter.Equal(want) {
		t.Errorf("RetryAfter = %v, want %v (one token at 2 QPS)", rle.RetryAfter, want)
	}
	// The write bucket is independent.
	if err := rl.tryAccept(true); err != nil {
		t.Fatalf("first write: %v", err)
	}
	err = rl.tryAccept(true)
	if !errors.As(err, &rle) || !rle.Write {
		t.Fatalf("second write: %v, want write RateLimitedError", err)
	}
	if want := t0.Add(2 * time.Second); !rle.RetryAfter.Equal(want) {
		t.Errorf("write RetryAfter = %v, want %v", rle.RetryAfter, want)
	}
	// Refill with the fake clock.
	clk.Step(500 * time.Millisecond)
	if err := rl.tryAccept(false); err != nil {
		t.Errorf("read after refill: %v", err)
	}
	if err := rl.tryAccept(true); err == nil {
		t.Error("write refilled too early")
	}
	clk.Step(1500 * time.Millisecond)
	if err := rl.tryAccept(true); err != nil {
		t.Errorf("write after refill: %v", err)
	}
}

func TestRateLimitedErrorMessage(t *testing.T) {
	tests := []struct {
		err  *RateLimitedError
		want []string
	}{
		{&RateLimitedError{Client: ClientBackendPool, Write: true, RetryAfter: t0}, []string{"backendPool", "write rate limit", "loadBalancerRateLimit", "not sent to ARM"}},
		{&RateLimitedError{Client: ClientPublicIPAddress, RetryAfter: t0}, []string{"publicIPAddress", "read rate limit", "publicIPAddressRateLimit"}},
		{&RateLimitedError{Client: ClientSubnet}, []string{"subnet", "cloudProviderRateLimit"}},
	}
	for _, tc := range tests {
		msg := tc.err.Error()
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%q lacks %q", msg, w)
			}
		}
		if errors.Is(tc.err, ErrTooManyRequest) {
			t.Error("RateLimitedError must not claim ARM throttled")
		}
	}
}
