package lbstore

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/backendpool"
)

// cache holds the last known state of each load balancer, with a
// generation per name that every write moves twice (see the package
// documentation). Entries are immutable snapshots: installing a change
// replaces the entry.
type cache struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]*entry // lower-cased name
	gens    map[string]uint64
}

type entry struct {
	lb      *armnetwork.LoadBalancer // nil: known not to exist
	fetched time.Time
	// etagStale: the content is right but the etag is not known (several
	// pools were written concurrently); a write reads afresh first.
	etagStale bool

	indexOnce sync.Once
	index     map[string]map[string]bool // lower-cased pool name -> canonical IPs
}

func newCache(clk clock.PassiveClock, ttl time.Duration) *cache {
	return &cache{clock: clk, ttl: ttl, entries: map[string]*entry{}, gens: map[string]uint64{}}
}

// get returns the entry when it is fresh.
func (c *cache) get(name string) (*entry, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[lower(name)]
	if !ok || c.clock.Since(e.fetched) >= c.ttl {
		return nil, false
	}
	return e, true
}

// gen is the current generation of a name.
func (c *cache) gen(name string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gens[lower(name)]
}

// generations is a copy of every name's generation (names never written
// are 0), taken before a listing.
func (c *cache) generations() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.gens))
	for k, v := range c.gens {
		out[k] = v
	}
	return out
}

// readResult installs what a read returned, unless a write moved the
// generation since the read started (gen is the generation then).
func (c *cache) readResult(name string, gen uint64, lb *armnetwork.LoadBalancer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lower(name)
	if c.gens[k] != gen {
		return
	}
	c.entries[k] = &entry{lb: lb, fetched: c.clock.Now()}
}

// writing moves the generation before a write is sent: reads in flight can
// no longer install.
func (c *cache) writing(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[lower(name)]++
}

// wrote installs the load balancer a write returned (nil: deleted) and moves
// the generation again, so a read that started during the write cannot
// install the state from before it.
func (c *cache) wrote(name string, lb *armnetwork.LoadBalancer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lower(name)
	c.gens[k]++
	c.entries[k] = &entry{lb: lb, fetched: c.clock.Now()}
}

// forget drops an entry (the resource changed underneath us) and moves the
// generation.
func (c *cache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lower(name)
	c.gens[k]++
	delete(c.entries, k)
}

// wrotePools patches pools written in a round into the cached load balancer
// and moves the generation. etag is the load balancer's etag after the last
// write, or "" when it is unknown (concurrent writes). Without a cached copy
// nothing is installed: the next reader GETs.
func (c *cache) wrotePools(name string, pools []*armnetwork.BackendAddressPool, etag string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := lower(name)
	c.gens[k]++
	old, ok := c.entries[k]
	if !ok || old.lb == nil {
		delete(c.entries, k)
		return
	}
	lb := MutableCopy(old.lb)
	props := lb.Properties
	for _, p := range pools {
		i := slices.IndexFunc(props.BackendAddressPools, func(x *armnetwork.BackendAddressPool) bool {
			return strings.EqualFold(ptr.Deref(x.Name, ""), ptr.Deref(p.Name, ""))
		})
		if i >= 0 {
			props.BackendAddressPools[i] = p
		} else {
			props.BackendAddressPools = append(props.BackendAddressPools, p)
		}
	}
	e := &entry{lb: lb, fetched: old.fetched, etagStale: etag == ""}
	if etag != "" {
		lb.Etag = &etag
	}
	c.entries[k] = e
}

// poolIndex returns, per lower-cased pool name, the keys of the pool's
// members (backendpool.PoolKeys: canonical IPs of IP-based entries, owners
// of NIC-based members). It is computed once per entry.
func (e *entry) poolIndex() map[string]map[string]bool {
	e.indexOnce.Do(func() {
		e.index = map[string]map[string]bool{}
		if e.lb == nil || e.lb.Properties == nil {
			return
		}
		for _, p := range e.lb.Properties.BackendAddressPools {
			keys := map[string]bool{}
			for _, k := range backendpool.PoolKeys(p) {
				keys[k] = true
			}
			if p != nil {
				e.index[lower(ptr.Deref(p.Name, ""))] = keys
			}
		}
	})
	return e.index
}

// MutableCopy is the copy of a load balancer a Mutation receives: deep
// enough to replace, add or remove elements of its frontend, rule, probe and
// pool lists without touching the original (the cached one): the lists are
// cloned, their elements are shared. Mutations therefore never modify an
// element in place; they replace it.
func MutableCopy(lb *armnetwork.LoadBalancer) *armnetwork.LoadBalancer {
	out := *lb
	if lb.Properties != nil {
		props := *lb.Properties
		props.FrontendIPConfigurations = slices.Clone(props.FrontendIPConfigurations)
		props.LoadBalancingRules = slices.Clone(props.LoadBalancingRules)
		props.Probes = slices.Clone(props.Probes)
		props.BackendAddressPools = slices.Clone(props.BackendAddressPools)
		out.Properties = &props
	} else {
		out.Properties = &armnetwork.LoadBalancerPropertiesFormat{}
	}
	return &out
}

// copyPool copies a pool deeply enough for edits that replace or reorder its
// address entries, or replace an entry's properties: the entry list and each
// entry are copied.
func copyPool(p *armnetwork.BackendAddressPool) *armnetwork.BackendAddressPool {
	out := *p
	if p.Properties != nil {
		props := *p.Properties
		props.LoadBalancerBackendAddresses = make([]*armnetwork.LoadBalancerBackendAddress, len(p.Properties.LoadBalancerBackendAddresses))
		for i, a := range p.Properties.LoadBalancerBackendAddresses {
			if a == nil {
				continue
			}
			ac := *a
			if a.Properties != nil {
				ap := *a.Properties
				ac.Properties = &ap
			}
			props.LoadBalancerBackendAddresses[i] = &ac
		}
		out.Properties = &props
	}
	return &out
}
