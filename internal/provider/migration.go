package provider

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/migration"
	"github.com/azlb/azlb/internal/names"
)

// newMigrator builds the Basic to Standard migration when the
// configuration asks for it (loadBalancerSku standard), nil otherwise.
func (p *Provider) newMigrator() (*migration.Migrator, error) {
	if !migration.Applies(p.cfg) {
		return nil, nil
	}
	var dec migration.Decoupler
	if p.nicPools != nil {
		dec = p.nicPools
	}
	return migration.New(migration.Options{
		Config: p.cfg, Store: p.store, PublicIPs: p.clients.PublicIP, Decoupler: dec,
		Services: p.loadBalancerServices, Recorder: eventSink{p}, Clock: p.clock,
	})
}

// loadBalancerServices lists the cluster's LoadBalancer Services of the
// class azlb serves (for the migration's events); nil without a Service
// lister.
func (p *Provider) loadBalancerServices() []*v1.Service {
	if p.services == nil {
		return nil
	}
	all, err := p.services.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := all[:0:0]
	for _, s := range all {
		if p.class.Owns(s) {
			out = append(out, s)
		}
	}
	return out
}

// ensureStarted runs, before the first reconcile of any Service after a
// start, what must come first: the Basic to Standard migration (until it
// succeeds once; every reconcile waits for it and fails with its error,
// so the service controller retries), then the rebuild of the placement
// state.
func (p *Provider) ensureStarted(ctx context.Context) error {
	if err := p.ensureMigrated(ctx); err != nil {
		return err
	}
	if err := p.ensureRebuilt(ctx); err != nil {
		return err
	}
	p.ensureCollected(ctx)
	return nil
}

// ensureCollected removes, once per start, the NSG destinations of
// Services deleted while no controller ran. A failure is logged and tried
// again at the next reconcile; it never blocks one.
func (p *Provider) ensureCollected(ctx context.Context) {
	p.collectMu.Lock()
	defer p.collectMu.Unlock()
	if p.collected || p.sg == nil {
		return
	}
	if err := p.collectSecurityRules(ctx, false); err != nil {
		logger(ctx).Error(err, "Collecting stale destinations from the network security group; retried at the next reconcile")
		return
	}
	p.collected = true
}

func (p *Provider) ensureMigrated(ctx context.Context) error {
	if p.migrator == nil {
		return nil
	}
	p.migrateMu.Lock()
	defer p.migrateMu.Unlock()
	if p.migrated {
		return nil
	}
	if _, err := p.migrator.Run(ctx); err != nil {
		return err
	}
	p.migrated = true
	return nil
}

// statusPrivateIP is the address an internal Service's new frontend of the
// family takes when none is asked for: its ingress IP of that family from
// its status, when the load balancer has no frontend for it yet and the
// address lies in the frontend's subnet (one subnet GET). So a Service
// keeps its address when its frontend is created anew: after a Basic
// load balancer was replaced by a Standard one, or a load balancer was
// deleted by hand. "" when there is none.
func (p *Provider) statusPrivateIP(ctx context.Context, svc *v1.Service, lbName string, family v1.IPFamily, subnetID string) (string, error) {
	var want netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil && a.Is4() == (family == v1.IPv4Protocol) {
			want = a
			break
		}
	}
	if !want.IsValid() {
		return "", nil
	}
	lb, err := p.store.Get(ctx, lbName)
	if err != nil {
		return "", err
	}
	if findFrontend(lb, names.Frontend(svc, family)) != nil {
		return "", nil
	}
	vnetID, subnet, ok := strings.Cut(subnetID, "/subnets/")
	if !ok {
		return "", nil
	}
	rg, vnet, err := names.ParseID(vnetID)
	if err != nil {
		return "", err
	}
	sub, err := p.clients.Subnet.Get(ctx, rg, vnet, subnet)
	if azure.Classify(err) == azure.ClassStale {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get subnet %s: %w", subnetID, err)
	}
	if sub.Properties == nil {
		return "", nil
	}
	prefixes := append([]*string{sub.Properties.AddressPrefix}, sub.Properties.AddressPrefixes...)
	for _, s := range prefixes {
		if pfx, err := netip.ParsePrefix(ptr.Deref(s, "")); err == nil && pfx.Contains(want) {
			return want.String(), nil
		}
	}
	return "", nil
}
