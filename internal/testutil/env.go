package testutil

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/securitygroup"
)

// StartStore builds a store and runs its writer until the test ends.
func StartStore(t testing.TB, o lbstore.Options) *lbstore.Store {
	t.Helper()
	s, err := lbstore.New(o)
	if err != nil {
		t.Fatalf("lbstore.New: %v", err)
	}
	runUntilCleanup(t, s.Run)
	return s
}

// runUntilCleanup runs a writer's Run until the test ends, and waits for
// it to return.
func runUntilCleanup(t testing.TB, run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// StartSecurityGroups builds the writer of the configuration's NSG and
// runs it until the test ends.
func StartSecurityGroups(t testing.TB, cfg *config.Config, c azure.SecurityGroupClient) *securitygroup.Store {
	t.Helper()
	s, err := securitygroup.New(securitygroup.Options{Client: c, ResourceGroup: cfg.SecurityGroupResourceGroup, Name: cfg.SecurityGroupName})
	if err != nil {
		t.Fatalf("securitygroup.New: %v", err)
	}
	runUntilCleanup(t, s.Run)
	return s
}

// FakeConfig is a valid azure.json for FakeARM: resource group FakeRG,
// cluster and default load balancer "kubernetes", a virtual network, IP-based
// (nodeIP) pools, and the load balancer cache on. mutate, when set, edits it before defaults and
// validation.
func FakeConfig(t testing.TB, mutate func(*config.Config)) *config.Config {
	t.Helper()
	cfg, err := config.Load(strings.NewReader(`{"cloud": "AzurePublicCloud", "tenantId": "t", "subscriptionId": "sub",
		"resourceGroup": "` + FakeRG + `", "location": "eastus", "clusterName": "kubernetes", "vnetName": "vnet",
		"subnetName": "subnet", "loadBalancerSku": "standard", "loadBalancerBackendPoolConfigurationType": "nodeIP",
		"aadClientId": "client", "aadClientSecret": "secret"}`))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if mutate != nil {
		mutate(cfg)
		cfg.SetDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatalf("config: %v", err)
		}
	}
	return cfg
}

// StartEmulator starts a seeded in-process emulator (devenv) that stops when
// the test ends; mutate edits its azure.json.
func StartEmulator(t testing.TB, eo emulator.Options, mutate func(*config.Config), seed ...devenv.Option) *devenv.Env {
	t.Helper()
	env, err := devenv.Start(context.Background(), t.TempDir(), eo, mutate, seed...)
	if err != nil {
		t.Fatalf("devenv: %v", err)
	}
	t.Cleanup(func() { _ = env.Close() })
	NotThrottled(t, env.Emulator(), eo)
	return env
}

// NotThrottled fails t when it ends if the emulator answered any request
// 429 by its limits while eo left them at their default (Azure's): a test
// either stays within Azure's limits or says which it runs under
// (emulator.NoThrottle for unlimited calls, Throttle{Mode:
// emulator.ThrottleAzure} or other limits when it means to be throttled).
// A throttled test waits out Retry-After, which makes it slow and its
// timing depend on the machine.
func NotThrottled(t testing.TB, e interface{ Throttled() int64 }, eo emulator.Options) {
	t.Helper()
	if eo.Throttle != (emulator.Throttle{}) {
		return // limits chosen
	}
	before := e.Throttled()
	t.Cleanup(func() {
		if n := e.Throttled() - before; n > 0 {
			t.Errorf("the emulator answered %d requests 429 under its default limits (Azure's): stay within them, or set emulator.Options.Throttle (docs/emulator.md, Throttling)", n)
		}
	})
}

// Clients builds ARM clients for the emulator, closed when the test ends.
func Clients(t testing.TB, env *devenv.Env, o azure.ClientOptions) *azure.Clients {
	t.Helper()
	c, err := env.Clients(context.Background(), o)
	if err != nil {
		t.Fatalf("clients: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// Inventory is a VM inventory of the emulated cluster (devenv's
// subscription and resource group) reading through clients; clk nil means
// the real clock.
func Inventory(t testing.TB, clients compute.Clients, clk clock.PassiveClock) *compute.Inventory {
	t.Helper()
	inv, err := compute.New(compute.Options{Clients: clients, SubscriptionID: devenv.SubscriptionID, ResourceGroup: devenv.ResourceGroup, Clock: clk})
	if err != nil {
		t.Fatalf("compute.New: %v", err)
	}
	return inv
}
