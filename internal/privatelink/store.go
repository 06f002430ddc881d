package privatelink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// MaxConflictRetries bounds how often a round reads a PLS again after a
// 412 or 409.
const MaxConflictRetries = 2

// ErrStopped is returned for edits not carried out because Run ended (or
// had not started and was stopped).
var ErrStopped = errors.New("privatelink: not writing: the writer is stopped (not leading)")

// Result is what became of one edit.
type Result struct {
	// PLS is the PLS after the edit (nil when it does not exist).
	PLS *armnetwork.PrivateLinkService
	// Written: a PUT or DELETE carrying this edit succeeded.
	Written bool
}

// Check vets the current PLS (nil when there is none) before an edit is
// applied; its error fails that edit alone, before anything is written.
type Check func(cur *armnetwork.PrivateLinkService) error

// Store is the one writer of Private Link Services; see the package
// documentation.
type Store struct {
	client  Client
	subnets SubnetClient

	mu     sync.Mutex
	state  int // 0 not started, 1 running, 2 stopped
	ctx    context.Context
	queues map[string]*queue
	wg     sync.WaitGroup

	// The cache: lower(rg/name) -> last PLS read or written (nil: known
	// absent, from a listing or a delete). gen moves on every write so an
	// older listing never overwrites it.
	cmu       sync.Mutex
	cache     map[string]*armnetwork.PrivateLinkService
	gen       map[string]uint64
	listed    map[string]bool // lower(rg)
	subnetsOK map[string]bool // lower(subnet id) known Disabled
	// subnets read (lower id -> subnet), kept until an Invalidate: NAT
	// subnets rarely change, and a write that fails on a changed one
	// invalidates. One found absent is read again every time.
	subnetsRead map[string]*armnetwork.Subnet
}

type queue struct {
	pending []*request
	running bool
}

type request struct {
	ctx      context.Context
	rg, name string
	desired  *armnetwork.PrivateLinkService
	subnetID string
	check    Check
	del      bool
	done     chan struct{}
	res      Result
	err      error
}

// NewStore builds a Store; call Run to let it write.
func NewStore(c Client, subnets SubnetClient) *Store {
	return &Store{client: c, subnets: subnets, queues: map[string]*queue{},
		cache: map[string]*armnetwork.PrivateLinkService{}, gen: map[string]uint64{},
		listed: map[string]bool{}, subnetsOK: map[string]bool{}, subnetsRead: map[string]*armnetwork.Subnet{}}
}

func key(rg, name string) string { return strings.ToLower(rg + "/" + name) }

// Run lets the Store write until ctx ends; then it waits for the rounds in
// flight and fails every queued edit with ErrStopped.
func (s *Store) Run(ctx context.Context) {
	s.mu.Lock()
	if s.state != 0 {
		s.mu.Unlock()
		klog.FromContext(ctx).Error(nil, "privatelink: Run called twice; ignoring the second call")
		return
	}
	s.state, s.ctx = 1, ctx
	for k, q := range s.queues {
		if len(q.pending) > 0 && !q.running {
			q.running = true
			s.wg.Add(1)
			go s.drain(k)
		}
	}
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	s.state = 2
	var left []*request
	for _, q := range s.queues {
		left = append(left, q.pending...)
		q.pending = nil
	}
	s.mu.Unlock()
	s.wg.Wait()
	for _, r := range left {
		r.err = ErrStopped
		close(r.done)
	}
}

// Ensure queues an edit that makes PLS rg/name match desired (Merge: the
// frontend, NAT ip configurations, visibility, auto-approval, fqdns, proxy
// protocol and the two tags), disabling subnetID's private link service
// network policies first when a write is needed, and waits for it.
func (s *Store) Ensure(ctx context.Context, rg, name string, desired armnetwork.PrivateLinkService, subnetID string, check Check) (Result, error) {
	return s.do(ctx, &request{rg: rg, name: name, desired: &desired, subnetID: subnetID, check: check})
}

// Delete queues the deletion of PLS rg/name (its private endpoint
// connections first) and waits for it; check, when set, vets the PLS read
// afresh before anything is deleted.
func (s *Store) Delete(ctx context.Context, rg, name string, check Check) (Result, error) {
	return s.do(ctx, &request{rg: rg, name: name, del: true, check: check})
}

func (s *Store) do(ctx context.Context, r *request) (Result, error) {
	r.ctx, r.done = ctx, make(chan struct{})
	k := key(r.rg, r.name)
	s.mu.Lock()
	if s.state == 2 {
		s.mu.Unlock()
		return Result{}, ErrStopped
	}
	q := s.queues[k]
	if q == nil {
		q = &queue{}
		s.queues[k] = q
	}
	q.pending = append(q.pending, r)
	if s.state == 1 && !q.running {
		q.running = true
		s.wg.Add(1)
		go s.drain(k)
	}
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		s.mu.Lock()
		if q := s.queues[k]; q != nil {
			for i, p := range q.pending {
				if p == r {
					q.pending = append(q.pending[:i], q.pending[i+1:]...)
					s.mu.Unlock()
					return Result{}, ctx.Err()
				}
			}
		}
		s.mu.Unlock()
		<-r.done
		return r.res, r.err
	}
}

// drain runs rounds for one PLS until its queue is empty.
func (s *Store) drain(k string) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		q := s.queues[k]
		if s.state != 1 || len(q.pending) == 0 {
			q.running = false
			if len(q.pending) == 0 {
				delete(s.queues, k)
			}
			s.mu.Unlock()
			return
		}
		reqs := q.pending
		q.pending = nil
		ctx := s.ctx
		s.mu.Unlock()
		s.round(ctx, reqs)
		for _, r := range reqs {
			close(r.done)
		}
	}
}

// round applies every queued edit of one PLS to one read and writes at
// most once (plus conflict retries).
func (s *Store) round(ctx context.Context, reqs []*request) {
	log := klog.FromContext(ctx).WithName("privatelink")
	rg, name := reqs[0].rg, reqs[0].name
	k := key(rg, name)
	var live []*request
	for _, r := range reqs {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	del := false
	for _, r := range live {
		del = del || r.del
	}
	if del {
		s.deleteRound(ctx, log, rg, name, live)
		return
	}
	fresh := false
	for attempt := 0; ; attempt++ {
		cur, err := s.read(ctx, rg, name, fresh)
		if err != nil {
			setErr(live, fmt.Errorf("read private link service %s/%s: %w", rg, name, err))
			return
		}
		var next *armnetwork.PrivateLinkService
		if cur != nil {
			c := *cur
			next = &c
		}
		changed := false
		subnet := ""
		ok := live[:0:0]
		for _, r := range live {
			r.err, r.res = nil, Result{}
			if r.check != nil {
				if err := r.check(next); err != nil {
					r.err = err
					continue
				}
			}
			if next == nil {
				d := *r.desired
				next, changed = &d, true
			} else if m, ch := Merge(next, *r.desired); ch {
				next, changed = &m, true
			}
			if r.subnetID != "" {
				subnet = r.subnetID
			}
			ok = append(ok, r)
		}
		if !changed {
			for _, r := range ok {
				r.res.PLS = cur
			}
			return
		}
		if subnet != "" {
			if err := s.disableSubnetPolicy(ctx, subnet); err != nil {
				setErr(ok, err)
				return
			}
		}
		etag := ""
		if cur != nil {
			etag = ptr.Deref(cur.Etag, "")
		}
		out := *next
		out.Properties = stripReadOnly(next.Properties)
		written, err := s.client.CreateOrUpdate(ctx, rg, name, out, etag)
		if err == nil {
			s.install(k, written)
			for _, r := range ok {
				r.res = Result{PLS: written, Written: true}
			}
			log.V(2).Info("Wrote private link service", "resourceGroup", rg, "name", name, "edits", len(ok), "create", cur == nil)
			return
		}
		s.forget(k)
		if azure.Classify(err) == azure.ClassConflict && attempt < MaxConflictRetries {
			log.V(2).Info("Private link service changed since read; reading it again", "resourceGroup", rg, "name", name, "err", err)
			fresh = true
			continue
		}
		setErr(ok, fmt.Errorf("write private link service %s/%s: %w", rg, name, err))
		return
	}
}

// deleteRound deletes a PLS: its connections, then itself, from a fresh
// read (private endpoints add connections behind the writer's back).
func (s *Store) deleteRound(ctx context.Context, log klog.Logger, rg, name string, reqs []*request) {
	k := key(rg, name)
	for attempt := 0; ; attempt++ {
		cur, err := s.read(ctx, rg, name, true)
		if err != nil {
			setErr(reqs, fmt.Errorf("read private link service %s/%s: %w", rg, name, err))
			return
		}
		for _, r := range reqs {
			r.err = nil
			if r.check != nil {
				r.err = r.check(cur)
			}
		}
		if cur == nil {
			return
		}
		for _, r := range reqs {
			if r.err != nil {
				return // the PLS is not the one the edit meant: nothing goes
			}
		}
		if cur.Properties != nil {
			for _, c := range cur.Properties.PrivateEndpointConnections {
				if c == nil || c.Name == nil {
					continue
				}
				if err := s.client.DeleteConnection(ctx, rg, name, *c.Name); err != nil && azure.Classify(err) != azure.ClassStale {
					setErr(reqs, fmt.Errorf("delete private endpoint connection %s of private link service %s/%s: %w", *c.Name, rg, name, err))
					return
				}
				log.V(2).Info("Deleted private endpoint connection", "resourceGroup", rg, "name", name, "connection", *c.Name)
			}
		}
		err = s.client.Delete(ctx, rg, name)
		if err == nil || azure.Classify(err) == azure.ClassStale {
			s.install(k, nil)
			for _, r := range reqs {
				r.res = Result{Written: err == nil}
			}
			log.V(2).Info("Deleted private link service", "resourceGroup", rg, "name", name)
			return
		}
		s.forget(k)
		if attempt < MaxConflictRetries {
			// A connection may have arrived since the read (ARM refuses
			// then), or the PLS is busy: read again and retry.
			continue
		}
		setErr(reqs, fmt.Errorf("delete private link service %s/%s: %w", rg, name, err))
		return
	}
}

func setErr(reqs []*request, err error) {
	for _, r := range reqs {
		r.err = err
	}
}

// stripReadOnly drops what ARM computes from a PLS about to be sent.
func stripReadOnly(p *armnetwork.PrivateLinkServiceProperties) *armnetwork.PrivateLinkServiceProperties {
	if p == nil {
		return nil
	}
	c := *p
	c.Alias, c.NetworkInterfaces, c.PrivateEndpointConnections, c.ProvisioningState = nil, nil, nil, nil
	return &c
}

// read returns the PLS from the cache when it is known there (unless
// fresh), else from ARM; nil when it does not exist.
func (s *Store) read(ctx context.Context, rg, name string, fresh bool) (*armnetwork.PrivateLinkService, error) {
	k := key(rg, name)
	if !fresh {
		s.cmu.Lock()
		p, known := s.cache[k]
		if !known && s.listed[strings.ToLower(rg)] {
			known = true
		}
		s.cmu.Unlock()
		if known {
			return p, nil
		}
	}
	s.cmu.Lock()
	g := s.gen[k]
	s.cmu.Unlock()
	p, err := s.client.Get(ctx, rg, name)
	switch {
	case err != nil && azure.Classify(err) == azure.ClassStale:
		p = nil
	case err != nil:
		return nil, err
	}
	s.cmu.Lock()
	if s.gen[k] == g {
		s.cache[k] = p
	}
	s.cmu.Unlock()
	return p, nil
}

func (s *Store) install(k string, p *armnetwork.PrivateLinkService) {
	s.cmu.Lock()
	s.gen[k]++
	s.cache[k] = p
	s.cmu.Unlock()
}

// forget drops a cached copy (the next read goes to ARM).
func (s *Store) forget(k string) {
	s.cmu.Lock()
	s.gen[k]++
	delete(s.cache, k)
	s.cmu.Unlock()
}

// List returns the PLSs of a resource group, from the cache after the
// first call (one List per resource group; later writes keep it current).
// A missing resource group holds none.
func (s *Store) List(ctx context.Context, rg string) ([]*armnetwork.PrivateLinkService, error) {
	lrg := strings.ToLower(rg)
	s.cmu.Lock()
	listed := s.listed[lrg]
	s.cmu.Unlock()
	if !listed {
		s.cmu.Lock()
		gens := make(map[string]uint64, len(s.gen))
		for k, g := range s.gen {
			gens[k] = g
		}
		s.cmu.Unlock()
		all, err := s.client.List(ctx, rg)
		if err != nil && azure.Classify(err) != azure.ClassStale {
			return nil, fmt.Errorf("list private link services of resource group %s: %w", rg, err)
		}
		s.cmu.Lock()
		for _, p := range all {
			if p == nil || p.Name == nil {
				continue
			}
			k := key(rg, *p.Name)
			if s.gen[k] == gens[k] {
				s.cache[k] = p
			}
		}
		s.listed[lrg] = true
		s.cmu.Unlock()
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	var out []*armnetwork.PrivateLinkService
	prefix := lrg + "/"
	for k, p := range s.cache {
		if p != nil && strings.HasPrefix(k, prefix) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Invalidate makes the next List of rg read ARM again (a PLS made or
// deleted outside azlb, found out by a refused write).
func (s *Store) Invalidate(rg string) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	clear(s.subnetsRead)
	lrg := strings.ToLower(rg)
	if !s.listed[lrg] {
		return
	}
	delete(s.listed, lrg)
	prefix := lrg + "/"
	for k := range s.cache {
		if strings.HasPrefix(k, prefix) {
			s.gen[k]++
			delete(s.cache, k)
		}
	}
}

// Subnet reads the subnet subnetID (nil when it does not exist); a subnet
// found is answered from memory until the next Invalidate.
func (s *Store) Subnet(ctx context.Context, subnetID string) (*armnetwork.Subnet, error) {
	lk := strings.ToLower(subnetID)
	s.cmu.Lock()
	sn, ok := s.subnetsRead[lk]
	s.cmu.Unlock()
	if ok {
		return sn, nil
	}
	rg, vnet, subnet, valid := parseSubnetID(subnetID)
	if !valid {
		return nil, fmt.Errorf("NAT subnet id %q is not a subnet id", subnetID)
	}
	sn, err := s.subnets.Get(ctx, rg, vnet, subnet)
	switch {
	case err != nil && azure.Classify(err) == azure.ClassStale:
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read NAT subnet %s: %w", subnetID, err)
	}
	s.cmu.Lock()
	s.subnetsRead[lk] = sn
	s.cmu.Unlock()
	return sn, nil
}

// ByFrontend returns the PLS of resource group rg that serves frontendID
// (nil when none does).
func (s *Store) ByFrontend(ctx context.Context, rg, frontendID string) (*armnetwork.PrivateLinkService, error) {
	all, err := s.List(ctx, rg)
	if err != nil {
		return nil, err
	}
	for _, p := range all {
		if strings.EqualFold(FrontendOf(p), frontendID) {
			return p, nil
		}
	}
	return nil, nil
}

// Cached returns PLS rg/name as the Store knows it (after List), and
// whether it knows.
func (s *Store) Cached(rg, name string) (*armnetwork.PrivateLinkService, bool) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	p, ok := s.cache[key(rg, name)]
	if !ok && s.listed[strings.ToLower(rg)] {
		ok = true
	}
	return p, ok
}

// disableSubnetPolicy sets the subnet's privateLinkServiceNetworkPolicies
// to Disabled when it is not (once per subnet per Store).
func (s *Store) disableSubnetPolicy(ctx context.Context, subnetID string) error {
	lk := strings.ToLower(subnetID)
	s.cmu.Lock()
	ok := s.subnetsOK[lk]
	s.cmu.Unlock()
	if ok {
		return nil
	}
	rg, vnet, subnet, valid := parseSubnetID(subnetID)
	if !valid {
		return fmt.Errorf("NAT subnet id %q is not a subnet id", subnetID)
	}
	for attempt := 0; ; attempt++ {
		sn, err := s.subnets.Get(ctx, rg, vnet, subnet)
		if err != nil {
			if azure.Classify(err) == azure.ClassStale {
				return fmt.Errorf("NAT subnet %s of virtual network %s (resource group %s) does not exist", subnet, vnet, rg)
			}
			return fmt.Errorf("read NAT subnet %s: %w", subnetID, err)
		}
		if sn.Properties != nil && ptr.Deref(sn.Properties.PrivateLinkServiceNetworkPolicies, "") == armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled {
			break
		}
		out := *sn
		props := armnetwork.SubnetPropertiesFormat{}
		if sn.Properties != nil {
			props = *sn.Properties
		}
		props.PrivateLinkServiceNetworkPolicies = ptr.To(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled)
		out.Properties = &props
		err = s.subnets.CreateOrUpdate(ctx, rg, vnet, subnet, out, ptr.Deref(sn.Etag, ""))
		if err == nil {
			break
		}
		if azure.Classify(err) == azure.ClassConflict && attempt < MaxConflictRetries {
			continue
		}
		return fmt.Errorf("disable private link service network policies of subnet %s: %w", subnetID, err)
	}
	s.cmu.Lock()
	s.subnetsOK[lk] = true
	s.cmu.Unlock()
	return nil
}

// parseSubnetID splits .../resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/{vnet}/subnets/{subnet}.
func parseSubnetID(id string) (rg, vnet, subnet string, ok bool) {
	parts := strings.Split(strings.Trim(id, "/"), "/")
	if len(parts) != 10 || !strings.EqualFold(parts[2], "resourceGroups") || !strings.EqualFold(parts[6], "virtualNetworks") || !strings.EqualFold(parts[8], "subnets") {
		return "", "", "", false
	}
	return parts[3], parts[7], parts[9], true
}
