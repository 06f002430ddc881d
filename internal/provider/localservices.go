package provider

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// LocalServices is the ExternalTrafficPolicy=Local backend pool updater as
// the Service reconcile sees it (multiple-SLB mode only). Every method is
// called with the service-reconcile lock held, so the updater's view of
// which Service lives on which load balancer changes atomically with the
// load balancer itself.
type LocalServices interface {
	// Register records that the Service's dedicated pools are on lbName.
	Register(key, lbName string, families []v1.IPFamily)
	// Unregister forgets the Service and drops its queued pool updates.
	Unregister(key string)
	// EndpointNodes returns the names of the nodes that run ready
	// endpoints of the Service, from its EndpointSlices.
	EndpointNodes(svc *v1.Service) (sets.Set[string], error)
}

// SetLocalServices plugs the local service updater in. Without it,
// ExternalTrafficPolicy=Local Services use the cluster pool.
func (p *Provider) SetLocalServices(ls LocalServices) { p.local = ls }

// usesLocalPool: in multiple-SLB mode, a Local Service owns dedicated pools.
func (p *Provider) usesLocalPool(svc *v1.Service) bool {
	return p.placer != nil && p.local != nil && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
}

// localPoolNames are the Service's dedicated pool names for every family;
// a Service that does not (or no longer) use them gets them dropped.
func localPoolNames(svc *v1.Service) []string {
	return []string{
		localServicePoolName(svc.Namespace, svc.Name, v1.IPv4Protocol),
		localServicePoolName(svc.Namespace, svc.Name, v1.IPv6Protocol),
	}
}

// registerLocal updates the updater's registry under the lock.
func (p *Provider) registerLocal(svc *v1.Service, lbName string, families []v1.IPFamily) {
	if p.local == nil {
		return
	}
	p.lock.Lock(callerEnsure)
	defer p.lock.Unlock()
	if p.usesLocalPool(svc) {
		p.local.Register(serviceKey(svc), lbName, families)
	} else {
		p.local.Unregister(serviceKey(svc))
	}
}

func (p *Provider) unregisterLocal(svc *v1.Service) {
	if p.local == nil {
		return
	}
	p.lock.Lock(callerDeleted)
	defer p.lock.Unlock()
	p.local.Unregister(serviceKey(svc))
}

// reconcileLocalPools fills the Service's dedicated pools with the nodes
// that run its endpoints (the updater keeps them current afterwards).
func (p *Provider) reconcileLocalPools(ctx context.Context, caller, lbName string, svc *v1.Service, nodes []*v1.Node, families []v1.IPFamily) error {
	names, err := p.local.EndpointNodes(svc)
	if err != nil {
		return err
	}
	var members []*v1.Node
	for _, n := range nodes {
		if n != nil && names.Has(n.Name) {
			members = append(members, n)
		}
	}
	return p.syncPools(ctx, caller, lbName, members, families, func(f v1.IPFamily) string {
		return localServicePoolName(svc.Namespace, svc.Name, f)
	})
}
