package adminstate

import (
	"context"

	"github.com/azlb/azlb/internal/azure"
)

// PoolRef names one backend address pool of a managed load balancer.
type PoolRef struct {
	LoadBalancer string
	Pool         string
}

// String is "lb/pool".
func (r PoolRef) String() string { return r.LoadBalancer + "/" + r.Pool }

// Backend is what the Manager needs from the load balancer provider. The
// provider implements it; adminstate must not import the provider (the
// provider imports adminstate for DesiredState).
type Backend interface {
	// PoolsWithAddresses returns every backend pool, on every managed load
	// balancer, that holds at least one of the IP addresses. It may read
	// through a cache.
	PoolsWithAddresses(ctx context.Context, ips []string) ([]PoolRef, error)
	// InvalidateCache forgets the cached copy of a load balancer. The
	// Manager calls it before and after writing a pool of that load
	// balancer.
	InvalidateCache(lbName string)
	// ResourceGroup is the load balancers' resource group.
	ResourceGroup() string
	// BackendPools is the ARM backend pool client.
	BackendPools() azure.BackendPoolClient
}

// Locker is the service-reconcile lock shared with the Service reconcile
// path. Lock records the wait under caller.
type Locker interface {
	Lock(caller string)
	Unlock()
}
