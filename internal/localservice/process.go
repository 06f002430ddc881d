package localservice

import (
	"context"
	"errors"
	"sort"
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

// cutKey splits a namespace/name key.
func cutKey(key string) (namespace, name string, ok bool) {
	return strings.Cut(key, "/")
}

// opGroup is the queued desired states of one pool of one load balancer:
// what one tick writes with one GET and at most one PUT.
type opGroup struct {
	key    groupKey
	lb     string // ARM names: where the store has the pool, and its name
	pool   string
	family v1.IPFamily
	ops    []*operation
}

// parked: the whole group waits while any entry waits (the throttling delay
// is group-level, so a pool's updates are never split).
func (g *opGroup) parked(now time.Time) bool {
	for _, op := range g.ops {
		if op.parked(now) {
			return true
		}
	}
	return false
}

// result is the outcome of one group's attempt.
type result struct {
	diff backendpool.Diff
	err  error
	mc   *metrics.MetricContext
}

// process is one tick: the design's steps, in order.
//
//  1. Return at once when the queue is empty.
//  2. Drain the queue under the updater lock (mu), then release mu, so
//     EndpointSlice handlers keep queueing during the ARM calls.
//  3. Drop stale entries quietly (the Service is gone or no longer Local,
//     or its pool is on no managed load balancer) and group the rest by
//     load balancer/pool, the load balancer being where the store has the
//     pool now: an entry follows its Service when it moves.
//  4. Keep every group with a parked entry as it is: no ARM call, no event,
//     no metric, no retry consumed.
//  5. Apply every other group in one store round: the store reads each pool
//     afresh, the edit computes the entries the desired nodes call for, and
//     the store writes the pool with its etag only when something differs
//     (its conflict policy retries a 412 or 409 with a fresh read first).
//  6. Settle each group: success, stale, terminal or retriable (see settle).
//  7. Put requeued entries back under mu, before every entry queued
//     meanwhile (queue.prepend) - unless the updater is shutting down.
//
// There is no service-reconcile lock: the store is the only writer of the
// pools, and every writer computes a pool's entries from the same desired
// state, so the Service reconcile and the updater cannot undo each other.
func (u *Updater) process(ctx context.Context) {
	u.mu.Lock()
	if u.queue.len() == 0 {
		u.mu.Unlock()
		return
	}
	snapshot := u.queue.drain()
	u.mu.Unlock()

	log := klog.FromContext(ctx)
	order := make(map[*operation]int, len(snapshot))
	for i, op := range snapshot {
		order[op] = i
	}
	var requeue []*operation
	var work []*opGroup
	now := u.clock.Now()
	for _, g := range u.groupOperations(ctx, snapshot) {
		if g.parked(now) {
			requeue = append(requeue, g.ops...)
			continue
		}
		work = append(work, g)
	}
	results := u.applyGroups(ctx, work)
	for i, g := range work {
		requeue = append(requeue, u.settle(ctx, g, results[i])...)
	}
	if ctx.Err() != nil {
		if len(requeue) > 0 {
			log.V(2).Info("Dropped local service pool updates on shutdown", "count", len(requeue))
		}
		return
	}
	sort.SliceStable(requeue, func(i, j int) bool { return order[requeue[i]] < order[requeue[j]] })
	u.mu.Lock()
	u.queue.prepend(requeue)
	u.mu.Unlock()
}

// groupOperations drops entries that are no longer relevant and groups the
// rest by load balancer/pool, groups in the order of their first entry.
func (u *Updater) groupOperations(ctx context.Context, ops []*operation) []*opGroup {
	log := klog.FromContext(ctx)
	var groups []*opGroup
	index := map[groupKey]*opGroup{}
	for _, op := range ops {
		if _, ok := u.relevant(ctx, op); !ok {
			log.V(4).Info("Dropped stale local service pool update", "service", op.service, "pool", op.pool)
			continue
		}
		k := op.group()
		g, ok := index[k]
		if !ok {
			g = &opGroup{key: k, lb: op.lb, pool: op.pool, family: op.family}
			index[k] = g
			groups = append(groups, g)
		}
		g.ops = append(g.ops, op)
	}
	return groups
}

// relevant reports whether the entry still matters, and returns its
// Service: the Service still exists and is a Local LoadBalancer Service,
// and a managed load balancer has its pool (op.lb is set to it).
func (u *Updater) relevant(ctx context.Context, op *operation) (*v1.Service, bool) {
	ns, name, _ := cutKey(op.service)
	svc, err := u.services.Services(ns).Get(name)
	if err != nil || !isLocal(svc) {
		return nil, false
	}
	lb, ok, err := u.store.FindPool(ctx, op.pool)
	if err != nil || !ok {
		return nil, false
	}
	op.lb = lb
	return svc, true
}

// applyGroups applies the groups in one store round and returns each
// group's result.
func (u *Updater) applyGroups(ctx context.Context, work []*opGroup) []result {
	results := make([]result, len(work))
	if len(work) == 0 {
		return results
	}
	rg := u.store.ResourceGroup()
	edits := make([]lbstore.PoolEdit, len(work))
	for i, g := range work {
		res := &results[i]
		res.mc = metrics.NewMetricContextWithClock(u.clock, MetricPrefix, MetricRequest, rg, u.sub, u.source).WithContext(ctx)
		want := u.policy.Members(u.nodesNamed(g.desiredNodes()), g.family)
		edits[i] = lbstore.PoolEdit{
			Ref: lbstore.PoolRef{LoadBalancer: g.lb, Pool: g.pool},
			Edit: func(pool *armnetwork.BackendAddressPool) (bool, error) {
				res.diff = u.policy.Sync(pool, want)
				return res.diff.Changed, nil
			},
		}
	}
	for i, r := range u.store.UpdatePools(ctx, LockCaller, edits, lbstore.PoolOptions{}) {
		switch {
		case r.Missing:
			results[i].err = &poolError{op: "update", lb: work[i].lb, pool: work[i].pool, err: errPoolGone}
		case r.Err != nil:
			results[i].err = &poolError{op: "update", lb: work[i].lb, pool: work[i].pool, err: r.Err}
		case !r.Written:
			results[i].diff.Changed = false
		}
	}
	return results
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

// desiredNodes is the union of the group's desired node sets (each entry
// of a group is for the same Service's pool; collision-free pool names make
// it one Service).
func (g *opGroup) desiredNodes() sets.Set[string] {
	out := sets.New[string]()
	for _, op := range g.ops {
		out = out.Union(op.nodes)
	}
	return out
}

// serviceOp is a relevant entry with its Service, for events.
type serviceOp struct {
	svc *v1.Service
	op  *operation
}

// distinctServices returns, in order, one entry per distinct relevant
// Service of ops; stale entries are left out.
func (u *Updater) distinctServices(ctx context.Context, ops []*operation) []serviceOp {
	seen := map[string]bool{}
	var out []serviceOp
	for _, op := range ops {
		if seen[op.service] {
			continue
		}
		svc, ok := u.relevant(ctx, op)
		if !ok {
			continue
		}
		seen[op.service] = true
		out = append(out, serviceOp{svc: svc, op: op})
	}
	return out
}
