package lbstore

import (
	"context"
	"net/http"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// poolGroup is every edit of one pool in a round.
type poolGroup struct {
	name    string // as the first edit spelled it
	changes []*change
	pool    *armnetwork.BackendAddressPool // the private copy being edited
	changed bool
	missing bool
	err     error // ARM error of the read or write (wrapped)
	out     *armnetwork.BackendAddressPool
	// conflicted: the concurrent PUT hit a 412/409; retried after the round.
	conflicted bool
	// foreign: a 412 showed that someone else changed the load balancer.
	foreign bool
}

// apply runs every edit on g.pool; an edit's error stays with its change.
func (g *poolGroup) apply() {
	g.changed = false
	for _, c := range g.changes {
		c.poolOut.Err = nil
		did, err := c.pool.Edit(g.pool)
		if err != nil {
			c.poolOut.Err = err
			continue
		}
		g.changed = g.changed || did
	}
}

// finish reports the group's outcome to each change.
func (g *poolGroup) finish(written bool) {
	for _, c := range g.changes {
		switch {
		case g.missing:
			c.poolOut.Missing, c.poolOut.Err = true, nil
		case g.err != nil:
			c.poolOut.Err = g.err
		case c.poolOut.Err == nil:
			c.poolOut.Written = written
			c.poolOut.Pool = g.out
		}
		c.finish(nil)
	}
}

// maxChainedPools is the most pools of one load balancer a round writes
// from the cache, one after another: each write waits for the previous one's
// etag, so up to two take no more round trips than reading the pools first
// and writing them concurrently.
const maxChainedPools = 2

// writePools applies the pool edits of one load balancer. When the cached
// copy can be trusted to be current (see writeChained) the pools are written
// from it, one after another, each with If-Match. Otherwise every pool is
// read afresh in parallel (or, with TrustCache, checked against the cache),
// edited, and written if changed; all pools in parallel. See the package
// documentation for If-Match and conflicts.
func (s *Store) writePools(ctx context.Context, lbName string, batch []*change) {
	work := groupPools(s.settleFromCache(batch))
	if len(work) == 0 || s.writeChained(ctx, lbName, work) {
		return
	}
	var wg sync.WaitGroup
	for _, g := range work {
		wg.Go(func() { s.readPool(ctx, lbName, g) })
	}
	wg.Wait()

	var writes []*poolGroup
	for _, g := range work {
		if g.missing || g.err != nil {
			continue
		}
		g.apply()
		if g.changed {
			writes = append(writes, g)
		} else {
			g.out = g.pool
		}
	}
	ifMatch := len(writes) == 1
	if len(writes) > 0 {
		s.cache.writing(lbName)
	}
	for _, g := range writes {
		etag := ""
		if ifMatch {
			etag = ptr.Deref(g.pool.Etag, "")
		}
		wg.Go(func() { s.putPool(ctx, lbName, g, etag) })
	}
	wg.Wait()
	lastEtag, concurrent := lastWritten(writes)
	if etag := s.retryConflicts(ctx, lbName, writes); etag != "" {
		lastEtag, concurrent = etag, false
	}
	s.install(lbName, writes, lastEtag, concurrent)
	for _, g := range work {
		g.finish(g.changed && g.err == nil && !g.missing)
	}
}

// writeChained writes the round's pools of one load balancer from the cached
// copy, without reading them first, when every edit asked for it
// (PoolOptions.WriteFromCache), that copy is fresh with a known etag, holds
// every pool, each pool's edits change it, and there are at most
// maxChainedPools of them. The pools are written one after another, each
// with If-Match on the etag the previous write returned (pools carry their
// load balancer's etag, which every pool write moves), the first on the
// cached one: a write computed from a copy that is no longer current fails
// with 412 and is retried like any conflict, with a fresh read. It returns
// false, having written nothing, when the round must read the pools instead.
// A pool whose edits change nothing on the cached copy is read, as the
// caller did not ask to trust the cache (see settleFromCache for those
// that do).
func (s *Store) writeChained(ctx context.Context, lbName string, work []*poolGroup) bool {
	if len(work) > maxChainedPools {
		return false
	}
	e, fresh := s.cache.get(lbName)
	if !fresh || e.lb == nil || e.etagStale || ptr.Deref(e.lb.Etag, "") == "" {
		return false
	}
	for _, g := range work {
		for _, c := range g.changes {
			if !c.fromCache {
				return false
			}
		}
		cached := findPool(e.lb, g.name)
		if cached == nil {
			return false
		}
		g.pool = copyPool(cached)
		g.apply()
		if !g.changed {
			return false
		}
	}
	s.cache.writing(lbName)
	etag, lastEtag := ptr.Deref(e.lb.Etag, ""), ""
	for _, g := range work {
		if etag == "" {
			// An earlier write of the round conflicted: read afresh.
			g.conflicted = true
			continue
		}
		s.putPool(ctx, lbName, g, etag)
		switch {
		case g.conflicted:
			etag = ""
		case g.err == nil && !g.missing && g.out != nil:
			etag = ptr.Deref(g.out.Etag, "")
			lastEtag = etag
		}
	}
	if retried := s.retryConflicts(ctx, lbName, work); retried != "" {
		lastEtag = retried
	}
	s.install(lbName, work, lastEtag, false)
	for _, g := range work {
		g.finish(g.changed && g.err == nil && !g.missing)
	}
	return true
}

// lastWritten returns the etag of a pool written by the concurrent round,
// and whether several were (then which etag is the last is unknown).
func lastWritten(writes []*poolGroup) (etag string, concurrent bool) {
	n := 0
	for _, g := range writes {
		if g.err == nil && !g.missing && g.out != nil {
			n++
			etag = ptr.Deref(g.out.Etag, "")
		}
	}
	return etag, n > 1
}

// retryConflicts retries the pools whose write hit a 412 or 409, one at a
// time, each with a fresh read and If-Match, up to MaxConflictRetries times.
// It returns the etag of the last successful write ("" when none).
func (s *Store) retryConflicts(ctx context.Context, lbName string, writes []*poolGroup) (lastEtag string) {
	for _, g := range writes {
		for attempt := 1; g.conflicted && attempt <= MaxConflictRetries && ctx.Err() == nil; attempt++ {
			klog.FromContext(ctx).V(2).Info("Backend pool changed underneath the write; retrying with a fresh read",
				"loadBalancer", lbName, "pool", g.name, "attempt", attempt, "err", g.err)
			g.conflicted, g.err = false, nil
			s.readPool(ctx, lbName, g)
			if g.missing || g.err != nil {
				break
			}
			g.apply()
			if !g.changed {
				g.out = g.pool
				break
			}
			s.putPool(ctx, lbName, g, ptr.Deref(g.pool.Etag, ""))
			if g.err == nil && !g.missing && g.out != nil {
				lastEtag = ptr.Deref(g.out.Etag, "")
			}
		}
	}
	return lastEtag
}

// install patches the written pools into the cached load balancer, or drops
// it when a write failed or showed that someone else changed it.
func (s *Store) install(lbName string, writes []*poolGroup, lastEtag string, concurrent bool) {
	var written []*armnetwork.BackendAddressPool
	for _, g := range writes {
		switch {
		case g.err != nil || g.missing || g.foreign:
			s.cache.forget(lbName) // the cached copy can no longer be trusted
			return
		case g.changed:
			written = append(written, g.out)
		}
	}
	if len(written) == 0 {
		return
	}
	if concurrent {
		lastEtag = "" // concurrent writes: which etag is the last is unknown
	}
	s.cache.wrotePools(lbName, written, lastEtag)
}

// groupPools groups the changes (of one load balancer) by pool, in order.
func groupPools(cs []*change) []*poolGroup {
	var groups []*poolGroup
	index := map[string]*poolGroup{}
	for _, c := range cs {
		k := c.pool.Ref.key()
		g, ok := index[k]
		if !ok {
			g = &poolGroup{name: c.pool.Ref.Pool}
			index[k] = g
			groups = append(groups, g)
		}
		g.changes = append(g.changes, c)
	}
	return groups
}

// settleFromCache finishes, without any ARM call, the pools whose every edit
// trusts the cache and leaves the fresh cached pool unchanged (or whose load
// balancer is known not to exist), and returns the other changes.
func (s *Store) settleFromCache(cs []*change) []*change {
	var rest []*change
	for _, g := range groupPools(cs) {
		trust := true
		for _, c := range g.changes {
			trust = trust && c.trustCache
		}
		e, fresh := s.cache.get(g.changes[0].pool.Ref.LoadBalancer)
		if !trust || !fresh {
			rest = append(rest, g.changes...)
			continue
		}
		if e.lb == nil {
			g.missing = true
			g.finish(false)
			continue
		}
		cached := findPool(e.lb, g.name)
		if cached == nil {
			rest = append(rest, g.changes...)
			continue
		}
		g.pool = copyPool(cached)
		g.apply()
		if g.changed {
			for _, c := range g.changes {
				c.poolOut.Err = nil
			}
			rest = append(rest, g.changes...)
			continue
		}
		g.out = cached
		g.finish(false)
	}
	return rest
}

// readPool GETs the pool into g.pool (a private copy).
func (s *Store) readPool(ctx context.Context, lbName string, g *poolGroup) {
	p, err := s.pools.Get(ctx, s.rg, lbName, g.name)
	switch {
	case err == nil:
		g.pool, g.missing, g.err = p, false, nil
	case azure.Classify(err) == azure.ClassStale:
		g.missing = true
	default:
		g.err = s.wrap("get", lbName, g.name, err)
	}
}

// putPool writes g.pool, with If-Match when etag is set; a conflict marks
// the group for a retry.
func (s *Store) putPool(ctx context.Context, lbName string, g *poolGroup, etag string) {
	ifMatch := etag != ""
	out, err := s.pools.CreateOrUpdate(ctx, s.rg, lbName, g.name, writeBody(g.pool), etag)
	if err == nil {
		g.out = out
		klog.FromContext(ctx).V(2).Info("Wrote backend pool", "loadBalancer", lbName, "pool", g.name,
			"entries", entryCount(g.pool), "ifMatch", ifMatch)
		return
	}
	switch azure.Classify(err) {
	case azure.ClassStale:
		g.missing = true
	case azure.ClassConflict:
		g.conflicted = true
		g.foreign = g.foreign || azure.StatusCode(err) == http.StatusPreconditionFailed
		g.err = s.wrap("write", lbName, g.name, err)
	default:
		g.err = s.wrap("write", lbName, g.name, err)
	}
}

// writeBody is the pool as sent: without its backendIPConfigurations, which
// are read-only (ARM ignores them on a write) and which a NIC-based pool
// carries one of per member, doubling the body for nothing.
func writeBody(p *armnetwork.BackendAddressPool) armnetwork.BackendAddressPool {
	body := *p
	if p.Properties != nil && p.Properties.BackendIPConfigurations != nil {
		props := *p.Properties
		props.BackendIPConfigurations = nil
		body.Properties = &props
	}
	return body
}

func entryCount(p *armnetwork.BackendAddressPool) int {
	if p == nil || p.Properties == nil {
		return 0
	}
	return len(p.Properties.LoadBalancerBackendAddresses)
}
