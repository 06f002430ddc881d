package provider

import (
	"context"
	"errors"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/privatelink"
)

// PrivateLinks is the Private Link Service side of the Service reconcile
// (docs/private-link.md): a privatelink.Manager over its Store, the one
// writer of Private Link Services. Run its Store where the other writers
// run (under the leader's lease).
type PrivateLinks struct {
	m *privatelink.Manager
}

// NewPrivateLinks builds the Private Link Service manager from azure.json
// and the ARM clients.
func NewPrivateLinks(cfg *config.Config, clients *azure.Clients, recorder record.EventRecorder) (*PrivateLinks, error) {
	c, sn, err := privatelink.NewClients(clients.NetworkSubscriptionID(), clients.NetworkCredential(), clients.ARMClientOptions("privatelinkservice"), 0)
	if err != nil {
		return nil, err
	}
	store := privatelink.NewStore(c, sn)
	m := privatelink.NewManager(store, privatelink.Config{
		SubscriptionID:    clients.NetworkSubscriptionID(),
		ClusterName:       cfg.ClusterName,
		ResourceGroup:     cfg.PrivateLinkServiceResourceGroup,
		VnetResourceGroup: cfg.VnetResourceGroup,
		VnetName:          cfg.VnetName,
		SubnetName:        cfg.SubnetName,
	}, recorder)
	return &PrivateLinks{m: m}, nil
}

// Run lets the Store write until ctx ends.
func (pl *PrivateLinks) Run(ctx context.Context) { pl.m.Store().Run(ctx) }

// Manager is the underlying manager.
func (pl *PrivateLinks) Manager() *privatelink.Manager { return pl.m }

// privateLinkSpecInvalid reports whether the Service's azure-pls-*
// annotations do not parse (its reconcile refuses it).
func (p *Provider) privateLinkSpecInvalid(svc *v1.Service) bool {
	if p.pls == nil {
		return false
	}
	_, err := p.pls.m.Spec(svc)
	return err != nil
}

// ensurePrivateLink publishes (or stops publishing) the Service's IPv4
// frontend on lb as its annotations ask, after the load balancer write.
// A Service that asks for nothing and owns nothing costs no ARM call once
// the resource group's Private Link Services were listed.
func (p *Provider) ensurePrivateLink(ctx context.Context, pl *PrivateLinks, svc *v1.Service, spec *annotations.ServiceSpec, lb *armnetwork.LoadBalancer) error {
	if pl == nil || lb == nil {
		return nil
	}
	families := serviceFamilies(svc)
	fe := serviceFrontend(lb, svc, v1.IPv4Protocol)
	if fe == nil || fe.ID == nil {
		if slices.Contains(families, v1.IPv6Protocol) && !slices.Contains(families, v1.IPv4Protocol) {
			// An IPv6-only Service: the Manager refuses azure-pls-create.
			fe = serviceFrontend(lb, svc, v1.IPv6Protocol)
			if fe == nil || fe.ID == nil {
				return nil
			}
			_, err := pl.m.Reconcile(ctx, svc, privatelink.Frontend{ID: *fe.ID, Location: ptr.Deref(lb.Location, ""), Internal: spec.Internal, FloatingIP: spec.EnableFloatingIP, IPv6Only: true})
			return err
		}
		return nil
	}
	_, err := pl.m.Reconcile(ctx, svc, privatelink.Frontend{
		ID:         *fe.ID,
		Location:   ptr.Deref(lb.Location, ""),
		Internal:   spec.Internal,
		FloatingIP: spec.EnableFloatingIP,
	})
	return err
}

// releasePrivateLinks deletes the Private Link Services (their private
// endpoint connections first) of the frontends about to be removed from
// their load balancers: Azure refuses to remove a frontend a Private Link
// Service uses. Call it with the ids of the frontends a write will drop,
// before the write.
func (p *Provider) releasePrivateLinks(ctx context.Context, pl *PrivateLinks, svc *v1.Service, frontendIDs []string) error {
	if pl == nil {
		return nil
	}
	rg := p.cfg.PrivateLinkServiceResourceGroup
	if s, err := pl.m.Spec(svc); err == nil && s.ResourceGroup != "" {
		rg = s.ResourceGroup
	}
	var errs []error
	for _, id := range frontendIDs {
		if err := pl.m.ReleaseFrontend(ctx, svc, rg, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
