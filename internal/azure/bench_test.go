package azure

import (
	"context"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/emulator"
)

// BenchmarkLayerOverhead compares a GET through a bare armnetwork client with
// the same GET through this package's LoadBalancerClient (rate limiter off,
// throttle gates, metrics, error wrapping), both against the in-process
// emulator with zero latency, the same credential and the same transport.
//
//	go test -run '^$' -bench BenchmarkLayerOverhead -benchtime 2000x -count 5 ./internal/azure/
func BenchmarkLayerOverhead(b *testing.B) {
	env := newEmuEnvClock(b, emulator.Options{}, "bench-overhead", nil, false)
	env.seed(b)
	ctx := context.Background()

	bareOpts := env.c.ARMClientOptions("bare")
	bareOpts.PerRetryPolicies = nil
	bareOpts.Retry = policy.RetryOptions{}
	bare, err := armnetwork.NewLoadBalancersClient(emuSub, env.c.Credential(), bareOpts)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("bare-armnetwork", func(b *testing.B) {
		for b.Loop() {
			if _, err := bare.Get(ctx, emuRG, emuLB, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("azlb", func(b *testing.B) {
		for b.Loop() {
			if _, err := env.c.LoadBalancer.Get(ctx, emuRG, emuLB); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClosedWriteGate attempts backend pool writes while the client's
// write gate is closed (ARM answered 429 with a one-hour Retry-After) and
// reports how many requests reached the emulator (ARM and AAD) while doing
// so: arm-requests must be 0.
//
//	go test -run '^$' -bench BenchmarkClosedWriteGate -benchtime 10000x ./internal/azure/
func BenchmarkClosedWriteGate(b *testing.B) {
	env := newEmuEnvClock(b, emulator.Options{}, "bench-gate", nil, false)
	lb := env.seed(b)
	closeWriteGate(b, env, ptr.Deref(lb.Etag, ""))
	env.emu.ResetRequests()
	ctx := context.Background()
	writes := 0
	for b.Loop() {
		_, err := env.c.BackendPool.CreateOrUpdate(ctx, emuRG, emuLB, "pool", poolBody(), ptr.Deref(lb.Etag, ""))
		if Classify(err) != ClassThrottled {
			b.Fatalf("write %d through a closed gate: %v", writes, err)
		}
		writes++
	}
	b.ReportMetric(float64(len(env.emu.Requests())), "arm-requests")
	b.ReportMetric(float64(writes), "writes")
}

// BenchmarkLayerOverheadInMemory isolates the layer's own cost: the same
// comparison as BenchmarkLayerOverhead with an in-memory transport that
// answers every GET with a canned load balancer, so no network or emulator
// time hides (or adds noise to) the difference.
//
//	go test -run '^$' -bench BenchmarkLayerOverheadInMemory -count 5 ./internal/azure/
func BenchmarkLayerOverheadInMemory(b *testing.B) {
	const body = `{"name":"kubernetes","id":"/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes","etag":"W/\"1\"","location":"eastus","properties":{"provisioningState":"Succeeded"}}`
	tr := policyTransport(func(req *http.Request) *http.Response { return respond(req, http.StatusOK, nil, body) })
	cfg := fakeConfig("https://arm.test")
	c, err := NewClients(context.Background(), cfg, ClientOptions{Transport: tr, Credential: staticCredential{}, Source: "bench-inmemory"})
	if err != nil {
		b.Fatal(err)
	}
	bareOpts := c.ARMClientOptions("bare")
	bareOpts.PerRetryPolicies = nil
	bareOpts.Retry = policy.RetryOptions{}
	bare, err := armnetwork.NewLoadBalancersClient("sub", staticCredential{}, bareOpts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("bare-armnetwork", func(b *testing.B) {
		for b.Loop() {
			if _, err := bare.Get(ctx, "rg", "kubernetes", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("azlb", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.LoadBalancer.Get(ctx, "rg", "kubernetes"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type policyTransport func(*http.Request) *http.Response

func (f policyTransport) Do(req *http.Request) (*http.Response, error) { return f(req), nil }
