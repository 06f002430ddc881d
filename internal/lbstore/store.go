package lbstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/metrics"
	"github.com/azlb/azlb/internal/names"
)

// MaxConflictRetries bounds how often one change is re-read and re-applied
// after a 412 or 409 within one round.
const MaxConflictRetries = 2

// LockName labels the Store's write queue in
// cloudprovider_azure_lock_wait_duration_seconds: the time a change waited
// for the round that wrote it.
const LockName = "lbstore"

// TransfersLockName labels, in the same metric, the time a whole load
// balancer GET or PUT waited for LBTransferBudget (caller "get" or "put").
const TransfersLockName = "lbstore-transfers"

// ErrStopped is returned for changes the Store did not write because Run
// ended (or had ended) before their round.
var ErrStopped = errors.New("lbstore: not writing: the store is stopped (not leading)")

// Options are the collaborators of a Store. Config, LoadBalancers and Pools
// are required.
type Options struct {
	Config        *config.Config
	LoadBalancers azure.LoadBalancerClient
	Pools         azure.BackendPoolClient
	// Clock drives the cache TTL and the wait metric. Default: the real clock.
	Clock clock.PassiveClock
	// Decoupler, when set, takes a load balancer's pools out of every scale
	// set model, VM and network interface before the Store deletes it (ARM
	// refuses while a scale set model lists one of its pools).
	Decoupler Decoupler
}

// Decoupler detaches a load balancer's pools from the resources that list
// them (scale set models, scale set VMs, network interfaces); scaleSetID
// not empty: only that scale set's model.
type Decoupler interface {
	Decouple(ctx context.Context, lb *armnetwork.LoadBalancer, scaleSetID string) error
}

// Store reads and writes load balancers and backend pools; see the package
// documentation. It is safe for concurrent use.
type Store struct {
	lbs        azure.LoadBalancerClient
	pools      azure.BackendPoolClient
	decoupler  Decoupler
	clock      clock.PassiveClock
	rg         string
	location   string
	cluster    string
	configured []string

	cache *cache
	// transfers bounds the whole-load-balancer GETs and PUTs in flight
	// (LBTransferBudget).
	transfers *writeSlots

	discoverMu sync.Mutex
	discovered []string
	discoverOK bool

	mu      sync.Mutex
	pending []*change
	wake    chan struct{}
	state   runState
}

type runState int

const (
	notStarted runState = iota
	running
	stopped
)

// New builds a Store; call Run to let it write.
func New(o Options) (*Store, error) {
	if o.Config == nil || o.LoadBalancers == nil || o.Pools == nil {
		return nil, errors.New("lbstore: Config, LoadBalancers and Pools are required")
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	cfg := o.Config
	rg := cfg.LoadBalancerResourceGroup
	if rg == "" {
		rg = cfg.ResourceGroup
	}
	s := &Store{
		lbs:       o.LoadBalancers,
		pools:     o.Pools,
		decoupler: o.Decoupler,
		clock:     clk,
		rg:        rg,
		location:  cfg.Location,
		cluster:   cfg.ClusterName,
		cache:     newCache(clk, time.Duration(cfg.LoadBalancerCacheTTLInSeconds)*time.Second),
		transfers: newWriteSlots(LBTransferBudget),
		wake:      make(chan struct{}, 1),
	}
	var public []string
	if cfg.UseMultipleStandardLoadBalancers() {
		for _, c := range cfg.MultipleStandardLoadBalancerConfigurations {
			public = append(public, c.Name)
		}
	} else {
		public = []string{cfg.DefaultLoadBalancerName()}
	}
	for _, n := range public {
		s.configured = append(s.configured, n, names.InternalLB(n))
	}
	return s, nil
}

// ResourceGroup is the load balancers' resource group.
func (s *Store) ResourceGroup() string { return s.rg }

// Run writes queued changes until ctx ends, then fails what is still queued
// with ErrStopped. Call it once, on the elected leader.
func (s *Store) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithName("lbstore")
	ctx = klog.NewContext(ctx, log)
	s.mu.Lock()
	if s.state != notStarted {
		s.mu.Unlock()
		log.Error(nil, "Store.Run called twice; ignoring the second call")
		return
	}
	s.state = running
	s.mu.Unlock()
	defer s.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for {
			taken := s.take()
			if len(taken) == 0 {
				break
			}
			if onlyMutations(taken) {
				taken = append(taken, s.gather(ctx)...)
			}
			s.round(ctx, taken)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

func (s *Store) stop() {
	s.mu.Lock()
	s.state = stopped
	left := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, c := range left {
		c.finish(ErrStopped)
	}
}

// take removes and returns every queued change, marking it started.
func (s *Store) take() []*change {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.pending
	s.pending = nil
	for _, c := range out {
		c.started = true
	}
	return out
}

// submit queues changes for the writer and waits until each is done. When
// ctx ends first, changes not yet taken by a round are withdrawn and ctx's
// error returned; changes already in a round are waited for (their edits may
// be running and must not outlive the call).
func (s *Store) submit(ctx context.Context, cs []*change) error {
	now := s.clock.Now()
	s.mu.Lock()
	if s.state == stopped {
		s.mu.Unlock()
		for _, c := range cs {
			c.finish(ErrStopped)
		}
		return ErrStopped
	}
	for _, c := range cs {
		c.ctx, c.queued = ctx, now
	}
	s.pending = append(s.pending, cs...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	for _, c := range cs {
		select {
		case <-c.done:
		case <-ctx.Done():
			s.withdraw(cs)
			for _, c := range cs {
				<-c.done
			}
			return ctx.Err()
		}
	}
	return nil
}

// withdraw removes the changes no round has taken yet and finishes them.
func (s *Store) withdraw(cs []*change) {
	mine := make(map[*change]bool, len(cs))
	for _, c := range cs {
		mine[c] = true
	}
	var gone []*change
	s.mu.Lock()
	keep := s.pending[:0]
	for _, c := range s.pending {
		if mine[c] && !c.started {
			gone = append(gone, c)
			continue
		}
		keep = append(keep, c)
	}
	s.pending = keep
	s.mu.Unlock()
	for _, c := range gone {
		c.finish(context.Canceled)
	}
}

// newLB is an empty Standard load balancer in the cluster's location,
// tagged with the cluster name.
func (s *Store) newLB(name string) *armnetwork.LoadBalancer {
	lb := &armnetwork.LoadBalancer{
		Name:     to.Ptr(name),
		Location: to.Ptr(s.location),
		SKU: &armnetwork.LoadBalancerSKU{
			Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard),
			Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional),
		},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{},
	}
	if s.cluster != "" {
		lb.Tags = map[string]*string{names.TagClusterName: to.Ptr(s.cluster)}
	}
	return lb
}

// observeWait records how long a change waited for its round.
func (s *Store) observeWait(c *change) {
	metrics.ObserveLockWait(LockName, c.caller, s.clock.Since(c.queued))
}

func lower(s string) string { return strings.ToLower(s) }

// wrap names the operation and object of an ARM error.
func (s *Store) wrap(op, lb, pool string, err error) error {
	if pool == "" {
		return fmt.Errorf("%s load balancer %s/%s: %w", op, s.rg, lb, err)
	}
	return fmt.Errorf("%s backend pool %s of load balancer %s/%s: %w", op, pool, s.rg, lb, err)
}

// ExternalChange tells the Store that a load balancer changed through
// another resource: a NIC or scale set VM joined or left one of its pools
// (ARM records NIC-based membership on the pool, with a new etag). The
// cached copy is dropped and its generation moved, so the next read is
// fresh and a read in flight cannot install the old state.
func (s *Store) ExternalChange(name string) { s.cache.forget(name) }

// Queued is the number of changes waiting for a round.
func (s *Store) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// GatherWindow is how long a round of whole-load-balancer writes waits for
// more changes before it starts. Such writes come in bursts (the service
// controller reconciles many Services at once, each a mutation of the same
// few load balancers); the short wait lets one PUT carry the changes of the
// Services that were a few milliseconds behind. Rounds with pool edits (the
// admin-state cutover, Local Service pools) never wait.
const GatherWindow = 10 * time.Millisecond

// gather waits GatherWindow (or until ctx ends) and takes what was queued
// meanwhile.
func (s *Store) gather(ctx context.Context) []*change {
	t := time.NewTimer(GatherWindow)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return s.take()
}

// onlyMutations reports whether the changes are all load balancer
// mutations (no pool edit).
func onlyMutations(cs []*change) bool {
	for _, c := range cs {
		if c.pool != nil {
			return false
		}
	}
	return true
}
