package lbstore

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"golang.org/x/sync/semaphore"

	"github.com/azlb/azlb/internal/metrics"
)

// LBTransferBudget bounds the whole-load-balancer transfers (PUTs and
// GETs) the Store has in flight at once, in elements of the load balancers
// sent or read: frontends, rules, probes, NAT and outbound rules, pools and
// pool members (see writeWeight; a GET counts the size of the load balancer
// when it was last seen). A write encodes the whole load balancer and
// decodes the whole answer, a read decodes it, and while they run those
// buffers are live: for a load balancer of 1,250 members, 250 rules and 250
// probes (about 2,000 elements) several MB. With four such load balancers
// written at once, the live heap at a collection held up to 48 MiB of
// them, and the Go runtime lets the heap grow to twice its live size
// before it collects; bounding the transfers took the scale benchmark's
// peak RSS from 361 to 301-315 MiB (docs/reliability.md, "Scale"). The
// budget lets one load balancer of that size be transferred at a time,
// alongside small ones; a single larger one takes the whole budget and runs
// alone. Small load balancers (a per-Service one of pod-based load
// balancing, a cluster of a few hundred nodes) still go concurrently.
const LBTransferBudget = 2500

// writeSlots is LBTransferBudget as a weighted semaphore
// (golang.org/x/sync/semaphore, first come first served: a large transfer is
// not overtaken forever by small ones), and what each load balancer weighed
// when last seen.
type writeSlots struct {
	max     int64
	sem     *semaphore.Weighted
	waiting atomic.Int32 // acquires waiting for the budget

	mu sync.Mutex
	// seen: each load balancer's weight when it was last read or written
	// (lower-cased name), what a GET of it is charged.
	seen map[string]int64
}

func newWriteSlots(budget int64) *writeSlots {
	return &writeSlots{max: budget, sem: semaphore.NewWeighted(budget), seen: map[string]int64{}}
}

// saw records the weight of a load balancer just read or written (nil: it
// does not exist).
func (w *writeSlots) saw(name string, lb *armnetwork.LoadBalancer) {
	weight := writeWeight(lb)
	w.mu.Lock()
	defer w.mu.Unlock()
	if lb == nil {
		delete(w.seen, lower(name))
		return
	}
	w.seen[lower(name)] = weight
}

// lastWeight is the weight a GET of the load balancer is charged: its
// weight when last seen, 1 when never seen.
func (w *writeSlots) lastWeight(name string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(w.seen[lower(name)], 1)
}

// acquire takes n of the budget (at least 1, at most all of it: a larger
// load balancer is transferred alone), waiting until it is free or ctx
// ends. The caller calls release with the n returned.
func (w *writeSlots) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 1), w.max)
	if w.sem.TryAcquire(n) {
		return n, nil
	}
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	if err := w.sem.Acquire(ctx, n); err != nil {
		return 0, err
	}
	return n, nil
}

// release gives back n of the budget.
func (w *writeSlots) release(n int64) { w.sem.Release(n) }

// writeWeight is a load balancer's size in elements for LBTransferBudget:
// roughly proportional to its JSON and to the memory a write of it holds.
func writeWeight(lb *armnetwork.LoadBalancer) int64 {
	n := 1
	if lb == nil || lb.Properties == nil {
		return int64(n)
	}
	p := lb.Properties
	n += len(p.FrontendIPConfigurations) + len(p.LoadBalancingRules) + len(p.Probes) +
		len(p.InboundNatRules) + len(p.InboundNatPools) + len(p.OutboundRules) + len(p.BackendAddressPools)
	for _, pool := range p.BackendAddressPools {
		if pool != nil && pool.Properties != nil {
			n += len(pool.Properties.LoadBalancerBackendAddresses) + len(pool.Properties.BackendIPConfigurations)
		}
	}
	return int64(n)
}

// acquireTransfer takes n of LBTransferBudget for a GET or PUT (op labels
// the wait metric) and returns what to release.
func (s *Store) acquireTransfer(ctx context.Context, op string, n int64) (int64, error) {
	start := s.clock.Now()
	got, err := s.transfers.acquire(ctx, n)
	if err == nil {
		metrics.ObserveLockWait(TransfersLockName, op, s.clock.Since(start))
	}
	return got, err
}
