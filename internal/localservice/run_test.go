package localservice

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
)

// The first change of an idle pool is applied at once (the leading edge);
// later changes within the window wait for its end and share one write.
func TestRunAppliesAnIdlePoolAtOnceAndBatchesLaterChanges(t *testing.T) {
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

	// Leading edge: no clock step needed.
	h.eventually("pool updated at once", func() bool { return h.u.QueueLen() == 0 && len(h.poolNodes(webPool)) == 2 })
	h.eventually("event", func() bool { return len(h.rec.fake.Events) == 1 })
	h.expectEvents(key + " " + reasonUpdated)

	// Two more changes within the window: nothing until its end, then one
	// GET and one PUT with the last one.
	h.resetRequests()
	h.setEndpoints("default", "web", "n3")
	h.setEndpoints("default", "web", "n1", "n3")
	h.clock.Step(testInterval - time.Second)
	if g, p := h.armCalls(webPool); g != 0 || p != 0 {
		t.Fatalf("%d GET, %d PUT inside the window", g, p)
	}
	h.clock.Step(time.Second)
	h.eventually("second update observed", func() bool { o, _ := h.opMetrics(); return o == 2 })
	if g, p := h.armCalls(webPool); g != 1 || p != 1 {
		t.Fatalf("%d GET, %d PUT for the window; want one of each", g, p)
	}
	h.expectPool(webPool, "n1", "n3")
	h.expectMetrics(2, 0)
	if err := h.u.HealthChecker().Check(nil); err != nil {
		t.Errorf("health while running: %v", err)
	}
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
	if o.Interval != 7*time.Second || EffectiveMaxRetries(o.MaxRetries) != 3 || !reflect.DeepEqual(o.Policy, backendpool.PolicyFromConfig(cfg)) ||
		o.Policy.ExcludeControlPlane || o.SubscriptionID != "sub" || o.Source != "kept" {
		t.Fatalf("FromConfig = %+v", o)
	}
	if got := FromConfig(nil, Options{Source: "x"}); got.Source != "x" {
		t.Fatal("FromConfig(nil) changed the options")
	}
}
