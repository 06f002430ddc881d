package provider

import (
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/clock"
)

// lbCache keeps the last load balancer read from ARM, per resource group and
// name, for at most ttl. Every write through the provider deletes the entry
// (the next reader GETs the new etag); so do 412 and superseded-operation
// errors. A missing load balancer is cached too (nil), so that a burst of
// Services that do not exist yet costs one GET.
//
// Entries are shared: callers must not mutate a *LoadBalancer they got from
// the cache; they work on a deep copy (copyLB).
type lbCache struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]lbCacheEntry
}

type lbCacheEntry struct {
	lb      *armnetwork.LoadBalancer // nil: known not to exist
	fetched time.Time
}

func newLBCache(clk clock.PassiveClock, ttl time.Duration) *lbCache {
	return &lbCache{clock: clk, ttl: ttl, entries: map[string]lbCacheEntry{}}
}

func cacheKey(rg, name string) string { return strings.ToLower(rg + "/" + name) }

// get returns the cached load balancer and whether the entry is fresh.
func (c *lbCache) get(rg, name string) (*armnetwork.LoadBalancer, bool) {
	if c.ttl <= 0 {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cacheKey(rg, name)]
	if !ok {
		return nil, false
	}
	if c.clock.Since(e.fetched) >= c.ttl {
		delete(c.entries, cacheKey(rg, name))
		return nil, false
	}
	return e.lb, true
}

func (c *lbCache) set(rg, name string, lb *armnetwork.LoadBalancer) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[cacheKey(rg, name)] = lbCacheEntry{lb: lb, fetched: c.clock.Now()}
}

// invalidate forgets one load balancer.
func (c *lbCache) invalidate(rg, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, cacheKey(rg, name))
}
