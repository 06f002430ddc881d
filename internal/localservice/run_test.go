package localservice

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
)

func TestRunAppliesTheQueueEveryInterval(t *testing.T) {
	h, key := webHarness(t, harnessOptions{})
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- h.u.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	h.eventually("ticker started", h.clock.HasWaiters)

	h.clock.Step(testInterval - time.Second)
	if h.u.QueueLen() != 1 {
		t.Fatalf("the queue was applied before the interval")
	}
	h.clock.Step(time.Second)
	h.eventually("pool updated", func() bool { return h.u.QueueLen() == 0 && len(h.poolNodes(webPool)) == 2 })
	h.eventually("event", func() bool { return len(h.rec.fake.Events) == 1 })
	h.expectEvents(key + " " + reasonUpdated)

	// The next endpoint change waits for the next tick.
	h.setEndpoints("default", "web", "n3")
	h.clock.Step(testInterval)
	h.eventually("second update observed", func() bool { o, _ := h.opMetrics(); return o == 2 })
	h.expectPool(webPool, "n3")
	h.expectMetrics(2, 0)
}

func TestNewUpdaterValidates(t *testing.T) {
	_, err := NewUpdater(Options{})
	if err == nil {
		t.Fatal("NewUpdater with no options succeeded")
	}
	for _, field := range []string{"Store", "Nodes", "Services", "EndpointSlices", "Policy.VNetID"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}

func TestFromConfig(t *testing.T) {
	f := false
	cfg := &config.Config{
		LoadBalancerBackendPoolUpdateIntervalInSeconds: 7,
		ExcludeMasterFromStandardLB:                    &f,
	}
	cfg.SubscriptionID, cfg.ResourceGroup, cfg.VnetName = "sub", "rg", "vnet"
	o := FromConfig(cfg, Options{Source: "kept"})
	if o.Interval != 7*time.Second || EffectiveMaxRetries(o.MaxRetries) != 3 || o.Policy != backendpool.PolicyFromConfig(cfg) ||
		o.Policy.ExcludeControlPlane || o.SubscriptionID != "sub" || o.Source != "kept" {
		t.Fatalf("FromConfig = %+v", o)
	}
	if got := FromConfig(nil, Options{Source: "x"}); got.Source != "x" {
		t.Fatal("FromConfig(nil) changed the options")
	}
}
