package metrics

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// LockWithWaitMetric calls l.Lock() and records, in
// cloudprovider_azure_lock_wait_duration_seconds{lock, caller}, the time from
// just before Lock() was called until it returned. lock names the lock (e.g.
// "service_reconcile"), caller the code path (e.g. "EnsureLoadBalancer",
// "AdminStateController"). The caller still owns the Unlock.
func LockWithWaitMetric(l sync.Locker, lock, caller string) {
	LockWithWaitMetricClock(clock.RealClock{}, l, lock, caller)
}

// LockWithWaitMetricClock is LockWithWaitMetric with an injected clock.
func LockWithWaitMetricClock(clk clock.PassiveClock, l sync.Locker, lock, caller string) {
	Register()
	if clk == nil {
		clk = clock.RealClock{}
	}
	start := clk.Now()
	l.Lock()
	lockWait.WithLabelValues(lock, caller).Observe(clk.Since(start).Seconds())
}

// ObserveLockWait records, in cloudprovider_azure_lock_wait_duration_seconds,
// a wait the caller measured itself (for example the time a change waited in
// a write queue for its round).
func ObserveLockWait(lock, caller string, d time.Duration) {
	Register()
	lockWait.WithLabelValues(lock, caller).Observe(d.Seconds())
}
