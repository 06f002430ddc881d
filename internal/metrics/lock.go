package metrics

import "time"

// ObserveLockWait records, in cloudprovider_azure_lock_wait_duration_seconds
// {lock, caller}, a wait the caller measured: for lock "lbstore", the time a
// change waited for the load balancer store's round that wrote it. caller is
// the code path (e.g. "EnsureLoadBalancer", "AdminStateController").
func ObserveLockWait(lock, caller string, d time.Duration) {
	Register()
	lockWait.WithLabelValues(lock, caller).Observe(d.Seconds())
}
