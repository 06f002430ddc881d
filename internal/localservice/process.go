package localservice

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/metrics"
)

// errPoolGone: the pool or its load balancer was deleted (a stale entry).
var errPoolGone = errors.New("the backend pool no longer exists")

// attempt is one pool being applied in a batch.
type attempt struct {
	key string
	st  poolState // a copy, taken when the attempt started
	svc *v1.Service
	lb  string
	res result
}

// result is the outcome of one attempt.
type result struct {
	diff backendpool.Diff
	err  error
	mc   *metrics.MetricContext
}

// sync applies a batch of due pools:
//
//  1. Drop the pools that no longer matter, quietly: the Service is gone or
//     no longer a Local LoadBalancer Service, or its pool is on no managed
//     load balancer (the store says where each pool is now, so work follows a
//     Service that moved).
//  2. Put back, without any ARM call, a pool that is not ready yet (its
//     batching window or a Retry-After): the queue normally does not hand
//     those out.
//  3. Read each Service's endpoints (ready, and terminating but serving:
//     backendpool.LocalEndpoints) and have the store apply all pools in one
//     round: it GETs each pool afresh, the edit computes the entries the
//     endpoints call for (backendpool.Policy.LocalMembers: a draining node
//     Down), and the store PUTs the pool with its etag only when something
//     differs (a 409 or 412 is first retried by the store with a fresh
//     read).
//  4. Settle each pool: success, stale, terminal or retriable (see settle).
func (u *Updater) sync(ctx context.Context, keys []string) {
	log := klog.FromContext(ctx)
	now := u.clock.Now()
	var work []*attempt
	for _, k := range keys {
		u.mu.Lock()
		cur, ok := u.pools[k]
		var st poolState
		if ok {
			st = *cur
		}
		u.mu.Unlock()
		if !ok {
			u.queue.Forget(k)
			continue
		}
		svc, lb, ok := u.relevant(ctx, &st)
		if !ok {
			log.V(4).Info("Dropped stale local service pool update", "service", st.service, "pool", st.pool)
			u.drop(k)
			continue
		}
		if now.Before(st.readyAt(u.interval)) {
			u.queue.AddRateLimited(k)
			continue
		}
		u.mu.Lock()
		if cur := u.pools[k]; cur != nil {
			cur.lastAttempt, cur.pending = now, false
		}
		u.windows[k] = now
		u.mu.Unlock()
		st.lastAttempt = now
		work = append(work, &attempt{key: k, st: st, svc: svc, lb: lb})
	}
	u.pruneWindows(now)
	if len(work) == 0 {
		return
	}
	u.apply(ctx, work)
	for _, a := range work {
		u.settle(ctx, a)
	}
}

// relevant reports whether the pool still matters and returns its Service
// and the managed load balancer that has it.
func (u *Updater) relevant(ctx context.Context, st *poolState) (*v1.Service, string, bool) {
	ns, name, _ := strings.Cut(st.service, "/")
	svc, err := u.services.Services(ns).Get(name)
	if err != nil || !u.isLocal(svc) {
		return nil, "", false
	}
	lb, ok, err := u.store.FindPool(ctx, st.pool)
	if err != nil || !ok {
		return nil, "", false
	}
	return svc, lb, true
}

// apply has the store write the batch's pools in one round.
func (u *Updater) apply(ctx context.Context, work []*attempt) {
	rg := u.store.ResourceGroup()
	edits := make([]lbstore.PoolEdit, len(work))
	for i, a := range work {
		a.res.mc = metrics.NewMetricContextWithClock(u.clock, MetricPrefix, MetricRequest, rg, u.sub, u.source).WithContext(ctx)
		on, err := backendpool.ServiceEndpoints(u.slices, a.svc.Namespace, a.svc.Name)
		if err != nil {
			on = backendpool.LocalEndpointsOf(nil) // a lister's List does not fail
		}
		want := u.policy.LocalMembers(u.nodesNamed(on.Members), a.st.family, on)
		edits[i] = lbstore.PoolEdit{
			Ref: lbstore.PoolRef{LoadBalancer: a.lb, Pool: a.st.pool},
			Edit: func(pool *armnetwork.BackendAddressPool) (bool, error) {
				a.res.diff = u.policy.Sync(pool, want)
				return a.res.diff.Changed, nil
			},
		}
	}
	for i, r := range u.store.UpdatePools(ctx, LockCaller, edits, lbstore.PoolOptions{}) {
		a := work[i]
		switch {
		case r.Missing:
			a.res.err = &poolError{op: "update", lb: a.lb, pool: a.st.pool, err: errPoolGone}
		case r.Err != nil:
			a.res.err = &poolError{op: "update", lb: a.lb, pool: a.st.pool, err: r.Err}
		case !r.Written:
			a.res.diff.Changed = false
		}
	}
}

// nodesNamed resolves node names through the lister; unknown names are left
// out.
func (u *Updater) nodesNamed(names sets.Set[string]) []*v1.Node {
	out := make([]*v1.Node, 0, names.Len())
	for name := range names {
		if n, err := u.nodes.Get(name); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// drop forgets a pool's work.
func (u *Updater) drop(k string) {
	u.mu.Lock()
	delete(u.pools, k)
	u.mu.Unlock()
	u.queue.Forget(k)
}

// pruneWindows forgets the windows that are over.
func (u *Updater) pruneWindows(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for k, t := range u.windows {
		if !now.Before(t.Add(u.interval)) {
			delete(u.windows, k)
		}
	}
}
