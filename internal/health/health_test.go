package health

import (
	"strings"
	"testing"
	"time"

	cmhealthz "k8s.io/controller-manager/pkg/healthz"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWorkerCheck(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	w := &Worker{Clock: clk}
	if err := w.Check(nil); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("before Start: %v", err)
	}
	w.Start()
	if err := w.Check(nil); err != nil {
		t.Fatalf("idle: %v", err)
	}
	done := w.Busy()
	clk.SetTime(clk.Now().Add(StuckAfter))
	if err := w.Check(nil); err != nil {
		t.Fatalf("busy for exactly StuckAfter: %v", err)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if err := w.Check(nil); err == nil || !strings.Contains(err.Error(), "running for 5m1s") {
		t.Fatalf("stuck: %v", err)
	}
	done()
	if err := w.Check(nil); err != nil {
		t.Fatalf("after the work ended: %v", err)
	}
	var _ cmhealthz.UnnamedHealthChecker = w
	w.Stop()
	if err := w.Check(nil); err == nil {
		t.Fatal("after Stop: healthy")
	}
}
