package adminstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/lbstore"
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
	// Policy is the pool-entry policy (which nodes belong in pools).
	Policy backendpool.Policy
	// Members resolves nodes to their NIC-based members; nil: entries are
	// matched by IP address only.
	Members NodeMembers
	// LocalPools tells which entries of Local Services' dedicated pools
	// their endpoints keep Down (backendpool.LocalPools: nodes whose
	// endpoints are all terminating but serving); those entries stay Down
	// whatever the node's taints say. nil: no pool is a Local Service's
	// (single load balancer mode).
	LocalPools LocalPools
	// LocalPoolsSynced reports whether the informers behind LocalPools
	// have synced; the controller waits for it before its first apply, so
	// a restart never reads an empty endpoint list as "nothing drains".
	LocalPoolsSynced cache.InformerSynced
}

// LocalPools tells, for the named pools, which are Local Services'
// dedicated pools with nodes draining for their Service: the names of
// those nodes (their entries' names), keyed by the lower-cased pool name.
type LocalPools interface {
	Draining(pools []string) (map[string]sets.Set[string], error)
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
	// Members are the owners of the node's NIC-based pool members
	// (backendpool.EntryKey: its scale set VM's id, or its NICs' ids);
	// every NIC-derived entry of one of them is updated.
	Members []string
	// State is None, Down or Up.
	State State
	// Pooled: the pool-entry policy puts the node in backend pools
	// (backendpool.Policy.Pooled). Finding such a node in no pool is
	// checked against Azure before it counts as done.
	Pooled bool
}

// keys are what the target's pool entries are matched by: its IP
// addresses and its NIC-based members' owners.
func (t Target) keys() []string {
	return append(append(make([]string, 0, len(t.IPs)+len(t.Members)), t.IPs...), t.Members...)
}

// NodeMembers tells the owners of a node's NIC-based pool members
// (backendpool.EntryKey), for NIC-based pools.
type NodeMembers interface {
	MemberKeys(ctx context.Context, node *v1.Node) ([]string, error)
}

// Result is the outcome of one Target.
type Result struct {
	// Pools hold at least one address of the node (sorted). Empty when
	// Skipped.
	Pools []lbstore.PoolRef
	// Changed counts the node's entries whose admin state was written.
	Changed int
	// Skipped: the same state was last applied successfully for the same
	// node UID and addresses; no ARM call was made.
	Skipped bool
	// Err is every failure that may concern the node, joined; each names
	// the load balancer and pool.
	Err error
}

// Manager sets the admin state of backend pool entries through the store:
// it resolves the pools holding the addresses (lbstore.Store.PoolsWith, from
// the store's coherent cache), then has the store read every such pool
// afresh, change the matching entries and write each changed pool once, all
// pools in parallel (the store's conflict policy applies). A node that the
// pool-entry policy puts in pools but that the cache places in none is
// looked up again in Azure before the Manager concludes there is nothing to
// do.
//
// It remembers, per node UID, the last state applied successfully, so
// applying the same state again costs no ARM call. A new Manager (a restart)
// has an empty memory and so verifies with GETs.
//
// Manager is safe for concurrent use.
type Manager struct {
	store   *lbstore.Store
	policy  backendpool.Policy
	members NodeMembers
	local   LocalPools
	synced  cache.InformerSynced
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

// NewManager builds a Manager. store is required.
func NewManager(store *lbstore.Store, opts ManagerOptions) (*Manager, error) {
	if store == nil {
		return nil, errors.New("adminstate: NewManager: store is required")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	src := opts.Source
	if src == "" {
		src = azure.DefaultSource
	}
	return &Manager{store: store, policy: opts.Policy, members: opts.Members, local: opts.LocalPools, synced: opts.LocalPoolsSynced,
		clock: clk, sub: opts.SubscriptionID, source: src, applied: map[types.UID]appliedState{}}, nil
}

// Pooled reports whether the pool-entry policy puts the node in backend
// pools of either family.
func (m *Manager) Pooled(n *v1.Node) bool {
	return m.policy.Pooled(n, v1.IPv4Protocol) || m.policy.Pooled(n, v1.IPv6Protocol)
}

// DrainPeriod is the drain period of the pools azlb owns
// (loadBalancerBackendPoolDrainPeriodInSeconds; 0 when unset).
func (m *Manager) DrainPeriod() time.Duration {
	return time.Duration(m.policy.DrainPeriodInSeconds) * time.Second
}

// OutOfServiceReasons lists the node's taints that take it out of rotation
// under the pool-entry policy (backendpool.Policy.OutOfServiceReasons: the
// built-in taints and loadBalancerAdminStateTaints).
func (m *Manager) OutOfServiceReasons(n *v1.Node) []string { return m.policy.OutOfServiceReasons(n) }

// DesiredState is the admin state the node's taints call for under the
// pool-entry policy: Down with any of OutOfServiceReasons, None otherwise.
func (m *Manager) DesiredState(n *v1.Node) State { return m.policy.DesiredState(n) }

// MemberKeys returns the owners of the node's NIC-based pool members (none
// without a NodeMembers).
func (m *Manager) MemberKeys(ctx context.Context, n *v1.Node) ([]string, error) {
	if m.members == nil {
		return nil, nil
	}
	return m.members.MemberKeys(ctx, n)
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
	outcomes, err := m.apply(ctx, want, lbstore.Cached)
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
	b := m.plan(targets)
	var outcomes []poolOutcome
	var resolveErr error
	if len(b.want) > 0 {
		outcomes, resolveErr = m.apply(ctx, b.want, lbstore.Cached)
	}
	if resolveErr == nil {
		// A node that belongs in pools but was found in none: the cache may
		// not know a pool yet (or Azure changed outside azlb). Look again in
		// Azure before concluding there is nothing to do.
		if again := b.foundNowhere(targets, outcomes); len(again) > 0 {
			more, err := m.apply(ctx, again, lbstore.FromAzure)
			outcomes, resolveErr = append(outcomes, more...), err
		}
	}
	for i, t := range targets {
		if !b.active[i] {
			continue
		}
		r := &b.results[i]
		if resolveErr != nil {
			r.Err = resolveErr
			m.Forget(t.UID)
			continue
		}
		r.settle(t.keys(), outcomes)
		if r.Err != nil {
			m.Forget(t.UID)
		} else {
			m.remember(t.UID, b.norm[i], b.keys[i])
		}
	}
	return b.results
}

// batch is what ApplyNodes will do for its targets.
type batch struct {
	results []Result
	keys    []string // each target's addresses, as a cache key
	norm    []State  // each target's state, canonical
	active  []bool   // the target needs ARM calls
	want    map[string]State
	claim   map[string]int // canonical IP -> target claiming it
}

// plan validates the targets, skips those the memory says are done, and
// collects the states every address must have. Two targets claiming one
// address with different states both fail.
func (m *Manager) plan(targets []Target) *batch {
	b := &batch{results: make([]Result, len(targets)), keys: make([]string, len(targets)), norm: make([]State, len(targets)),
		active: make([]bool, len(targets)), want: map[string]State{}, claim: map[string]int{}}
	for i, t := range targets {
		s, ok := validState(t.State)
		if !ok {
			b.results[i].Err = fmt.Errorf("adminstate: node %s: admin state %q is not one of %v", t.Node, t.State,
				armnetwork.PossibleLoadBalancerBackendAddressAdminStateValues())
			continue
		}
		b.norm[i], b.keys[i] = s, ipsKey(t.keys())
		if m.upToDate(t.UID, s, b.keys[i]) {
			b.results[i].Skipped = true
			continue
		}
		b.active[i] = true
		for _, ip := range t.keys() {
			ip = backendpool.CanonicalIP(ip)
			if j, ok := b.claim[ip]; ok && j != i && !sameState(b.norm[j], s) {
				err := fmt.Errorf("adminstate: address %s is claimed by nodes %s (%s) and %s (%s)", ip, targets[j].Node, b.norm[j], t.Node, s)
				b.results[i].Err, b.results[j].Err = err, errors.Join(b.results[j].Err, err)
				continue
			}
			b.claim[ip], b.want[ip] = i, s
		}
	}
	for i := range targets {
		if b.results[i].Err == nil {
			continue
		}
		b.active[i] = false
		for _, ip := range targets[i].keys() {
			if b.claim[backendpool.CanonicalIP(ip)] == i {
				delete(b.want, backendpool.CanonicalIP(ip))
			}
		}
	}
	return b
}

// foundNowhere returns the states of the addresses of the pooled targets
// that no outcome's pool holds.
func (b *batch) foundNowhere(targets []Target, outcomes []poolOutcome) map[string]State {
	again := map[string]State{}
	for i, t := range targets {
		if !b.active[i] || !t.Pooled || foundIn(outcomes, t.keys()) {
			continue
		}
		for _, ip := range t.keys() {
			if ip = backendpool.CanonicalIP(ip); b.claim[ip] == i {
				again[ip] = b.want[ip]
			}
		}
	}
	return again
}

// settle fills the result of a target with the addresses ips from the
// pools' outcomes: the pools that hold it, its entries changed, and every
// error that may concern it (its pools', and those of pools that could not
// be read).
func (r *Result) settle(ips []string, outcomes []poolOutcome) {
	mine := map[string]bool{}
	for _, ip := range ips {
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
}

// foundIn reports whether an outcome's pool holds one of the addresses.
func foundIn(outcomes []poolOutcome, ips []string) bool {
	mine := map[string]bool{}
	for _, ip := range ips {
		mine[backendpool.CanonicalIP(ip)] = true
	}
	for _, o := range outcomes {
		if o.holdsAny(mine) {
			return true
		}
	}
	return false
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
	ref lbstore.PoolRef
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

// apply runs one apply of want (canonical IP -> state), resolving pools
// from src. The error is a resolution failure (no pool was touched); pool
// failures are in the outcomes.
func (m *Manager) apply(ctx context.Context, want map[string]State, src lbstore.Source) ([]poolOutcome, error) {
	log := klog.FromContext(ctx)
	rg := m.store.ResourceGroup()
	mc := metrics.NewMetricContextWithClock(m.clock, MetricPrefix, MetricRequestUpdate, rg, m.sub, m.source).WithContext(ctx)

	outcomes, err := m.update(ctx, want, src)
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

// update resolves the pools holding the addresses and has the store set the
// admin states in all of them in one round.
func (m *Manager) update(ctx context.Context, want map[string]State, src lbstore.Source) ([]poolOutcome, error) {
	ips := make([]string, 0, len(want))
	for ip := range want {
		ips = append(ips, ip)
	}
	sort.Strings(ips)
	refs, err := m.store.PoolsWith(ctx, ips, src)
	if err != nil {
		return nil, fmt.Errorf("adminstate: resolve backend pools of %d addresses: %w", len(ips), err)
	}
	if len(refs) == 0 {
		return nil, nil
	}
	keepDown, err := m.draining(refs)
	if err != nil {
		return nil, fmt.Errorf("adminstate: endpoints of the Local Services' pools: %w", err)
	}
	out := make([]poolOutcome, len(refs))
	edits := make([]lbstore.PoolEdit, len(refs))
	for i, ref := range refs {
		o := &out[i]
		o.ref = ref
		edits[i] = lbstore.PoolEdit{Ref: ref, Edit: func(pool *armnetwork.BackendAddressPool) (bool, error) {
			o.changed, o.found = setAdminStateKeeping(pool, want, keepDown[strings.ToLower(ref.Pool)])
			o.known = true
			return len(o.changed) > 0, nil
		}}
	}
	for i, r := range m.store.UpdatePools(ctx, LockCaller, edits, lbstore.PoolOptions{WriteFromCache: true}) {
		o := &out[i]
		switch {
		case r.Missing:
			o.known, o.found, o.changed = true, nil, nil // gone: nothing to update
		case r.Err != nil:
			o.err = fmt.Errorf("backend pool %s: %w", o.ref, r.Err)
			o.changed = nil
		case r.Written:
			o.written = true
			klog.FromContext(ctx).V(2).Info("Set backend admin state", "loadBalancer", o.ref.LoadBalancer, "pool", o.ref.Pool,
				"entries", len(o.changed))
		}
	}
	return out, nil
}

// draining asks LocalPools which entries of the pools their Local
// Service's endpoints keep Down (none without LocalPools).
func (m *Manager) draining(refs []lbstore.PoolRef) (map[string]sets.Set[string], error) {
	if m.local == nil {
		return nil, nil
	}
	pools := make([]string, 0, len(refs))
	for _, r := range refs {
		pools = append(pools, r.Pool)
	}
	return m.local.Draining(pools)
}
