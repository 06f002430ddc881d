package localservice

import (
	"context"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/metrics"
)

// opGroup is the queued desired states of one pool of one load balancer:
// what one tick writes with one GET and at most one PUT.
type opGroup struct {
	key    groupKey
	lb     string // ARM names, from the first entry
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

// process is one tick: the design's numbered steps, in order.
//
//  1. Take the service-reconcile lock for the whole tick: the registry
//     (Register/Unregister, called by the provider under that lock) cannot
//     change underneath, and no Service reconcile writes a pool meanwhile.
//  2. Return at once when the queue is empty.
//  3. There is no second, distributed lock (the design's
//     azureResourceLocker): azlb runs one active controller manager under
//     leader election, and every writer of load balancer resources in it
//     takes the service-reconcile lock held here.
//  4. Drain the queue under the updater lock (mu), then release mu, so
//     EndpointSlice handlers keep queueing during the ARM calls.
//  5. Drop stale entries quietly and group the rest by load balancer/pool.
//  6. Keep every group with a parked entry as it is: no ARM call, no event,
//     no metric, no retry consumed.
//  7. Apply every other group once: GET the pool, compute the entries the
//     desired nodes call for, PUT with the etag only when something differs.
//  8. Settle each group: success, stale, terminal or retriable (see settle).
//  9. Put requeued entries back under mu, before every entry queued
//     meanwhile (queue.prepend) - unless the updater is shutting down.
func (u *Updater) process(ctx context.Context) {
	u.lock.Lock(LockCaller)
	defer u.lock.Unlock()

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
		if _, ok := u.relevant(op); !ok {
			log.V(4).Info("Dropped stale local service pool update", "service", op.service, "loadBalancer", op.lb, "pool", op.pool)
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
// Service: the Service still exists and is ExternalTrafficPolicy=Local, and
// its registration still puts this pool on this load balancer.
func (u *Updater) relevant(op *operation) (*v1.Service, bool) {
	reg, ok := u.registered(op.service)
	if !ok || !reg.covers(op) {
		return nil, false
	}
	ns, name, _ := cutKey(op.service)
	svc, err := u.services.Services(ns).Get(name)
	if err != nil || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal {
		return nil, false
	}
	return svc, true
}

// applyGroups applies the groups: the pools of one load balancer one after
// the other (they share the load balancer's etag and ARM serialises writes
// to it), different load balancers in parallel.
func (u *Updater) applyGroups(ctx context.Context, work []*opGroup) []result {
	results := make([]result, len(work))
	var lbs []string
	byLB := map[string][]int{}
	for i, g := range work {
		if _, ok := byLB[g.key.lb]; !ok {
			lbs = append(lbs, g.key.lb)
		}
		byLB[g.key.lb] = append(byLB[g.key.lb], i)
	}
	run := func(idx []int) {
		for _, i := range idx {
			results[i] = u.applyGroup(ctx, work[i])
		}
	}
	if len(lbs) == 1 {
		run(byLB[lbs[0]])
		return results
	}
	var wg sync.WaitGroup
	for _, lb := range lbs {
		idx := byLB[lb]
		wg.Go(func() { run(idx) })
	}
	wg.Wait()
	return results
}

// applyGroup makes one attempt: a fresh GET of the pool, the diff against
// the desired nodes, and a PUT with the pool's etag if anything differs.
func (u *Updater) applyGroup(ctx context.Context, g *opGroup) result {
	rg := u.pools.ResourceGroup()
	res := result{mc: metrics.NewMetricContextWithClock(u.clock, MetricPrefix, MetricRequest, rg, u.sub, u.source).WithContext(ctx)}
	if err := ctx.Err(); err != nil {
		res.err = err
		return res
	}
	client := u.pools.BackendPools()
	pool, err := client.Get(ctx, rg, g.lb, g.pool)
	if err != nil {
		u.forget(g.lb, err)
		res.err = &poolError{op: "get", lb: g.lb, pool: g.pool, err: err}
		return res
	}
	want := members(u.desiredNodes(g), g.family, u.node, u.includeCP, u.adminState)
	res.diff = backendpool.Sync(pool, want, u.vnetID)
	if !res.diff.Changed {
		return res
	}
	u.pools.InvalidateCache(g.lb)
	_, err = client.CreateOrUpdate(ctx, rg, g.lb, g.pool, *pool, deref(pool.Etag))
	// The provider's cached load balancer holds the old pool (or, after a
	// conflict, an old etag): it must be read again either way.
	u.pools.InvalidateCache(g.lb)
	if err != nil {
		res.err = &poolError{op: "update", lb: g.lb, pool: g.pool, err: err}
	}
	return res
}

// forget invalidates the provider's cache when a GET says it is stale.
func (u *Updater) forget(lb string, err error) {
	if c := azure.Classify(err); c == azure.ClassStale || c == azure.ClassConflict {
		u.pools.InvalidateCache(lb)
	}
}

// node reads a node from the lister; nil when unknown.
func (u *Updater) node(name string) *v1.Node {
	n, err := u.nodes.Get(name)
	if err != nil {
		return nil
	}
	return n
}

// desiredNodes is the union of the group's desired node sets, plus the
// current endpoint nodes of every other registered Service whose pool has
// the same name on the same load balancer (<namespace>-<name> is ambiguous:
// a-b/c and a/b-c both own "a-b-c"), so that one Service's update never
// removes another's nodes.
func (u *Updater) desiredNodes(g *opGroup) sets.Set[string] {
	out := sets.New[string]()
	queued := sets.New[string]()
	for _, op := range g.ops {
		out = out.Union(op.nodes)
		queued.Insert(op.service)
	}
	for _, key := range u.sharers(g.key) {
		if queued.Has(key) {
			continue
		}
		ns, name, _ := cutKey(key)
		if nodes, err := u.endpointNodes(ns, name); err == nil {
			out = out.Union(nodes)
		}
	}
	return out
}

// sharers lists the registered Services whose pools include the group's.
func (u *Updater) sharers(k groupKey) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for key, reg := range u.registry {
		if reg.hasPool(key, k) {
			out = append(out, key)
		}
	}
	sort.Strings(out)
	return out
}

// serviceOp is a relevant entry with its Service, for events.
type serviceOp struct {
	svc *v1.Service
	op  *operation
}

// distinctServices returns, in order, one entry per distinct relevant
// Service of ops; stale entries are left out.
func (u *Updater) distinctServices(ops []*operation) []serviceOp {
	seen := map[string]bool{}
	var out []serviceOp
	for _, op := range ops {
		if seen[op.service] {
			continue
		}
		svc, ok := u.relevant(op)
		if !ok {
			continue
		}
		seen[op.service] = true
		out = append(out, serviceOp{svc: svc, op: op})
	}
	return out
}
