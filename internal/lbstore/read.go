package lbstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/names"
)

// PoolRef names one backend address pool of a load balancer.
type PoolRef struct {
	LoadBalancer string
	Pool         string
}

// String is "lb/pool".
func (r PoolRef) String() string { return r.LoadBalancer + "/" + r.Pool }

func (r PoolRef) key() string { return lower(r.LoadBalancer) + "/" + lower(r.Pool) }

// Get returns a load balancer, from the cache when fresh; nil when it does
// not exist. The result is shared: do not modify it.
func (s *Store) Get(ctx context.Context, name string) (*armnetwork.LoadBalancer, error) {
	if e, ok := s.cache.get(name); ok {
		return e.lb, nil
	}
	e, err := s.read(ctx, name)
	if err != nil {
		return nil, err
	}
	return e.lb, nil
}

// read GETs a load balancer from ARM and installs it unless a write moved
// its generation meanwhile. Not-found is an entry with a nil load balancer.
func (s *Store) read(ctx context.Context, name string) (*entry, error) {
	gen := s.cache.gen(name)
	n, err := s.acquireTransfer(ctx, "get", s.transfers.lastWeight(name))
	if err != nil {
		return nil, s.wrap("get", name, "", err)
	}
	lb, err := s.lbs.Get(ctx, s.rg, name)
	s.transfers.release(n)
	if err != nil {
		if azure.Classify(err) != azure.ClassStale {
			return nil, s.wrap("get", name, "", err)
		}
		lb = nil
	}
	s.transfers.saw(name, lb)
	s.cache.readResult(name, gen, lb)
	return &entry{lb: lb}, nil
}

// entryFor is Get returning the cache entry (for its pool index).
func (s *Store) entryFor(ctx context.Context, name string, fresh bool) (*entry, error) {
	if !fresh {
		if e, ok := s.cache.get(name); ok {
			return e, nil
		}
	}
	return s.read(ctx, name)
}

// Managed lists every load balancer azlb manages: the configured names (each
// public name and its internal twin), then, sorted, those found by listing
// the resource group once (see the package documentation). A failed listing
// is retried by the next call.
func (s *Store) Managed(ctx context.Context) ([]string, error) {
	found, err := s.discover(ctx)
	if err != nil {
		return nil, err
	}
	out := slices.Clone(s.configured)
	for _, n := range found {
		if !slices.ContainsFunc(out, func(c string) bool { return strings.EqualFold(c, n) }) {
			out = append(out, n)
		}
	}
	return out, nil
}

// IsConfigured reports whether a load balancer name is a configured one (or
// its internal twin), as opposed to one only found in Azure.
func (s *Store) IsConfigured(name string) bool {
	return slices.ContainsFunc(s.configured, func(c string) bool { return strings.EqualFold(c, name) })
}

func (s *Store) discover(ctx context.Context) ([]string, error) {
	s.discoverMu.Lock()
	defer s.discoverMu.Unlock()
	if s.discoverOK {
		return s.discovered, nil
	}
	gens := map[string]uint64{}
	for _, n := range s.configured {
		gens[lower(n)] = s.cache.gen(n)
	}
	lbs, err := s.lbs.List(ctx, s.rg)
	if err != nil {
		if azure.Classify(err) != azure.ClassStale {
			return nil, fmt.Errorf("list load balancers in %s: %w", s.rg, err)
		}
		lbs = nil // no resource group yet: nothing to discover
	}
	var found []string
	listed := map[string]bool{}
	for _, lb := range lbs {
		name := ptr.Deref(lb.Name, "")
		if name == "" {
			continue
		}
		listed[lower(name)] = true
		s.transfers.saw(name, lb)
		if g, ok := gens[lower(name)]; ok {
			s.cache.readResult(name, g, lb) // a configured one: the listing warms the cache
			continue
		}
		if s.adoptable(lb) {
			found = append(found, name)
		}
	}
	for _, n := range s.configured {
		if !listed[lower(n)] {
			s.cache.readResult(n, gens[lower(n)], nil) // known not to exist
		}
	}
	sort.Strings(found)
	s.discovered, s.discoverOK = found, true
	return found, nil
}

// adoptable: a Standard load balancer that holds the cluster's node pool or
// carries its cluster tag was made by azlb (or the upstream provider) for
// this cluster.
func (s *Store) adoptable(lb *armnetwork.LoadBalancer) bool {
	if lb.SKU == nil || !strings.EqualFold(string(ptr.Deref(lb.SKU.Name, "")), string(armnetwork.LoadBalancerSKUNameStandard)) {
		return false
	}
	if s.cluster == "" {
		return false
	}
	for k, v := range lb.Tags {
		if strings.EqualFold(k, names.TagClusterName) && strings.EqualFold(ptr.Deref(v, ""), s.cluster) {
			return true
		}
	}
	if lb.Properties != nil {
		for _, p := range lb.Properties.BackendAddressPools {
			n := ptr.Deref(p.Name, "")
			if strings.EqualFold(n, names.ClusterPool(s.cluster, v1.IPv4Protocol)) || strings.EqualFold(n, names.ClusterPool(s.cluster, v1.IPv6Protocol)) {
				return true
			}
		}
	}
	return false
}

// Source says where PoolsWith looks.
type Source int

const (
	// Cached answers from the cache, reading only load balancers whose
	// entry is missing or expired.
	Cached Source = iota
	// FromAzure reads every managed load balancer afresh.
	FromAzure
)

// PoolsWith returns every pool, on every managed load balancer, holding at
// least one of the keys, sorted: IP addresses of IP-based entries, or the
// owners of NIC-based members (backendpool.EntryKey). Load balancers are
// looked at in parallel.
func (s *Store) PoolsWith(ctx context.Context, keys []string, src Source) ([]PoolRef, error) {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[backendpool.CanonicalIP(k)] = true
	}
	lbs, err := s.Managed(ctx)
	if err != nil {
		return nil, err
	}
	found := make([][]PoolRef, len(lbs))
	errs := make([]error, len(lbs))
	var wg sync.WaitGroup
	for i, name := range lbs {
		wg.Go(func() {
			e, err := s.entryFor(ctx, name, src == FromAzure)
			if err != nil {
				errs[i] = err
				return
			}
			if e.lb == nil || e.lb.Properties == nil {
				return
			}
			idx := e.poolIndex()
			for _, p := range e.lb.Properties.BackendAddressPools {
				for ip := range want {
					if idx[lower(ptr.Deref(p.Name, ""))][ip] {
						found[i] = append(found[i], PoolRef{LoadBalancer: name, Pool: ptr.Deref(p.Name, "")})
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []PoolRef
	for _, f := range found {
		out = append(out, f...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].LoadBalancer != out[j].LoadBalancer {
			return out[i].LoadBalancer < out[j].LoadBalancer
		}
		return out[i].Pool < out[j].Pool
	})
	return out, nil
}

// FindPool returns the managed load balancer that has a pool of that name
// (from the cache), or ok false.
func (s *Store) FindPool(ctx context.Context, pool string) (lb string, ok bool, err error) {
	lbs, err := s.Managed(ctx)
	if err != nil {
		return "", false, err
	}
	for _, name := range lbs {
		e, err := s.entryFor(ctx, name, false)
		if err != nil {
			return "", false, err
		}
		if findPool(e.lb, pool) != nil {
			return name, true, nil
		}
	}
	return "", false, nil
}

// findPool returns the named pool of a load balancer, or nil.
func findPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	for _, p := range lb.Properties.BackendAddressPools {
		if strings.EqualFold(ptr.Deref(p.Name, ""), name) {
			return p
		}
	}
	return nil
}
