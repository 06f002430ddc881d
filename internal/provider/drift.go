package provider

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// callerRepair labels the drift pass's writes in the lock-wait metric.
const callerRepair = "DriftRepair"

// serviceCleanupFinalizer is the service controller's finalizer: a Service
// carries it from its first EnsureLoadBalancer until its load balancer is
// deleted.
const serviceCleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// Repair kinds: what a drift repair wrote (the drift pass's metric label).
const (
	RepairLoadBalancer  = "load_balancer"
	RepairBackendPool   = "backend_pool"
	RepairSecurityGroup = "security_group"
)

// Repair is one difference from the desired state a drift repair wrote back.
type Repair struct {
	// Kind is RepairLoadBalancer, RepairBackendPool or RepairSecurityGroup.
	Kind string
	// What names the object, for the event and the log.
	What string
}

// repairLog collects, for one repair, what its reconcile wrote.
type repairLog struct {
	mu    sync.Mutex
	items []Repair
}

type repairLogKey struct{}

// noteRepair records a write in the repair log of ctx; without one (an
// ordinary reconcile) it does nothing.
func noteRepair(ctx context.Context, kind, format string, args ...any) {
	l, ok := ctx.Value(repairLogKey{}).(*repairLog)
	if !ok {
		return
	}
	r := Repair{Kind: kind, What: fmt.Sprintf(format, args...)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !slices.Contains(l.items, r) {
		l.items = append(l.items, r)
	}
}

// BeginRepairPass starts a drift pass: it reads every load balancer of the
// resource group afresh into the store's cache (one listing) and every
// public IP (one listing, which the pass's repairs read instead of one GET
// per public IP), takes the destinations of gone frontends and node ports
// out of the network security group, and brings the cluster pools of the
// configured load balancers in line with the nodes (SyncClusterPools, from
// that listing: no call when they are right). The returned context carries
// the listing; pass it to RepairService. The repairs it made are returned.
func (p *Provider) BeginRepairPass(ctx context.Context) (context.Context, []Repair, error) {
	if err := p.ensureStarted(ctx); err != nil {
		return ctx, nil, err
	}
	if _, err := p.store.List(ctx); err != nil {
		return ctx, nil, err
	}
	pips, err := p.clients.PublicIP.List(ctx, p.cfg.ResourceGroup)
	if err != nil {
		return ctx, nil, fmt.Errorf("list public IPs in %s: %w", p.cfg.ResourceGroup, err)
	}
	ctx = context.WithValue(ctx, publicIPListingKey{}, newPublicIPListing(p.clients.PublicIP, p.cfg.ResourceGroup, pips))
	log := &repairLog{}
	if err := p.collectSecurityRules(context.WithValue(ctx, repairLogKey{}, log), true); err != nil {
		return ctx, nil, err
	}
	// The cluster pools, members and admin states, from the listing just
	// read: a load balancer whose Services all use their own pools (Local
	// Services in multiple-SLB mode) or are refused has no Service
	// reconcile that would write them.
	// A failure here is logged and leaves the Services' repairs to go on.
	if p.nodes != nil {
		if err := p.syncClusterPools(context.WithValue(ctx, repairLogKey{}, log), callerRepair); err != nil {
			logger(ctx).Error(err, "Drift pass: the cluster pools were not all brought in line; the next pass tries again")
		}
	}
	if p.sg != nil {
		// The NSG copy the collection just read serves the pass's repairs
		// (securitygroup.Edit.FromCopy): no read per writer round.
		ctx = context.WithValue(ctx, nsgCopyKey{}, p.sg.CopyGeneration())
	}
	return ctx, log.items, nil
}

type nsgCopyKey struct{}

// nsgCopyOf is the NSG copy generation a drift pass's edits may start
// from; 0 outside a pass.
func nsgCopyOf(ctx context.Context) uint64 {
	gen, _ := ctx.Value(nsgCopyKey{}).(uint64)
	return gen
}

// RepairService brings what Azure holds for the Service back to what it
// should hold, through the usual writers, and returns what it wrote (none
// when nothing drifted). A Service the reconcile refuses is not a failure
// and gets no event: it has nothing to be repaired towards but its
// security rules, narrowed to what its settings allow. It repairs only a Service the service controller
// has taken on and not let go: the Service as the informer holds it now,
// of the same UID, a LoadBalancer with the cleanup finalizer and not being
// deleted; it never builds a load balancer for any other. Its reads come
// from the pass's fresh copies (BeginRepairPass): a Service without drift
// costs no ARM call beyond the NSG writer's one read per round.
func (p *Provider) RepairService(ctx context.Context, svc *v1.Service, nodes []*v1.Node) ([]Repair, error) {
	defer p.perService.Lock(string(svc.UID))()
	cur, err := p.services.Services(svc.Namespace).Get(svc.Name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cur.UID != svc.UID || cur.DeletionTimestamp != nil || cur.Spec.Type != v1.ServiceTypeLoadBalancer ||
		!slices.Contains(cur.Finalizers, serviceCleanupFinalizer) {
		return nil, nil
	}
	log := &repairLog{}
	_, err = p.reconcile(context.WithValue(ctx, repairLogKey{}, log), callerRepair, cur, nodes, false)
	if IsRefusal(err) {
		// Refused (its Warning came from the service controller's
		// reconcile): nothing to repair towards but its narrowed rules,
		// and not a failure of the pass.
		err = nil
	}
	return log.items, p.retryAfterThrottle(err)
}

type publicIPListingKey struct{}

// publicIPListing answers public IP reads of one resource group from a
// listing taken at the start of a drift pass (an absent one is not found),
// and keeps it up to date with the pass's own writes. Reads of other
// resource groups, and writes, go to ARM.
type publicIPListing struct {
	azure.PublicIPClient
	rg     string
	mu     sync.Mutex
	byName map[string]*armnetwork.PublicIPAddress
}

func newPublicIPListing(c azure.PublicIPClient, rg string, pips []*armnetwork.PublicIPAddress) *publicIPListing {
	l := &publicIPListing{PublicIPClient: c, rg: rg, byName: map[string]*armnetwork.PublicIPAddress{}}
	for _, pip := range pips {
		l.byName[strings.ToLower(ptr.Deref(pip.Name, ""))] = pip
	}
	return l
}

func (l *publicIPListing) Get(ctx context.Context, rg, name string) (*armnetwork.PublicIPAddress, error) {
	if !strings.EqualFold(rg, l.rg) {
		return l.PublicIPClient.Get(ctx, rg, name)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if pip, ok := l.byName[strings.ToLower(name)]; ok {
		return pip, nil
	}
	return nil, &azcore.ResponseError{StatusCode: 404, ErrorCode: "ResourceNotFound"}
}

func (l *publicIPListing) List(ctx context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	if !strings.EqualFold(rg, l.rg) {
		return l.PublicIPClient.List(ctx, rg)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]*armnetwork.PublicIPAddress, 0, len(l.byName))
	for _, k := range slices.Sorted(maps.Keys(l.byName)) {
		out = append(out, l.byName[k])
	}
	return out, nil
}

func (l *publicIPListing) CreateOrUpdate(ctx context.Context, rg, name string, pip armnetwork.PublicIPAddress, etag string) (*armnetwork.PublicIPAddress, error) {
	out, err := l.PublicIPClient.CreateOrUpdate(ctx, rg, name, pip, etag)
	if err == nil && strings.EqualFold(rg, l.rg) {
		l.mu.Lock()
		l.byName[strings.ToLower(name)] = out
		l.mu.Unlock()
	}
	return out, err
}

func (l *publicIPListing) Delete(ctx context.Context, rg, name string) error {
	err := l.PublicIPClient.Delete(ctx, rg, name)
	if (err == nil || azure.Classify(err) == azure.ClassStale) && strings.EqualFold(rg, l.rg) {
		l.mu.Lock()
		delete(l.byName, strings.ToLower(name))
		l.mu.Unlock()
	}
	return err
}

// publicIPs is the public IP client for ctx: the drift pass's listing, or
// ARM.
func (p *Provider) publicIPs(ctx context.Context) azure.PublicIPClient {
	if l, ok := ctx.Value(publicIPListingKey{}).(*publicIPListing); ok {
		return l
	}
	return p.clients.PublicIP
}
