package localservice

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// Event messages. The two failure texts are the design's; the user-facing
// description is in docs/multiple-load-balancers.md.
const (
	msgUpdated        = "Updated backend pool %s of load balancer %s: %d node(s), %d added, %d removed, %d rewritten."
	msgUpToDate       = "Backend pool %s of load balancer %s is up to date after %d retries: %d node(s)."
	msgRetryNextTick  = "Backend pool update failed, retry %d of %d at the next update (every %s): %s."
	msgRetryAfter     = "Backend pool update failed, retry %d of %d not before %s (Azure Retry-After): %s."
	msgFailedTerminal = "Backend pool update failed (non-retriable): %s."
	msgFailedRetries  = "Backend pool update failed after %d retries: %s. To retrigger, cause an endpoint change for the Service (e.g., restart or scale a backing pod)."
)

// settle turns a group's result into events, the metric and the entries to
// requeue. Events go once to each distinct Service of the group; entries
// that are no longer relevant are dropped without event. The metric
// records terminal outcomes only: one observation per group that succeeded
// or had an entry fail for good.
func (u *Updater) settle(ctx context.Context, g *opGroup, res result) []*operation {
	log := klog.FromContext(ctx).WithValues("loadBalancer", g.lb, "pool", g.pool)
	if res.err == nil {
		// An attempt that found the pool already right writes nothing and
		// sends no event, unless it ends a series of Retrying events.
		for _, so := range u.distinctServices(ctx, g.ops) {
			switch {
			case res.diff.Changed:
				u.recorder.Eventf(so.svc, v1.EventTypeNormal, EventReasonPoolUpdated, msgUpdated,
					g.pool, g.lb, res.diff.Members, res.diff.Added, res.diff.Removed, res.diff.Updated)
			case so.op.retryCount > 0:
				u.recorder.Eventf(so.svc, v1.EventTypeNormal, EventReasonPoolUpdated, msgUpToDate,
					g.pool, g.lb, so.op.retryCount, res.diff.Members)
			}
		}
		res.mc.ObserveOperationWithResult(true)
		log.V(2).Info("Local service backend pool in sync", "written", res.diff.Changed, "nodes", res.diff.Members,
			"added", res.diff.Added, "removed", res.diff.Removed, "rewritten", res.diff.Updated)
		return nil
	}

	outcome, retryAfter := Classify(ctx, res.err)
	switch outcome {
	case OutcomeShutdown:
		log.V(2).Info("Abandoned local service backend pool update on shutdown", "err", res.err)
		return nil
	case OutcomeStale:
		log.V(2).Info("Local service backend pool is gone; dropped its update", "err", res.err)
		return nil
	case OutcomeTerminal:
		services := u.distinctServices(ctx, g.ops)
		if len(services) == 0 {
			return nil
		}
		text := eventError(res.err)
		for _, so := range services {
			u.recorder.Eventf(so.svc, v1.EventTypeWarning, EventReasonPoolUpdateFailed, msgFailedTerminal, text)
		}
		res.mc.ObserveOperationWithResult(false)
		log.Error(res.err, "Local service backend pool update failed (non-retriable)")
		return nil
	}

	// Retriable: every relevant entry consumes one retry; the group's error
	// cannot be attributed to one entry.
	now := u.clock.Now()
	text := eventError(res.err)
	var requeue []*operation
	failed := false
	seen := map[string]bool{}
	for _, op := range g.ops {
		svc, ok := u.relevant(ctx, op)
		if !ok {
			continue
		}
		first := !seen[op.service]
		seen[op.service] = true
		if op.retryCount >= u.maxRetries {
			failed = true
			if first {
				u.recorder.Eventf(svc, v1.EventTypeWarning, EventReasonPoolUpdateFailed, msgFailedRetries, op.retryCount, text)
			}
			log.Error(res.err, "Local service backend pool update failed; retries exhausted", "service", op.service, "retries", op.retryCount)
			if op.freshRetries >= u.maxRetries {
				continue
			}
			// A fresh change merged into the exhausted entry keeps its own
			// budget: the entry lives on as that change.
			op.retryCount = op.freshRetries
		}
		op.retryCount++
		op.freshRetries++
		op.nextEligibleAt = time.Time{}
		if retryAfter.After(now) {
			op.nextEligibleAt = retryAfter
		}
		requeue = append(requeue, op)
		if first {
			u.recorder.Eventf(svc, v1.EventTypeWarning, EventReasonPoolUpdateRetrying, retryMessage(op), op.retryCount, u.maxRetries, retryWhen(op, u.interval), text)
		}
		log.Info("Local service backend pool update failed; retrying", "service", op.service, "retry", op.retryCount,
			"maxRetries", u.maxRetries, "notBefore", op.nextEligibleAt, "err", text)
	}
	if failed {
		res.mc.ObserveOperationWithResult(false)
	}
	return requeue
}

func retryMessage(op *operation) string {
	if op.nextEligibleAt.IsZero() {
		return msgRetryNextTick
	}
	return msgRetryAfter
}

func retryWhen(op *operation, interval time.Duration) string {
	if op.nextEligibleAt.IsZero() {
		return interval.String()
	}
	return op.nextEligibleAt.UTC().Format(time.RFC3339)
}

// String describes an entry for logs and test failures.
func (o *operation) String() string {
	return fmt.Sprintf("%s@%s/%s(nodes=%v, retries=%d, notBefore=%s)", o.service, o.lb, o.pool,
		sets.List(o.nodes), o.retryCount, o.nextEligibleAt.Format(time.RFC3339))
}
