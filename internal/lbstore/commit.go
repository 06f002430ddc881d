package lbstore

import (
	"context"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// Mutation edits a load balancer for one caller. lb is a private copy (an
// empty new load balancer when it does not exist and the change may create
// it). Contract: see the package documentation (check before changing; may
// run more than once).
type Mutation func(lb *armnetwork.LoadBalancer) (changed bool, err error)

// PoolEdit edits one backend pool. Contract: as Mutation. Edit gets a
// private copy of the pool as ARM holds it.
type PoolEdit struct {
	Ref  PoolRef
	Edit func(pool *armnetwork.BackendAddressPool) (changed bool, err error)
}

// PoolResult is what became of one PoolEdit.
type PoolResult struct {
	Ref PoolRef
	// Pool is the pool after the round, as written or as read (shared: do
	// not modify); nil when Missing.
	Pool *armnetwork.BackendAddressPool
	// Written: a PUT that includes this edit succeeded.
	Written bool
	// Missing: the pool or its load balancer does not exist; nothing was
	// done and that is not an error.
	Missing bool
	// Err is the edit's own error, or the ARM error of the read or write.
	Err error
}

// UpdateOptions tune UpdateLB.
type UpdateOptions struct {
	// Create lets the change create the load balancer when it does not
	// exist (an empty Standard load balancer is passed to the mutation).
	Create bool
	// AssumeAbsent, with Create, skips the read of a load balancer the
	// store has no cached copy of: the caller knows it does not exist (it
	// just listed the resource group, see List) and the mutation starts
	// from a new one. Should it exist after all, the write replaces it (it
	// is sent without If-Match); only a caller that owns the load balancer
	// whole may set it. A conflict retry reads as usual.
	AssumeAbsent bool
	// Fresh: before the round declares the load balancer unchanged (or
	// creates or deletes it) from the cached copy, it reads it from ARM and
	// applies the mutations again, so a caller about to report the load
	// balancer as it wants it (a Service reconcile) has compared with what
	// Azure holds now: an out-of-band change inside the cache TTL is seen
	// and repaired. A changed copy is written with its etag and needs no
	// read (a stale copy costs a 412). The changes of a round share the
	// read.
	Fresh bool
}

// PoolOptions tune UpdatePools.
type PoolOptions struct {
	// TrustCache: when a pool's cached copy is fresh and every edit leaves
	// it unchanged, nothing is read or written. Without it every pool is
	// read afresh (what verifying callers want).
	TrustCache bool
	// WriteFromCache: when the load balancer's cached copy is fresh with a
	// known etag and the edits change its pools, they are written from that
	// copy without reading them first, each with If-Match (a 412 is retried
	// with a fresh read, as always): one round trip per pool instead of a
	// read and a write. At most two pools of one load balancer per round go
	// this way (one after another: each waits for the etag the previous one
	// returned); with more, or when every edit of a pool leaves the cached
	// copy unchanged, the pools are read afresh. For callers whose writes
	// are latency-critical (the admin state of a node leaving service).
	WriteFromCache bool
}

// change is one queued request.
type change struct {
	caller  string
	lb      string
	ctx     context.Context
	queued  time.Time
	started bool // taken by a round (guarded by Store.mu)
	done    chan struct{}

	// A load balancer deletion, a load balancer mutation...
	del          bool
	mutate       Mutation
	create       bool
	assumeAbsent bool
	fresh        bool
	lbOut        *armnetwork.LoadBalancer
	// ...or a pool edit.
	pool       *PoolEdit
	trustCache bool
	fromCache  bool
	poolOut    PoolResult

	err error
}

// finished reports whether finish was called.
func (c *change) finished() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *change) finish(err error) {
	if c.err == nil {
		c.err = err
	}
	if c.pool != nil && c.poolOut.Err == nil {
		c.poolOut.Err = c.err
	}
	close(c.done)
}

// UpdateLB applies the mutation to the load balancer in the next round and
// returns the load balancer as ARM holds it afterwards (nil when it does not
// exist or was deleted). A load balancer left without frontends is deleted.
// caller labels the wait metric.
func (s *Store) UpdateLB(ctx context.Context, caller, name string, o UpdateOptions, m Mutation) (*armnetwork.LoadBalancer, error) {
	c := &change{caller: caller, lb: name, mutate: m, create: o.Create, assumeAbsent: o.Create && o.AssumeAbsent, fresh: o.Fresh, done: make(chan struct{})}
	if err := s.submit(ctx, []*change{c}); err != nil {
		return nil, err
	}
	return c.lbOut, c.err
}

// Delete deletes a load balancer in the next round, whatever it holds:
// with a Decoupler, its pools are first taken out of every scale set
// model, VM and network interface that lists them, as for a load balancer
// left without frontends. A load balancer that does not exist is not an
// error. Mutations of the same load balancer queued in the same round run
// after the deletion (on no load balancer). caller labels the wait metric.
func (s *Store) Delete(ctx context.Context, caller, name string) error {
	c := &change{caller: caller, lb: name, del: true, done: make(chan struct{})}
	if err := s.submit(ctx, []*change{c}); err != nil {
		return err
	}
	return c.err
}

// UpdatePools applies the edits in the next round and returns one result
// per edit, in order.
func (s *Store) UpdatePools(ctx context.Context, caller string, edits []PoolEdit, o PoolOptions) []PoolResult {
	cs := make([]*change, len(edits))
	for i := range edits {
		cs[i] = &change{caller: caller, lb: edits[i].Ref.LoadBalancer, pool: &edits[i], trustCache: o.TrustCache, fromCache: o.WriteFromCache,
			poolOut: PoolResult{Ref: edits[i].Ref}, done: make(chan struct{})}
	}
	// Edits that leave a fresh cached pool as it is need no round.
	pending := s.settleFromCache(cs)
	if len(pending) > 0 {
		if err := s.submit(ctx, pending); err != nil {
			for _, c := range pending {
				if !c.finished() {
					c.finish(err)
				}
			}
		}
	}
	out := make([]PoolResult, len(cs))
	for i, c := range cs {
		out[i] = c.poolOut
	}
	return out
}

// round writes one batch of changes: load balancers concurrently, each one's
// deletions first, then its mutations, then its pool edits.
func (s *Store) round(ctx context.Context, taken []*change) {
	byLB := map[string][]*change{}
	var order []string
	for _, c := range taken {
		if err := c.ctx.Err(); err != nil {
			c.finish(err) // its caller gave up before the round started
			continue
		}
		s.observeWait(c)
		k := lower(c.lb)
		if _, ok := byLB[k]; !ok {
			order = append(order, k)
		}
		byLB[k] = append(byLB[k], c)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		batch := byLB[k]
		wg.Go(func() {
			var dels, muts, edits []*change
			for _, c := range batch {
				switch {
				case c.del:
					dels = append(dels, c)
				case c.pool != nil:
					edits = append(edits, c)
				default:
					muts = append(muts, c)
				}
			}
			if len(dels) > 0 {
				s.deleteWhole(ctx, batch[0].lb, dels)
			}
			if len(muts) > 0 {
				s.writeLB(ctx, batch[0].lb, muts)
			}
			if len(edits) > 0 {
				s.writePools(ctx, batch[0].lb, edits)
			}
		})
	}
	wg.Wait()
}
