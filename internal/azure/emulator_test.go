package azure

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/metrics"
)

const (
	emuSub = "11111111-2222-3333-4444-555555555555"
	emuRG  = "rg-azure"
	emuLB  = "kubernetes"
	emuLoc = "eastus"
)

// emuEnv is a TLS emulator plus Clients configured for it purely through
// azure.json settings (custom cloud endpoints and caCertFile).
type emuEnv struct {
	srv *emulator.Server
	emu *emulator.Emulator
	clk *clocktesting.FakeClock
	cfg *config.Config
	c   *Clients
}

func emulatorConfig(t testing.TB, srv *emulator.Server) *config.Config {
	return &config.Config{
		SubscriptionID: emuSub,
		ResourceGroup:  emuRG,
		AuthConfig: config.AuthConfig{
			Cloud:                        "AzureStackCloud",
			TenantID:                     emulator.DefaultTenantID,
			AADClientID:                  emulator.DefaultClientID,
			AADClientSecret:              emulator.DefaultClientSecret,
			ResourceManagerEndpoint:      srv.URL(),
			ActiveDirectoryAuthorityHost: srv.URL() + "/",
			CACertFile:                   writeFile(t, "ca.pem", string(srv.CACertPEM())),
		},
	}
}

func newEmuEnv(t testing.TB, eo emulator.Options, source string, mutate func(*config.Config)) *emuEnv {
	t.Helper()
	return newEmuEnvClock(t, eo, source, mutate, true)
}

// newEmuEnvClock is newEmuEnv; fakeClock false gives the clients the real
// clock (benchmarks).
func newEmuEnvClock(t testing.TB, eo emulator.Options, source string, mutate func(*config.Config), fakeClock bool) *emuEnv {
	t.Helper()
	srv, err := emulator.Start(eo, "", false)
	if err != nil {
		t.Fatalf("emulator: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	env := &emuEnv{srv: srv, emu: srv.Emulator(), clk: newFakeClock(), cfg: emulatorConfig(t, srv)}
	if mutate != nil {
		mutate(env.cfg)
	}
	var clk clock.Clock = env.clk
	if !fakeClock {
		clk = nil
	}
	env.c, err = NewClients(context.Background(), env.cfg, ClientOptions{
		Clock:         clk,
		PollFrequency: 5 * time.Millisecond,
		RetryDelay:    time.Millisecond,
		Source:        source,
	})
	if err != nil {
		t.Fatalf("NewClients: %v", err)
	}
	t.Cleanup(env.c.Close)
	return env
}

// seed creates the resource group and a load balancer with one pool.
func (env *emuEnv) seed(t testing.TB) *armnetwork.LoadBalancer {
	t.Helper()
	ctx := context.Background()
	env.putGroup(t, env.c.Credential(), emuSub)
	lb, err := env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, armnetwork.LoadBalancer{
		Location: to.Ptr(emuLoc),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool")}},
		},
	}, "")
	if err != nil {
		t.Fatalf("seed load balancer: %v", err)
	}
	return lb
}

// armRequests returns the ARM (not AAD) requests the emulator served.
func (env *emuEnv) armRequests() []emulator.RequestRecord {
	var out []emulator.RequestRecord
	for _, r := range env.emu.Requests() {
		if r.Kind == "arm" {
			out = append(out, r)
		}
	}
	return out
}

func (env *emuEnv) addFault(t testing.TB, f emulator.Fault) {
	t.Helper()
	if _, err := env.emu.AddFault(f); err != nil {
		t.Fatal(err)
	}
}

func poolBody() armnetwork.BackendAddressPool {
	return armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
}

func TestEmulatorTokenAcquisitionAndCRUD(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "test-emu-crud", nil)
	lb := env.seed(t)
	ctx := context.Background()
	reqs := env.emu.Requests()
	if len(reqs) == 0 || reqs[0].Kind != "aad" || reqs[0].Status != http.StatusOK {
		t.Fatalf("first request %+v, want a successful AAD token request", reqs)
	}
	if !strings.Contains(reqs[0].Path, emulator.DefaultTenantID) {
		t.Errorf("token request path %q does not name the tenant", reqs[0].Path)
	}

	got, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB)
	if err != nil || ptr.Deref(got.Etag, "") != ptr.Deref(lb.Etag, "") {
		t.Fatalf("Get = %v, %v", got, err)
	}
	lbs, err := env.c.LoadBalancer.List(ctx, emuRG)
	if err != nil || len(lbs) != 1 {
		t.Fatalf("List = %d, %v", len(lbs), err)
	}
	pool, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, ""))
	if err != nil {
		t.Fatalf("pool update with current etag: %v", err)
	}
	if ptr.Deref(pool.Name, "") != "pool" || ptr.Deref(pool.Etag, "") == ptr.Deref(lb.Etag, "") {
		t.Errorf("pool after update = %+v, want a new etag", pool)
	}
	if _, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool2", poolBody(), ""); err != nil {
		t.Fatalf("pool create: %v", err)
	}
	pools, err := env.c.BackendPool.List(ctx, emuRG, emuLB)
	if err != nil || len(pools) != 2 {
		t.Fatalf("pool List = %d, %v", len(pools), err)
	}
	if _, err := env.c.BackendPool.Get(ctx, emuRG, emuLB, "pool2"); err != nil {
		t.Fatal(err)
	}
	if err := env.c.BackendPool.Delete(ctx, emuRG, emuLB, "pool2"); err != nil {
		t.Fatalf("pool Delete: %v", err)
	}
	_, err = env.c.BackendPool.Get(ctx, emuRG, emuLB, "pool2")
	if Classify(err) != ClassStale {
		t.Errorf("deleted pool: Classify(%v) = %v, want Stale", err, Classify(err))
	}

	pip, err := env.c.PublicIP.CreateOrUpdate(ctx, emuRG, "pip", armnetwork.PublicIPAddress{
		Location:   to.Ptr(emuLoc),
		SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, "")
	if err != nil || pip.Properties == nil || pip.Properties.IPAddress == nil {
		t.Fatalf("public IP create: %+v, %v", pip, err)
	}
	if pips, err := env.c.PublicIP.List(ctx, emuRG); err != nil || len(pips) != 1 {
		t.Fatalf("public IP List = %d, %v", len(pips), err)
	}
	if _, err := env.c.PublicIP.Get(ctx, emuRG, "pip"); err != nil {
		t.Fatal(err)
	}
	if err := env.c.PublicIP.Delete(ctx, emuRG, "pip"); err != nil {
		t.Fatalf("public IP Delete: %v", err)
	}

	vnets, err := armnetwork.NewVirtualNetworksClient(emuSub, env.c.Credential(), env.c.ARMClientOptions("virtualNetwork"))
	if err != nil {
		t.Fatal(err)
	}
	vp, err := vnets.BeginCreateOrUpdate(ctx, emuRG, "vnet", armnetwork.VirtualNetwork{
		Location: to.Ptr(emuLoc),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")}}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vp.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	sn, err := env.c.Subnet.Get(ctx, emuRG, "vnet", "nodes")
	if err != nil || ptr.Deref(sn.Properties.AddressPrefix, "") != "10.0.0.0/24" {
		t.Fatalf("Subnet.Get = %+v, %v", sn, err)
	}

	if err := env.c.LoadBalancer.Delete(ctx, emuRG, emuLB); err != nil {
		t.Fatalf("LB Delete: %v", err)
	}
	// Exactly one token request for everything: the token is cached.
	aad := 0
	for _, r := range env.emu.Requests() {
		if r.Kind == "aad" && strings.Contains(r.Path, "/token") {
			aad++
		}
	}
	if aad != 1 {
		t.Errorf("%d token requests, want 1", aad)
	}
}

func TestEmulatorStale404(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "test-emu-404", nil)
	env.seed(t)
	ctx := context.Background()
	tests := []struct {
		name string
		call func() error
		code string
	}{
		{"missing load balancer", func() error { _, err := env.c.LoadBalancer.Get(ctx, emuRG, "nope"); return err }, "ResourceNotFound"},
		{"missing pool", func() error { _, err := env.c.BackendPool.Get(ctx, emuRG, emuLB, "nope"); return err }, "NotFound"},
		{"missing resource group", func() error { _, err := env.c.LoadBalancer.Get(ctx, "rg-nope", emuLB); return err }, "ResourceGroupNotFound"},
		{"missing public IP", func() error { _, err := env.c.PublicIP.Get(ctx, emuRG, "nope"); return err }, "ResourceNotFound"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if Classify(err) != ClassStale {
				t.Errorf("Classify(%v) = %v, want Stale", err, Classify(err))
			}
			if !strings.Contains(err.Error(), tc.code) {
				t.Errorf("error lacks ARM code %s: %v", tc.code, err)
			}
		})
	}
}

// TestEmulator429 covers ARM 429 with Retry-After in seconds, as an RFC1123
// date, absent and unparsable, and the local gate path after it.
func TestEmulator429(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter func(now time.Time) string
		wantGate   func(now time.Time) time.Time
	}{
		{"seconds", func(time.Time) string { return "10" }, func(now time.Time) time.Time { return now.Add(10 * time.Second) }},
		{"RFC1123 date", func(now time.Time) string { return now.Add(45 * time.Second).Format(http.TimeFormat) },
			func(now time.Time) time.Time { return now.Add(45 * time.Second) }},
		{"absent", func(time.Time) string { return "" }, func(now time.Time) time.Time { return now }},
		{"unparsable", func(time.Time) string { return "later" }, func(time.Time) time.Time { return time.Time{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := uniqueSource("test-emu-429-" + tc.name)
			env := newEmuEnv(t, emulator.Options{}, src, nil)
			lb := env.seed(t)
			ctx := context.Background()
			now := env.clk.Now()
			env.addFault(t, emulator.Fault{Method: "PUT", PathRegex: "backendAddressPools", Count: 1, Status: 429,
				Code: "SubscriptionRequestsThrottled", RetryAfter: tc.retryAfter(now)})
			env.emu.ResetRequests()

			_, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, ""))
			if Classify(err) != ClassThrottled || !errors.Is(err, ErrTooManyRequest) {
				t.Fatalf("CreateOrUpdate: %v (class %v), want throttled", err, Classify(err))
			}
			at, ok := ThrottleRetryAfter(err)
			if !ok || !at.Equal(tc.wantGate(now)) {
				t.Fatalf("RetryAfter = %v (%v), want %v", at, ok, tc.wantGate(now))
			}
			if n := len(env.armRequests()); n != 1 {
				t.Fatalf("ARM saw %d requests for one throttled write, want 1 (no SDK retry of 429)", n)
			}
			// Reads are not affected by the write gate.
			if _, err := env.c.BackendPool.Get(ctx, emuRG, emuLB, "pool"); err != nil {
				t.Fatalf("read while write gate closed: %v", err)
			}
			env.emu.ResetRequests()
			_, err = env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, ""))
			if at.After(env.clk.Now()) {
				// Local gate path: blocked without reaching ARM.
				if Classify(err) != ClassThrottled {
					t.Fatalf("write with closed gate: %v", err)
				}
				if got, _ := ThrottleRetryAfter(err); !got.Equal(at) {
					t.Errorf("local gate RetryAfter = %v, want %v", got, at)
				}
				if n := len(env.armRequests()); n != 0 {
					t.Fatalf("%d requests reached ARM while the gate was closed, want 0", n)
				}
				env.clk.SetTime(at)
				_, err = env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, ""))
			}
			if err != nil {
				t.Fatalf("write after the gate opened: %v", err)
			}
			if n := len(env.armRequests()); n == 0 {
				t.Fatal("write after the gate opened did not reach ARM")
			}
			testutil.AssertVectorCount(t, metrics.APIRequestThrottledName, map[string]string{"source": src}, func() int {
				if at.After(now) {
					return 2 // the 429 and the locally blocked write
				}
				return 1
			}())
		})
	}
}

// TestEmulatorThrottle429 lets the emulator's write bucket produce the 429
// (its refill, one an hour, is slower than Azure's, which the pacer
// assumes) and checks the shared write gate honours its Retry-After for
// every client, while reads and deletes, buckets of their own, go on.
func TestEmulatorThrottle429(t *testing.T) {
	env := newEmuEnvClock(t, emulator.Options{Throttle: emulator.Throttle{Writes: emulator.Limit{Bucket: 3, Refill: 1.0 / 3600}}},
		"test-emu-throttle", nil, false)
	env.seed(t) // two writes
	ctx := context.Background()
	pip := armnetwork.PublicIPAddress{
		Location: to.Ptr(emuLoc),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}
	if _, err := env.c.PublicIP.CreateOrUpdate(ctx, emuRG, "pip", pip, ""); err != nil {
		t.Fatalf("third write: %v", err)
	}
	start := time.Now()
	_, err := env.c.PublicIP.CreateOrUpdate(ctx, emuRG, "pip", pip, "")
	if Classify(err) != ClassThrottled {
		t.Fatalf("write beyond the bucket: %v, want throttled", err)
	}
	at, ok := ThrottleRetryAfter(err)
	if !ok || at.Before(start.Add(3590*time.Second)) {
		t.Fatalf("RetryAfter %v (%v), want the emulator's Retry-After of about an hour", at, ok)
	}
	env.emu.ResetRequests()
	if _, err := env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, armnetwork.LoadBalancer{Location: to.Ptr(emuLoc)}, ""); Classify(err) != ClassThrottled {
		t.Fatalf("another client's write with the gate closed: %v", err)
	}
	if n := len(env.armRequests()); n != 0 {
		t.Errorf("%d requests reached ARM through a closed gate", n)
	}
	if _, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB); err != nil {
		t.Errorf("load balancer read: %v", err)
	}
	if err := env.c.PublicIP.Delete(ctx, emuRG, "pip"); err != nil {
		t.Errorf("delete with the write gate closed: %v", err)
	}
}

// TestEmulatorPacingAvoids429: under Azure's limits, writes sent faster
// than the bucket allows wait for their tokens (the remaining-requests
// headers tell when the bucket is empty) instead of meeting a 429.
func TestEmulatorPacingAvoids429(t *testing.T) {
	env := newEmuEnvClock(t, emulator.Options{Throttle: emulator.Throttle{Writes: emulator.Limit{Bucket: 4, Refill: 10}}},
		"test-emu-pacing", nil, false)
	env.seed(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := env.c.PublicIP.CreateOrUpdate(ctx, emuRG, fmt.Sprintf("pip-%d", i%4), armnetwork.PublicIPAddress{
				Location: to.Ptr(emuLoc),
				SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
				Properties: &armnetwork.PublicIPAddressPropertiesFormat{
					PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
			}, "")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && Classify(err) != ClassConflict {
			t.Errorf("write: %v", err)
		}
	}
	for _, r := range env.armRequests() {
		if r.Status == http.StatusTooManyRequests {
			t.Errorf("%s %s answered 429: the pacer let it go too early", r.Method, r.Path)
		}
	}
}

func TestEmulatorConflicts(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "test-emu-conflict", nil)
	lb := env.seed(t)
	ctx := context.Background()

	env.addFault(t, emulator.Fault{Method: "PUT", PathRegex: "backendAddressPools", Count: 1, Status: 409, Code: "AnotherOperationInProgress"})
	_, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), "")
	if Classify(err) != ClassConflict || !strings.Contains(err.Error(), "AnotherOperationInProgress") {
		t.Errorf("409: Classify(%v) = %v, want Conflict", err, Classify(err))
	}

	// A real stale etag: the LB changed since it was read.
	if _, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, "")); err != nil {
		t.Fatalf("write with current etag: %v", err)
	}
	env.emu.ResetRequests()
	_, err = env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, *lb, ptr.Deref(lb.Etag, ""))
	if Classify(err) != ClassConflict || !strings.Contains(err.Error(), "PreconditionFailed") {
		t.Errorf("stale etag: Classify(%v) = %v, want Conflict", err, Classify(err))
	}
	if reqs := env.armRequests(); len(reqs) != 1 || reqs[0].Status != http.StatusPreconditionFailed {
		t.Errorf("stale etag requests = %+v, want one 412", reqs)
	}

	// A long-running operation ending Failed surfaces as an error.
	env.addFault(t, emulator.Fault{Method: "PUT", PathRegex: "backendAddressPools", Count: 1, LROResult: "Failed"})
	if _, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ""); err == nil {
		t.Error("failed LRO returned no error")
	}
}

func TestEmulator5xxRetriedBySDK(t *testing.T) {
	for _, st := range []int{500, 503} {
		env := newEmuEnv(t, emulator.Options{}, "test-emu-5xx", nil)
		env.seed(t)
		env.addFault(t, emulator.Fault{Method: "GET", PathRegex: "loadBalancers/" + emuLB + "$", Status: st})
		env.emu.ResetRequests()
		_, err := env.c.LoadBalancer.Get(context.Background(), emuRG, emuLB)
		if Classify(err) != ClassRetriedBySDK {
			t.Errorf("%d: Classify(%v) = %v, want RetriedBySDK", st, err, Classify(err))
		}
		faulted := 0
		for _, r := range env.armRequests() {
			if r.Faulted && r.Status == st {
				faulted++
			}
		}
		if want := 1 + DefaultMaxRetries; faulted != want {
			t.Errorf("%d: %d attempts reached ARM, want 1 + MaxRetries = %d", st, faulted, want)
		}
	}
	// A reset connection is retried by the SDK too, then classified Other.
	env0 := newEmuEnv(t, emulator.Options{}, "test-emu-reset", nil)
	env0.seed(t)
	env0.addFault(t, emulator.Fault{Method: "GET", PathRegex: "loadBalancers/" + emuLB + "$", ResetConnection: true})
	env0.emu.ResetRequests()
	_, err := env0.c.LoadBalancer.Get(context.Background(), emuRG, emuLB)
	if Classify(err) != ClassOther {
		t.Errorf("reset connection: Classify(%v) = %v, want Other", err, Classify(err))
	}
	if n := len(env0.armRequests()); n != 1+DefaultMaxRetries {
		t.Errorf("reset connection: %d attempts, want %d", n, 1+DefaultMaxRetries)
	}
	// cloudProviderBackoffRetries changes the count.
	env := newEmuEnv(t, emulator.Options{}, "test-emu-5xx-backoff", func(c *config.Config) {
		c.CloudProviderBackoff, c.CloudProviderBackoffRetries = true, 1
	})
	env.seed(t)
	env.addFault(t, emulator.Fault{Method: "GET", PathRegex: "loadBalancers/" + emuLB + "$", Status: 502})
	env.emu.ResetRequests()
	if _, err := env.c.LoadBalancer.Get(context.Background(), emuRG, emuLB); Classify(err) != ClassRetriedBySDK {
		t.Errorf("Classify = %v", Classify(err))
	}
	if n := len(env.armRequests()); n != 2 {
		t.Errorf("with cloudProviderBackoffRetries=1: %d attempts, want 2", n)
	}
}

func TestEmulatorRateLimiter(t *testing.T) {
	src := uniqueSource("test-emu-ratelimit")
	env := newEmuEnv(t, emulator.Options{}, src, func(c *config.Config) {
		c.LoadBalancerRateLimit = &config.RateLimitConfig{CloudProviderRateLimit: true, CloudProviderRateLimitQPS: 1,
			CloudProviderRateLimitBucket: 1, CloudProviderRateLimitQPSWrite: 1, CloudProviderRateLimitBucketWrite: 1}
	})
	env.seed(t) // takes the load balancer client's only write token
	ctx := context.Background()
	env.emu.ResetRequests()
	_, err := env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, armnetwork.LoadBalancer{Location: to.Ptr(emuLoc)}, "")
	var rle *RateLimitedError
	if !errors.As(err, &rle) || !rle.Write || Classify(err) != ClassThrottled {
		t.Fatalf("second write: %v, want write RateLimitedError", err)
	}
	if n := len(env.armRequests()); n != 0 {
		t.Errorf("rate-limited write reached ARM (%d requests)", n)
	}
	if _, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB); err != nil {
		t.Errorf("first read: %v", err)
	}
	if _, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB); !errors.As(err, &rle) || rle.Write {
		t.Errorf("second read: %v, want read RateLimitedError", err)
	}
	// Top-level limiting is off, so the public IP client is unlimited.
	for i := 0; i < 5; i++ {
		if _, err := env.c.PublicIP.List(ctx, emuRG); err != nil {
			t.Fatalf("public IP list %d: %v", i, err)
		}
	}
	env.clk.Step(time.Second)
	if _, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB); err != nil {
		t.Errorf("read after refill: %v", err)
	}
	testutil.AssertVectorCount(t, metrics.APIRequestRateLimitedName, map[string]string{"source": src}, 2)
}

// captureKlog sends klog output (at high verbosity) to a buffer for the
// duration of the test.
func captureKlog(t *testing.T) *syncBuffer {
	t.Helper()
	buf := &syncBuffer{}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for k, v := range map[string]string{"v": "10", "logtostderr": "false", "alsologtostderr": "false"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(nil)
	})
	return buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestEmulatorSecretsNeverLeak(t *testing.T) {
	logs := captureKlog(t)
	const good = emulator.DefaultClientSecret
	const wrong = "wrong-Secret-4f9a7c2e"

	// A wrong secret: authentication fails, nothing leaks.
	bad := newEmuEnv(t, emulator.Options{}, "test-emu-secret-bad", func(c *config.Config) { c.AADClientSecret = wrong })
	_, err := bad.c.LoadBalancer.Get(context.Background(), emuRG, emuLB)
	if err == nil {
		t.Fatal("Get with a wrong secret succeeded")
	}
	t.Logf("auth failure: %v", err)
	if Classify(err) != ClassOther {
		t.Errorf("auth failure classified %v, want Other", Classify(err))
	}
	if len(bad.armRequests()) != 0 {
		t.Error("a request reached ARM without a token")
	}
	// The right secret: a full round of calls, with verbose logging.
	env := newEmuEnv(t, emulator.Options{}, "test-emu-secret-good", nil)
	env.seed(t)
	_, getErr := env.c.LoadBalancer.Get(context.Background(), emuRG, "missing")

	klog.Flush()
	texts := map[string]string{
		"auth error":     err.Error(),
		"404 error":      getErr.Error(),
		"clients String": env.c.String(),
		"config String":  env.cfg.String(),
		"logs":           logs.String(),
	}
	for what, s := range texts {
		for _, secret := range []string{wrong, good} {
			if strings.Contains(s, secret) {
				t.Errorf("%s contains the client secret %q:\n%s", what, secret, s)
			}
		}
	}
	if !strings.Contains(logs.String(), "Using Azure credential") {
		t.Error("log capture saw nothing; the test would not detect a leak")
	}
}

func TestEmulatorClosedWriteGateCostsNoRequests(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "test-emu-gate", nil)
	lb := env.seed(t)
	closeWriteGate(t, env, ptr.Deref(lb.Etag, ""))
	env.emu.ResetRequests()
	for i := 0; i < 10000; i++ {
		_, err := env.c.BackendPool.CreateOrUpdate(context.Background(), emuRG, emuLB, "pool", poolBody(), "")
		if Classify(err) != ClassThrottled {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if n := len(env.emu.Requests()); n != 0 {
		t.Errorf("10000 writes through a closed gate cost %d requests, want 0", n)
	}
}

// closeWriteGate makes ARM answer one backend pool write with 429 and a
// one-hour Retry-After.
func closeWriteGate(t testing.TB, env *emuEnv, etag string) {
	t.Helper()
	env.addFault(t, emulator.Fault{Method: "PUT", PathRegex: "backendAddressPools", Count: 1, Status: 429,
		Code: "SubscriptionRequestsThrottled", RetryAfter: "3600"})
	_, err := env.c.BackendPool.CreateOrUpdate(context.Background(), emuRG, emuLB, "pool", poolBody(), etag)
	if at, ok := ThrottleRetryAfter(err); !ok || !at.After(env.clk.Now()) {
		t.Fatalf("closing the gate: %v", err)
	}
}

// An update ARM completes synchronously costs exactly one request: the
// result is decoded from the PUT's own response, not fetched again. A write
// that needs polling (here: operations that stay InProgress) still polls.
func TestEmulatorSynchronousWriteIsOneRequest(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{}, "synctest", nil)
	lb := env.seed(t)
	ctx := context.Background()
	env.emu.ResetRequests()
	pool, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, ""))
	if err != nil {
		t.Fatal(err)
	}
	reqs := env.armRequests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodPut {
		t.Fatalf("a synchronous pool update made %d requests (%+v), want 1 PUT", len(reqs), reqs)
	}
	if ptr.Deref(pool.Name, "") != "pool" || pool.Etag == nil || *pool.Etag == ptr.Deref(lb.Etag, "") {
		t.Fatalf("result not decoded from the PUT response: name %q etag %v", ptr.Deref(pool.Name, ""), pool.Etag)
	}

	slow := newEmuEnv(t, emulator.Options{OperationDuration: time.Millisecond}, "synctest-slow", nil)
	slowLB := slow.seed(t)
	slow.emu.ResetRequests()
	if _, err := slow.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(slowLB.Etag, "")); err != nil {
		t.Fatal(err)
	}
	if n := len(slow.armRequests()); n < 2 {
		t.Fatalf("a write answered InProgress made %d requests; it must poll", n)
	}
}

// TestEmulatorClientCertificate: certificate authentication (a PKCS#12
// file with its password, as azure.json gives them) reaches ARM when the
// emulator knows the certificate, fails with AAD's AADSTS700027 when it
// does not, and the password is in no error, log or String.
func TestEmulatorClientCertificate(t *testing.T) {
	logs := captureKlog(t)
	const password = "p12-Pa55word" // internal/config/testdata/clientcert/README.md
	p12, err := filepath.Abs("../config/testdata/clientcert/rsa-legacy.p12")
	if err != nil {
		t.Fatal(err)
	}
	certs, _, err := config.LoadClientCertificate(p12, password)
	if err != nil {
		t.Fatal(err)
	}
	useCert := func(c *config.Config) {
		c.AADClientSecret = ""
		c.AADClientCertPath, c.AADClientCertPassword = p12, password
	}
	unknown := newEmuEnv(t, emulator.Options{}, "test-emu-cert-unknown", useCert)
	_, err = unknown.c.LoadBalancer.Get(context.Background(), emuRG, emuLB)
	if err == nil || !strings.Contains(err.Error(), "AADSTS700027") {
		t.Fatalf("unregistered certificate: %v", err)
	}
	if len(unknown.armRequests()) != 0 {
		t.Error("a request reached ARM without a token")
	}

	env := newEmuEnv(t, emulator.Options{ClientCertificates: certs}, "test-emu-cert", useCert)
	env.seed(t)
	if _, err := env.c.LoadBalancer.Get(context.Background(), emuRG, emuLB); err != nil {
		t.Fatalf("Get with the registered certificate: %v", err)
	}
	klog.Flush()
	for what, text := range map[string]string{"error": err.Error(), "clients": env.c.String(), "config": env.cfg.String(),
		"config %+v": fmt.Sprintf("%+v", env.cfg), "logs": logs.String()} {
		if strings.Contains(text, password) {
			t.Errorf("%s holds the certificate's password:\n%s", what, text)
		}
	}
}

// putGroup creates emuRG in a subscription with a credential of its tenant.
func (env *emuEnv) putGroup(t testing.TB, cred azcore.TokenCredential, sub string) {
	t.Helper()
	cl, err := arm.NewClient("azlbtest", "v0.0.1", cred, env.c.ARMClientOptions("resourceGroup"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := runtime.NewRequest(context.Background(), http.MethodPut, env.srv.URL()+"/subscriptions/"+sub+"/resourcegroups/"+emuRG+"?api-version=2021-04-01")
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.MarshalAsJSON(req, map[string]string{"location": emuLoc}); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Pipeline().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated) {
		t.Fatalf("create resource group in %s: %v", sub, runtime.NewResponseError(resp))
	}
}

// TestEmulatorNetworkInAnotherTenant: with networkResourceSubscriptionID
// and networkResourceTenantID, the network clients address the hub
// subscription with the hub tenant's tokens, the compute clients the
// cluster's subscription with its tenant's, and a NIC of the cluster's
// subscription joins the hub's subnet and pool (the auxiliary token). Without
// networkResourceTenantID, ARM refuses the cluster tenant's token in the hub
// subscription, and the controller's error says so.
func TestEmulatorNetworkInAnotherTenant(t *testing.T) {
	const (
		hubTenant = "0b0b0b0b-0000-4000-8000-00000000000b"
		hubSub    = "0c0c0c0c-0000-4000-8000-00000000000c"
	)
	eo := emulator.Options{Tenants: []emulator.Tenant{{ID: hubTenant, Subscriptions: []string{hubSub}}}}
	env := newEmuEnv(t, eo, "test-emu-hub", func(c *config.Config) {
		c.NetworkResourceSubscriptionID, c.NetworkResourceTenantID = hubSub, hubTenant
	})
	ctx := context.Background()
	if env.c.SubscriptionID() != emuSub || env.c.NetworkSubscriptionID() != hubSub || !strings.Contains(env.c.String(), "network subscription: "+hubSub) {
		t.Fatalf("subscriptions %s / %s: %s", env.c.SubscriptionID(), env.c.NetworkSubscriptionID(), env.c)
	}
	env.putGroup(t, env.c.Credential(), emuSub)
	env.putGroup(t, env.c.NetworkCredential(), hubSub)
	lb, err := env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, armnetwork.LoadBalancer{
		Location: to.Ptr(emuLoc), SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool")}}},
	}, "")
	if err != nil || !strings.HasPrefix(*lb.ID, "/subscriptions/"+hubSub+"/") {
		t.Fatalf("load balancer in the hub: %v", err)
	}
	vnets, err := armnetwork.NewVirtualNetworksClient(hubSub, env.c.NetworkCredential(), env.c.ARMClientOptions("vnet"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := vnets.BeginCreateOrUpdate(ctx, emuRG, "hub", armnetwork.VirtualNetwork{Location: to.Ptr(emuLoc), Properties: &armnetwork.VirtualNetworkPropertiesFormat{
		AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
		Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")}}}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: time.Millisecond})
	}
	if err != nil {
		t.Fatal(err)
	}
	nic, err := env.c.Interface.CreateOrUpdate(ctx, emuRG, "vm0-nic", armnetwork.Interface{Location: to.Ptr(emuLoc), Properties: &armnetwork.InterfacePropertiesFormat{
		IPConfigurations: []*armnetwork.InterfaceIPConfiguration{{Name: to.Ptr("ipconfig1"), Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
			Primary:                         to.Ptr(true),
			Subnet:                          &armnetwork.Subnet{ID: to.Ptr("/subscriptions/" + hubSub + "/resourceGroups/" + emuRG + "/providers/Microsoft.Network/virtualNetworks/hub/subnets/nodes")},
			LoadBalancerBackendAddressPools: []*armnetwork.BackendAddressPool{{ID: lb.Properties.BackendAddressPools[0].ID}}}}}}}, "")
	if err != nil || !strings.HasPrefix(*nic.ID, "/subscriptions/"+emuSub+"/") {
		t.Fatalf("a cluster NIC in the hub's subnet and pool: %v", err)
	}
	for _, r := range env.armRequests() {
		if strings.Contains(r.Path, "/networkInterfaces/") && r.Method == http.MethodPut && r.Status/100 != 2 {
			t.Errorf("NIC write refused: %+v", r)
		}
	}

	// The tenant left out: the hub refuses the cluster tenant's token.
	wrong := newEmuEnv(t, eo, "test-emu-hub-wrong", func(c *config.Config) { c.NetworkResourceSubscriptionID = hubSub })
	_, err = wrong.c.LoadBalancer.Get(ctx, emuRG, emuLB)
	if err == nil || !strings.Contains(err.Error(), "InvalidAuthenticationTokenTenant") {
		t.Fatalf("the hub with the cluster tenant's token: %v", err)
	}
}
