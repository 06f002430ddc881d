package localservice

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Event messages (their texts are part of azlb's interface); the user-facing
// description is in docs/multiple-load-balancers.md.
const (
	msgUpdated        = "Updated backend pool %s of load balancer %s: %d node(s), %d added, %d removed, %d rewritten."
	msgUpToDate       = "Backend pool %s of load balancer %s is up to date after %d retries: %d node(s)."
	msgRetryNextTick  = "Backend pool update failed, retry %d of %d at the next update (every %s): %s."
	msgRetryAfter     = "Backend pool update failed, retry %d of %d not before %s (Azure Retry-After): %s."
	msgFailedTerminal = "Backend pool update failed (non-retriable): %s."
	msgFailedRetries  = "Backend pool update failed after %d retries: %s. To retrigger, cause an endpoint change for the Service (e.g., restart or scale a backing pod)."
)

// settle turns an attempt's result into an event on the Service, the metric,
// and the pool's next step. The metric records terminal outcomes only.
//
//   - Success: LoadBalancerBackendPoolUpdated when the pool was written, or
//     when it was already right at the end of a series of retries. The
//     pool's work is done, unless a change arrived during the attempt: that
//     one is scheduled with a fresh budget.
//   - Stale (the pool is gone): dropped quietly.
//   - Terminal: LoadBalancerBackendPoolUpdateFailed; dropped, unless a
//     change arrived during the attempt.
//   - Retriable: the change consumes a retry (a change that arrived during
//     the attempt does not: it was not part of it); while the budget lasts
//     the pool is put back with LoadBalancerBackendPoolUpdateRetrying, parked
//     until the Retry-After when Azure gave one in the future, otherwise until
//     its next window. When the oldest change runs out, it is reported with
//     LoadBalancerBackendPoolUpdateFailed, and a newer change with budget left
//     lives on.
func (u *Updater) settle(ctx context.Context, a *attempt) {
	log := klog.FromContext(ctx).WithValues("service", a.st.service, "loadBalancer", a.lb, "pool", a.st.pool)
	res := a.res
	if res.err == nil {
		switch {
		case res.diff.Changed:
			u.recorder.Eventf(a.svc, v1.EventTypeNormal, EventReasonPoolUpdated, msgUpdated,
				a.st.pool, a.lb, res.diff.Members, res.diff.Added, res.diff.Removed, res.diff.Updated)
		case a.st.retries > 0:
			u.recorder.Eventf(a.svc, v1.EventTypeNormal, EventReasonPoolUpdated, msgUpToDate,
				a.st.pool, a.lb, a.st.retries, res.diff.Members)
		}
		res.mc.ObserveOperationWithResult(true)
		log.V(2).Info("Local service backend pool in sync", "written", res.diff.Changed, "nodes", res.diff.Members,
			"added", res.diff.Added, "removed", res.diff.Removed, "rewritten", res.diff.Updated)
		u.finish(a.key)
		return
	}

	outcome, retryAfter := Classify(ctx, res.err)
	switch outcome {
	case OutcomeShutdown:
		log.V(2).Info("Abandoned local service backend pool update on shutdown", "err", res.err)
		return
	case OutcomeStale:
		log.V(2).Info("Local service backend pool is gone; dropped its update", "err", res.err)
		u.drop(a.key)
		return
	case OutcomeTerminal:
		u.recorder.Eventf(a.svc, v1.EventTypeWarning, EventReasonPoolUpdateFailed, msgFailedTerminal, eventError(res.err))
		res.mc.ObserveOperationWithResult(false)
		log.Error(res.err, "Local service backend pool update failed (non-retriable)")
		u.finish(a.key)
		return
	}

	text := eventError(res.err)
	now := u.clock.Now()
	u.mu.Lock()
	st, ok := u.pools[a.key]
	if !ok {
		u.mu.Unlock()
		return // dropped meanwhile (the Service went away)
	}
	failedFor := -1
	if st.retries >= u.maxRetries {
		failedFor = st.retries
	}
	st.retries++
	if !st.pending {
		st.fresh++
	}
	if failedFor >= 0 {
		if st.fresh > u.maxRetries {
			delete(u.pools, a.key)
			u.mu.Unlock()
			u.queue.Forget(a.key)
			u.recorder.Eventf(a.svc, v1.EventTypeWarning, EventReasonPoolUpdateFailed, msgFailedRetries, failedFor, text)
			res.mc.ObserveOperationWithResult(false)
			log.Error(res.err, "Local service backend pool update failed; retries exhausted", "retries", failedFor)
			return
		}
		// A newer change with budget left lives on as the pool's change.
		st.retries = st.fresh
	}
	st.notBefore = time.Time{}
	if retryAfter.After(now) {
		st.notBefore = retryAfter
	}
	retry, notBefore := st.retries, st.notBefore
	u.mu.Unlock()
	if failedFor >= 0 {
		u.recorder.Eventf(a.svc, v1.EventTypeWarning, EventReasonPoolUpdateFailed, msgFailedRetries, failedFor, text)
		res.mc.ObserveOperationWithResult(false)
		log.Error(res.err, "Local service backend pool update failed; retries exhausted; a newer change goes on", "retries", failedFor)
	}
	if retry == 0 {
		// Only a change that arrived during the attempt is left: it has not
		// failed yet, so it is not retrying; it waits for its window.
		u.queue.AddRateLimited(a.key)
		return
	}
	u.recorder.Eventf(a.svc, v1.EventTypeWarning, EventReasonPoolUpdateRetrying, retryMessage(notBefore), retry, u.maxRetries, retryWhen(notBefore, u.interval), text)
	log.Info("Local service backend pool update failed; retrying", "retry", retry, "maxRetries", u.maxRetries, "notBefore", notBefore, "err", text)
	u.queue.AddRateLimited(a.key)
}

// finish ends the pool's work after a success or a terminal failure, unless
// a change arrived during the attempt: that one is scheduled afresh, with a
// budget of its own.
func (u *Updater) finish(k string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	st, ok := u.pools[k]
	if !ok {
		return
	}
	if !st.pending {
		delete(u.pools, k)
		u.queue.Forget(k)
		return
	}
	st.retries, st.fresh, st.notBefore = 0, 0, time.Time{}
	u.schedule(k, st)
}

func retryMessage(notBefore time.Time) string {
	if notBefore.IsZero() {
		return msgRetryNextTick
	}
	return msgRetryAfter
}

func retryWhen(notBefore time.Time, interval time.Duration) string {
	if notBefore.IsZero() {
		return interval.String()
	}
	return notBefore.UTC().Format(time.RFC3339)
}
