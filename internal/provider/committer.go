package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
)

// mutation edits a load balancer for one Service. lb is nil when the load
// balancer does not exist yet; a mutation that needs it returns a fresh one
// through create. It must validate before it edits: a mutation that returns
// an error must leave lb untouched, because other Services' mutations share
// the same write.
type mutation func(lb *armnetwork.LoadBalancer) (changed bool, err error)

// commitResult is what a Service's mutation ended in: the load balancer as
// ARM returned it after the write (nil when it was deleted or never existed).
type commitResult struct {
	lb  *armnetwork.LoadBalancer
	err error
}

type pendingChange struct {
	lbName string
	mutate mutation
	create bool // the load balancer may be created for this change
	done   chan commitResult
}

// committer applies Services' changes to load balancers with group commit.
// While one writer holds the service-reconcile lock, changes from other
// workers queue up; the next writer takes every queued change, and, still
// under the one lock, writes each load balancer that has changes in
// parallel: one GET (usually from the cache) and one PUT per load balancer,
// however many Services changed. A strictly serial reconcile would spend a
// GET and a PUT round trip per Service.
type committer struct {
	p       *Provider
	mu      sync.Mutex
	pending []*pendingChange
	running bool
}

func newCommitter(p *Provider) *committer { return &committer{p: p} }

// apply queues the mutation for the load balancer and returns once a write
// that includes it has finished. The caller that finds the committer idle
// becomes the writer and keeps writing until nothing is queued.
func (c *committer) apply(ctx context.Context, lbName, caller string, create bool, m mutation) (*armnetwork.LoadBalancer, error) {
	ch := &pendingChange{lbName: lbName, mutate: m, create: create, done: make(chan commitResult, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, ch)
	leader := !c.running
	c.running = true
	c.mu.Unlock()

	if leader {
		c.drain(ctx, caller)
	}
	select {
	case r := <-ch.done:
		return r.lb, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drain writes rounds until the queue is empty. Each round holds the
// service-reconcile lock once and writes its load balancers concurrently.
func (c *committer) drain(ctx context.Context, caller string) {
	for {
		c.mu.Lock()
		taken := c.pending
		c.pending = nil
		if len(taken) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()

		byLB := map[string][]*pendingChange{}
		var order []string
		for _, ch := range taken {
			key := strings.ToLower(ch.lbName)
			if _, ok := byLB[key]; !ok {
				order = append(order, key)
			}
			byLB[key] = append(byLB[key], ch)
		}
		c.p.lock.Lock(caller)
		var wg sync.WaitGroup
		for _, key := range order {
			batch := byLB[key]
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.writeBatch(ctx, batch[0].lbName, batch)
			}()
		}
		wg.Wait()
		c.p.lock.Unlock()
	}
}

// maxConflictRetries bounds how often a batch is re-read and re-applied
// after a 412 or 409 within one write.
const maxConflictRetries = 2

// writeBatch writes one load balancer's changes. The caller holds the
// service-reconcile lock.
func (c *committer) writeBatch(ctx context.Context, lbName string, batch []*pendingChange) {
	p := c.p
	log := logger(ctx).WithValues("loadBalancer", lbName, "changes", len(batch))

	var err error
	for attempt := 0; ; attempt++ {
		var results []commitResult
		results, err = c.tryBatch(ctx, lbName, batch)
		if err == nil {
			for i, ch := range batch {
				ch.done <- results[i]
			}
			return
		}
		p.forgetOnConflict(lbName, err)
		if azure.Classify(err) != azure.ClassConflict || attempt >= maxConflictRetries {
			break
		}
		log.V(2).Info("Load balancer changed underneath the write; retrying with a fresh read", "err", err, "attempt", attempt+1)
	}
	for _, ch := range batch {
		ch.done <- commitResult{err: err}
	}
}

// tryBatch reads the load balancer, applies every mutation and writes once.
// Per-change validation errors go to that change only; an ARM error fails the
// batch.
func (c *committer) tryBatch(ctx context.Context, lbName string, batch []*pendingChange) ([]commitResult, error) {
	p := c.p
	current, err := p.getLB(ctx, lbName)
	if err != nil {
		return nil, err
	}
	results := make([]commitResult, len(batch))
	var lb *armnetwork.LoadBalancer
	if current != nil {
		lb = cloneLB(current)
	}
	changed := false
	for i, ch := range batch {
		target := lb
		if target == nil {
			if !ch.create {
				continue // nothing to remove from a load balancer that does not exist
			}
			target = p.newLB(lbName)
		}
		did, err := ch.mutate(target)
		if err != nil {
			results[i].err = err
			continue
		}
		if did {
			lb, changed = target, true
		}
	}
	rg := p.lbResourceGroup()
	var written *armnetwork.LoadBalancer
	switch {
	case !changed:
		written = current
	case current != nil && frontendCount(lb) == 0:
		if err := p.clients.LoadBalancer.Delete(ctx, rg, lbName); err != nil && azure.Classify(err) != azure.ClassStale {
			return nil, fmt.Errorf("delete load balancer %s/%s: %w", rg, lbName, err)
		}
		p.cache.set(rg, lbName, nil)
		p.members.setLB(lbName, nil)
		logger(ctx).Info("Deleted load balancer without frontends", "loadBalancer", lbName)
	case current == nil && frontendCount(lb) == 0:
		written = nil
	default:
		etag := ""
		if current != nil {
			etag = deref(current.Etag)
		}
		p.cache.invalidate(rg, lbName)
		out, err := p.clients.LoadBalancer.CreateOrUpdate(ctx, rg, lbName, *lb, etag)
		if err != nil {
			return nil, fmt.Errorf("write load balancer %s/%s: %w", rg, lbName, err)
		}
		// What ARM returned for the write is the load balancer a GET would
		// return now (same etag): it replaces the stale entry.
		p.cache.set(rg, lbName, out)
		p.members.setLB(lbName, out)
		written = out
	}
	for i := range results {
		if results[i].err == nil {
			results[i].lb = written
		}
	}
	return results, nil
}

// newLB is an empty Standard load balancer in the cluster's location.
func (p *Provider) newLB(name string) *armnetwork.LoadBalancer {
	return &armnetwork.LoadBalancer{
		Name:     to.Ptr(name),
		Location: to.Ptr(p.cfg.Location),
		SKU: &armnetwork.LoadBalancerSKU{
			Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard),
			Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional),
		},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{},
	}
}

// cloneLB copies a load balancer deeply enough for the mutations in
// merge.go: they replace, add and remove elements of the frontend, rule,
// probe and pool lists but never modify an element in place, so cloning
// the lists (not the elements) keeps the cached original untouched. A JSON
// round trip would be simpler, but on a load balancer with hundreds of rules
// it cost more than half of a cold start's CPU.
func cloneLB(lb *armnetwork.LoadBalancer) *armnetwork.LoadBalancer {
	out := *lb
	if lb.Properties != nil {
		props := *lb.Properties
		props.FrontendIPConfigurations = slices.Clone(props.FrontendIPConfigurations)
		props.LoadBalancingRules = slices.Clone(props.LoadBalancingRules)
		props.Probes = slices.Clone(props.Probes)
		props.BackendAddressPools = slices.Clone(props.BackendAddressPools)
		out.Properties = &props
	}
	return &out
}
