package adminstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/metrics"
)

// ManagerOptions tunes a Manager. The zero value is usable.
type ManagerOptions struct {
	// Clock times the operation metric. Default: the real clock.
	Clock clock.PassiveClock
	// SubscriptionID and Source label the operation metric. Source
	// defaults to azure.DefaultSource.
	SubscriptionID string
	Source         string
}

// Target is the admin state one node's backend entries must have.
type Target struct {
	// Node is the node name (logs and errors).
	Node string
	// UID keys the last-applied cache; empty disables caching for the
	// target.
	UID types.UID
	// IPs are the node's addresses; every pool entry with one of them is
	// updated.
	IPs []string
	// State is None, Down or Up.
	State State
}

// Result is the outcome of one Target.
type Result struct {
	// Pools hold at least one address of the node (sorted). Empty when
	// Skipped.
	Pools []PoolRef
	// Changed counts the node's entries whose admin state was written.
	Changed int
	// Skipped: the same state was last applied successfully for the same
	// node UID and addresses; no ARM call was made.
	Skipped bool
	// Err is every failure that may concern the node, joined; each names
	// the load balancer and pool.
	Err error
}

// Manager sets the admin state of backend pool entries. All Azure calls of
// one apply happen under the service-reconcile lock: it resolves the pools
// holding the addresses (Backend.PoolsWithAddresses), invalidates the cache
// of each load balancer it touches, GETs every pool afresh (in parallel),
// changes the matching entries and PUTs each changed pool once, all pools in
// parallel (see applyLB for If-Match and how the pools of one load balancer,
// which share its etag, are kept safe). A 412 or 409 is retried once with a
// fresh GET.
//
// It remembers, per node UID, the last state applied successfully, so
// applying the same state again costs no ARM call. A new Manager (a restart)
// has an empty memory and so verifies with GETs.
//
// Manager is safe for concurrent use.
type Manager struct {
	backend Backend
	lock    Locker
	clock   clock.PassiveClock
	sub     string
	source  string

	mu      sync.Mutex
	applied map[types.UID]appliedState
}

type appliedState struct {
	state State
	ips   string
}

// NewManager builds a Manager. backend and lock are required.
func NewManager(backend Backend, lock Locker, opts ManagerOptions) (*Manager, error) {
	if backend == nil {
		return nil, errors.New("adminstate: NewManager: backend is required")
	}
	if lock == nil {
		return nil, errors.New("adminstate: NewManager: lock is required")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	src := opts.Source
	if src == "" {
		src = azure.DefaultSource
	}
	return &Manager{backend: backend, lock: lock, clock: clk, sub: opts.SubscriptionID, source: src,
		applied: map[types.UID]appliedState{}}, nil
}

// Forget drops what the Manager remembers about a node UID (call it when
// the node is deleted).
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	delete(m.applied, uid)
	m.mu.Unlock()
}

// validState reports whether s is an admin state ARM accepts.
func validState(s State) (State, bool) {
	for _, v := range armnetwork.PossibleLoadBalancerBackendAddressAdminStateValues() {
		if strings.EqualFold(string(v), string(s)) {
			return v, true
		}
	}
	return "", false
}

// Apply sets the admin state of every backend pool entry whose IP address
// is a key of desired, on every managed load balancer. It does not use the
// last-applied memory (no node identity): each call GETs the pools.
func (m *Manager) Apply(ctx context.Context, desired map[string]State) error {
	want := make(map[string]State, len(desired))
	for ip, s := range desired {
		v, ok := validState(s)
		if !ok {
			return fmt.Errorf("adminstate: address %s: admin state %q is not one of %v", ip, s,
				armnetwork.PossibleLoadBalancerBackendAddressAdminStateValues())
		}
		want[backendpool.CanonicalIP(ip)] = v
	}
	if len(want) == 0 {
		return nil
	}
	outcomes, err := m.apply(ctx, want)
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range outcomes {
		if o.err != nil {
			errs = append(errs, o.err)
		}
	}
	return errors.Join(errs...)
}

// ApplyNodes applies the targets in one apply (one GET and at most one PUT
// per pool, whatever the number of targets) and returns one Result per
// target, in order. Targets whose state was last applied successfully are
// skipped. Two targets claiming one address with different states both
// fail.
func (m *Manager) ApplyNodes(ctx context.Context, targets []Target) []Result {
	results := make([]Result, len(targets))
	keys := make([]string, len(targets))
	norm := make([]State, len(targets))
	want := map[string]State{}
	claim := map[string]int{}
	active := make([]bool, len(targets))
	for i, t := range targets {
		s, ok := validState(t.State)
		if !ok {
			results[i].Err = fmt.Errorf("adminstate: node %s: admin state %q is not one of %v", t.Node, t.State,
				armnetwork.PossibleLoadBalancerBackendAddressAdminStateValues())
			continue
		}
		norm[i], keys[i] = s, ipsKey(t.IPs)
		if m.upToDate(t.UID, s, keys[i]) {
			results[i].Skipped = true
			continue
		}
		active[i] = true
		for _, ip := range t.IPs {
			ip = backendpool.CanonicalIP(ip)
			if j, ok := claim[ip]; ok && j != i && !sameState(norm[j], s) {
				err := fmt.Errorf("adminstate: address %s is claimed by nodes %s (%s) and %s (%s)", ip, targets[j].Node, norm[j], t.Node, s)
				results[i].Err, results[j].Err = err, errors.Join(results[j].Err, err)
				continue
			}
			claim[ip], want[ip] = i, s
		}
	}
	for i := range targets {
		if results[i].Err != nil {
			active[i] = false
			for _, ip := range targets[i].IPs {
				if claim[backendpool.CanonicalIP(ip)] == i {
					delete(want, backendpool.CanonicalIP(ip))
				}
			}
		}
	}
	var outcomes []poolOutcome
	var resolveErr error
	if len(want) > 0 {
		outcomes, resolveErr = m.apply(ctx, want)
	}
	for i, t := range targets {
		if !active[i] {
			continue
		}
		r := &results[i]
		if resolveErr != nil {
			r.Err = resolveErr
			m.Forget(t.UID)
			continue
		}
		mine := map[string]bool{}
		for _, ip := range t.IPs {
			mine[backendpool.CanonicalIP(ip)] = true
		}
		var errs []error
		for _, o := range outcomes {
			hit := o.holdsAny(mine)
			if hit {
				r.Pools = append(r.Pools, o.ref)
				r.Changed += o.countChanged(mine)
			}
			if o.err != nil && (hit || !o.known) {
				errs = append(errs, o.err)
			}
		}
		r.Err = errors.Join(errs...)
		if r.Err != nil {
			m.Forget(t.UID)
		} else {
			m.remember(t.UID, norm[i], keys[i])
		}
	}
	return results
}

func ipsKey(ips []string) string {
	c := make([]string, 0, len(ips))
	for _, ip := range ips {
		c = append(c, backendpool.CanonicalIP(ip))
	}
	sort.Strings(c)
	return strings.Join(slices.Compact(c), ",")
}

func (m *Manager) upToDate(uid types.UID, s State, ips string) bool {
	if uid == "" {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.applied[uid]
	return ok && a.ips == ips && sameState(a.state, s)
}

func (m *Manager) remember(uid types.UID, s State, ips string) {
	if uid == "" {
		return
	}
	m.mu.Lock()
	m.applied[uid] = appliedState{state: s, ips: ips}
	m.mu.Unlock()
}

// poolOutcome is what happened to one pool in an apply.
type poolOutcome struct {
	ref PoolRef
	// known: the pool was read, so found is the set of desired addresses
	// it holds. An unknown pool's error concerns every target.
	known   bool
	found   []string
	changed []string
	written bool
	err     error
}

func (o *poolOutcome) holdsAny(ips map[string]bool) bool {
	return slices.ContainsFunc(o.found, func(ip string) bool { return ips[ip] })
}

func (o *poolOutcome) countChanged(ips map[string]bool) int {
	n := 0
	for _, ip := range o.changed {
		if ips[ip] {
			n++
		}
	}
	return n
}

// apply runs one locked apply of want (canonical IP -> state). The error is
// a resolution failure (no pool was touched); pool failures are in the
// outcomes.
func (m *Manager) apply(ctx context.Context, want map[string]State) ([]poolOutcome, error) {
	log := klog.FromContext(ctx)
	rg := m.backend.ResourceGroup()
	mc := metrics.NewMetricContextWithClock(m.clock, MetricPrefix, MetricRequestUpdate, rg, m.sub, m.source).WithContext(ctx)

	m.lock.Lock(LockCaller)
	outcomes, err := m.applyLocked(ctx, rg, want)
	m.lock.Unlock()

	failed := err != nil
	writes := 0
	for _, o := range outcomes {
		failed = failed || o.err != nil
		if o.written {
			writes++
		}
	}
	mc.ObserveOperationWithResult(!failed, "addresses", fmt.Sprint(len(want)), "pools", fmt.Sprint(len(outcomes)), "writes", fmt.Sprint(writes))
	if err != nil {
		return nil, err
	}
	log.V(4).Info("Applied backend admin state", "addresses", len(want), "pools", len(outcomes), "writes", writes)
	return outcomes, nil
}

func (m *Manager) applyLocked(ctx context.Context, rg string, want map[string]State) ([]poolOutcome, error) {
	ips := make([]string, 0, len(want))
	for ip := range want {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	refs, err := m.backend.PoolsWithAddresses(ctx, ips)
	if err != nil {
		return nil, fmt.Errorf("adminstate: resolve backend pools of %d addresses: %w", len(ips), err)
	}
	byLB := map[string][]PoolRef{}
	var lbs []string
	seen := map[PoolRef]bool{}
	for _, r := range refs {
		if seen[r] {
			continue
		}
		seen[r] = true
		if _, ok := byLB[r.LoadBalancer]; !ok {
			lbs = append(lbs, r.LoadBalancer)
		}
		byLB[r.LoadBalancer] = append(byLB[r.LoadBalancer], r)
	}
	results := make([][]poolOutcome, len(lbs))
	var wg sync.WaitGroup
	for i, lb := range lbs {
		wg.Go(func() { results[i] = m.applyLB(ctx, rg, lb, byLB[lb], want) })
	}
	wg.Wait()
	var out []poolOutcome
	for _, r := range results {
		out = append(out, r...)
	}
	return out, nil
}

// applyLB updates the pools of one load balancer: parallel fresh GETs, then
// parallel PUTs of the pools that changed.
//
// The pools of a load balancer share its etag, so a PUT of one changes the
// etag the others were read at. A single changed pool is written with
// If-Match (the etag read). Several are written concurrently without it:
// with it, all but the first would fail 412, and writing them one after the
// other costs a round trip each. What keeps them safe is what the design
// relies on for every pool writer: the service-reconcile lock, held from
// the GETs to the last PUT, keeps the Service reconcile and the local
// service updater out. A write that conflicts anyway (412; or 409 because
// ARM was still busy with a sibling's asynchronous write) is retried once
// after the concurrent round, one pool at a time, with a fresh GET and
// If-Match.
func (m *Manager) applyLB(ctx context.Context, rg, lb string, pools []PoolRef, want map[string]State) []poolOutcome {
	m.backend.InvalidateCache(lb)
	defer m.backend.InvalidateCache(lb)
	client := m.backend.BackendPools()
	fetched := make([]*armnetwork.BackendAddressPool, len(pools))
	getErrs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i, ref := range pools {
		wg.Go(func() { fetched[i], getErrs[i] = client.Get(ctx, rg, lb, ref.Pool) })
	}
	wg.Wait()

	out := make([]poolOutcome, len(pools))
	var writes []int
	for i, ref := range pools {
		o := &out[i]
		o.ref = ref
		if err := getErrs[i]; err != nil {
			if azure.Classify(err) == azure.ClassStale {
				o.known = true // gone: nothing to update
				continue
			}
			o.err = fmt.Errorf("backend pool %s: %w", ref, err)
			continue
		}
		o.known = true
		o.changed, o.found = setAdminState(fetched[i], want)
		if len(o.changed) > 0 {
			writes = append(writes, i)
		}
	}
	ifMatch := len(writes) == 1
	conflicted := make([]bool, len(pools))
	for _, i := range writes {
		wg.Go(func() { conflicted[i] = m.putPool(ctx, rg, pools[i], fetched[i], ifMatch, &out[i]) })
	}
	wg.Wait()
	for _, i := range writes {
		if conflicted[i] {
			m.retryPool(ctx, rg, pools[i], want, &out[i])
		}
	}
	return out
}

// putPool writes a changed pool and records the outcome; it reports whether
// the write failed with a conflict (412 or 409), which retryPool may fix.
func (m *Manager) putPool(ctx context.Context, rg string, ref PoolRef, pool *armnetwork.BackendAddressPool, ifMatch bool, o *poolOutcome) bool {
	etag := ""
	if ifMatch && pool.Etag != nil {
		etag = *pool.Etag
	}
	_, err := m.backend.BackendPools().CreateOrUpdate(ctx, rg, ref.LoadBalancer, ref.Pool, *pool, etag)
	if err == nil {
		o.written, o.err = true, nil
		klog.FromContext(ctx).V(2).Info("Set backend admin state", "loadBalancer", ref.LoadBalancer, "pool", ref.Pool,
			"entries", len(o.changed))
		return false
	}
	o.changed = nil
	class := azure.Classify(err)
	if class == azure.ClassStale {
		o.err = nil // the pool went away: nothing left to update
		return false
	}
	o.err = fmt.Errorf("backend pool %s: %w", ref, err)
	return class == azure.ClassConflict
}

// retryPool retries a conflicted pool once: a fresh GET, the admin states
// set again, and a PUT with the etag just read.
func (m *Manager) retryPool(ctx context.Context, rg string, ref PoolRef, want map[string]State, o *poolOutcome) {
	klog.FromContext(ctx).V(2).Info("Backend pool write conflicted; retrying with a fresh read",
		"loadBalancer", ref.LoadBalancer, "pool", ref.Pool, "err", o.err)
	fresh, err := m.backend.BackendPools().Get(ctx, rg, ref.LoadBalancer, ref.Pool)
	if err != nil {
		if azure.Classify(err) == azure.ClassStale {
			o.err = nil
			return
		}
		o.err = errors.Join(o.err, fmt.Errorf("backend pool %s: %w", ref, err))
		return
	}
	o.changed, o.found = setAdminState(fresh, want)
	if len(o.changed) == 0 {
		o.err = nil
		return
	}
	m.putPool(ctx, rg, ref, fresh, true, o)
}
