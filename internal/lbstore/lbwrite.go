package lbstore

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// writeLB applies a batch of mutations of one load balancer with one write,
// retrying conflicts with a fresh read.
func (s *Store) writeLB(ctx context.Context, name string, batch []*change) {
	log := klog.FromContext(ctx).WithValues("loadBalancer", name, "changes", len(batch))
	var err error
	for attempt := 0; ; attempt++ {
		var written *armnetwork.LoadBalancer
		written, err = s.tryLB(ctx, name, batch, attempt > 0)
		if err == nil {
			for _, c := range batch {
				if c.err == nil {
					c.lbOut = written
				}
				c.finish(nil)
			}
			return
		}
		class := azure.Classify(err)
		if class == azure.ClassConflict || class == azure.ClassStale {
			s.cache.forget(name)
		}
		if class != azure.ClassConflict || attempt >= MaxConflictRetries || ctx.Err() != nil {
			break
		}
		for _, c := range batch {
			c.err = nil // mutations run again on the fresh copy
		}
		log.V(2).Info("Load balancer changed underneath the write; retrying with a fresh read", "err", err, "attempt", attempt+1)
	}
	for _, c := range batch {
		c.err = err
		c.finish(err)
	}
}

// tryLB reads the load balancer (from the cache unless fresh is set or its
// etag is unknown), applies every mutation to one copy and writes it once.
// A mutation's own error goes to its change only; an ARM error is returned.
//
// A batch with a change that asks for a fresh read (UpdateOptions.Fresh)
// is checked against Azure's current state before the store declares the
// load balancer unchanged, or creates or deletes it from its cached copy:
// then it is read and the mutations applied again. A write of a changed
// copy needs no such read: it carries the copy's etag, and a stale copy
// costs a 412 and a fresh read.
func (s *Store) tryLB(ctx context.Context, name string, batch []*change, fresh bool) (*armnetwork.LoadBalancer, error) {
	e, ok := s.cache.get(name)
	readNow := false
	switch {
	case !ok && !fresh && allAssumeAbsent(batch):
		e = &entry{}
	case !ok || fresh || e.etagStale:
		var err error
		if e, err = s.read(ctx, name); err != nil {
			return nil, err
		}
		readNow = true
	}
	current := e.lb
	lb, changed := s.applyBatch(name, current, batch)
	if !readNow && anyFresh(batch) && (!changed || current == nil || frontendCount(lb) == 0) {
		var err error
		if e, err = s.read(ctx, name); err != nil {
			return nil, err
		}
		current = e.lb
		lb, changed = s.applyBatch(name, current, batch)
	}
	log := klog.FromContext(ctx)
	switch {
	case !changed:
		return current, nil
	case current != nil && frontendCount(lb) == 0:
		s.cache.writing(name)
		if err := s.deleteLB(ctx, name); err != nil {
			s.cache.forget(name)
			return nil, err
		}
		s.cache.wrote(name, nil)
		log.Info("Deleted load balancer without frontends", "loadBalancer", name)
		return nil, nil
	case current == nil && frontendCount(lb) == 0:
		return nil, nil
	default:
		etag := ""
		if current != nil {
			etag = ptr.Deref(current.Etag, "")
		}
		// The write's encoded body and decoded answer are live until
		// CreateOrUpdate returns: bounded by LBTransferBudget.
		n, err := s.acquireTransfer(ctx, "put", writeWeight(lb))
		if err != nil {
			return nil, s.wrap("write", name, "", err)
		}
		s.cache.writing(name)
		out, err := s.lbs.CreateOrUpdate(ctx, s.rg, name, *lb, etag)
		s.transfers.release(n)
		if err != nil {
			s.cache.forget(name)
			return nil, s.wrap("write", name, "", err)
		}
		s.cache.wrote(name, out)
		s.transfers.saw(name, out)
		log.V(2).Info("Wrote load balancer", "loadBalancer", name, "created", current == nil)
		return out, nil
	}
}

// applyBatch applies the batch's mutations to a copy of current (a new
// load balancer for a change that may create it) and reports whether any
// changed it. Each mutation's own error goes to its change.
func (s *Store) applyBatch(name string, current *armnetwork.LoadBalancer, batch []*change) (*armnetwork.LoadBalancer, bool) {
	var lb *armnetwork.LoadBalancer
	if current != nil {
		lb = MutableCopy(current)
	}
	changed := false
	for _, c := range batch {
		c.err = nil
		target := lb
		if target == nil {
			if !c.create {
				continue // nothing to change on a load balancer that does not exist
			}
			target = s.newLB(name)
		}
		did, err := c.mutate(target)
		if err != nil {
			c.err = err
			continue
		}
		if did {
			lb, changed = target, true
		}
	}
	return lb, changed
}

func frontendCount(lb *armnetwork.LoadBalancer) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	return len(lb.Properties.FrontendIPConfigurations)
}

// deleteWhole carries out Delete changes of one load balancer: one
// deletion for all of them.
func (s *Store) deleteWhole(ctx context.Context, name string, batch []*change) {
	s.cache.writing(name)
	err := s.deleteLB(ctx, name)
	if err != nil {
		s.cache.forget(name)
	} else {
		s.cache.wrote(name, nil)
		klog.FromContext(ctx).Info("Deleted load balancer", "loadBalancer", name)
	}
	for _, c := range batch {
		c.finish(err)
	}
}

// deleteLB deletes a load balancer, decoupling its pools first (a fresh
// read says which scale set models, VMs and NICs list them). A delete ARM
// refuses because a scale set model still lists a pool
// (LoadBalancerInUseByVirtualMachineScaleSet: one that joined meanwhile)
// decouples that scale set and is tried once more.
func (s *Store) deleteLB(ctx context.Context, name string) error {
	var fresh *armnetwork.LoadBalancer
	if s.decoupler != nil {
		lb, err := s.lbs.Get(ctx, s.rg, name)
		if azure.Classify(err) == azure.ClassStale {
			return nil
		}
		if err != nil {
			return s.wrap("get", name, "", err)
		}
		fresh = lb
		if err := s.decoupler.Decouple(ctx, fresh, ""); err != nil {
			return s.wrap("decouple", name, "", err)
		}
	}
	err := s.lbs.Delete(ctx, s.rg, name)
	if vmss, ok := azure.ScaleSetInUse(err); ok && s.decoupler != nil {
		klog.FromContext(ctx).Info("Load balancer still in use by a scale set model; decoupling it and deleting again",
			"loadBalancer", name, "scaleSet", vmss)
		if derr := s.decoupler.Decouple(ctx, fresh, vmss); derr != nil {
			return s.wrap("decouple", name, "", derr)
		}
		err = s.lbs.Delete(ctx, s.rg, name)
	}
	if err != nil && azure.Classify(err) != azure.ClassStale {
		return s.wrap("delete", name, "", err)
	}
	return nil
}

// allAssumeAbsent reports whether every change of a batch may skip reading
// a load balancer that is not cached.
func anyFresh(batch []*change) bool {
	for _, c := range batch {
		if c.fresh {
			return true
		}
	}
	return false
}

func allAssumeAbsent(batch []*change) bool {
	for _, c := range batch {
		if !c.assumeAbsent {
			return false
		}
	}
	return len(batch) > 0
}
