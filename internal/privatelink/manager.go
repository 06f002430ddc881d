package privatelink

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
)

// Event reasons on the Service.
const (
	// EventReasonInvalid: an azure-pls-* annotation is invalid or cannot
	// be honoured (Warning); the message names the annotation.
	EventReasonInvalid = "InvalidPrivateLinkService"
	// EventReasonEnsured: the Service's PLS was created or updated.
	EventReasonEnsured = "EnsuredPrivateLinkService"
	// EventReasonDeleted: the Service's PLS was deleted (its private
	// endpoint connections first).
	EventReasonDeleted = "DeletedPrivateLinkService"
	// EventReasonFailed: ARM refused a PLS write (Warning).
	EventReasonFailed = "PrivateLinkServiceFailed"
)

// Config is what the Manager takes from azure.json.
type Config struct {
	SubscriptionID string
	ClusterName    string
	// ResourceGroup is privateLinkServiceResourceGroup.
	ResourceGroup string
	// VnetResourceGroup, VnetName and SubnetName locate the NAT subnet
	// (SubnetName is the default subnet).
	VnetResourceGroup, VnetName, SubnetName string
}

// Frontend is the Service's load balancer frontend a PLS would serve.
type Frontend struct {
	// ID is the frontend's id (for a dual-stack Service, its IPv4 one).
	ID string
	// Location is the load balancer's region.
	Location string
	// Internal: the frontend is in a subnet (an internal Service).
	Internal bool
	// FloatingIP: the Service's rules use floating IP.
	FloatingIP bool
	// IPv6Only: the Service has only an IPv6 frontend.
	IPv6Only bool
	// Leaving are frontends of the Service whose Private Link Services its
	// reconcile deletes before it writes this one (it moves to another
	// load balancer): a name one of them holds is free (Check).
	Leaving []string
}

// Manager publishes Services through PLSs by the ownership rules of the
// package documentation; every write goes through its Store.
type Manager struct {
	store    *Store
	cfg      Config
	recorder record.EventRecorder
}

// NewManager builds a Manager over a Store (the caller runs the Store).
func NewManager(store *Store, cfg Config, recorder record.EventRecorder) *Manager {
	return &Manager{store: store, cfg: cfg, recorder: recorder}
}

// Store is the Manager's writer.
func (m *Manager) Store() *Store { return m.store }

func serviceKey(svc *v1.Service) string { return svc.Namespace + "/" + svc.Name }

// Spec parses the Service's annotations with azure.json's defaults.
func (m *Manager) Spec(svc *v1.Service) (Spec, error) {
	subnet := m.cfg.SubnetName
	if v := strings.TrimSpace(svc.Annotations[annotations.KeyInternalSubnet]); v != "" {
		subnet = v
	}
	return Parse(svc.Annotations, Defaults{ResourceGroup: m.cfg.ResourceGroup, Subnet: subnet})
}

// SubnetID is the id of a subnet of the cluster's virtual network.
func (m *Manager) SubnetID(subnet string) string {
	return "/subscriptions/" + m.cfg.SubscriptionID + "/resourceGroups/" + m.cfg.VnetResourceGroup +
		"/providers/Microsoft.Network/virtualNetworks/" + m.cfg.VnetName + "/subnets/" + subnet
}

// Reconcile brings the Service's PLS on fe in line with its annotations:
// creates or updates the PLS it owns, shares another Service's, or deletes
// the one it owns when it no longer asks for one. It returns the PLS the
// frontend has afterwards (nil: none). Errors are also Warning events.
func (m *Manager) Reconcile(ctx context.Context, svc *v1.Service, fe Frontend) (*armnetwork.PrivateLinkService, error) {
	pl, err := m.plan(ctx, svc, fe)
	if err != nil {
		if ae := (*annotations.Error)(nil); errors.As(err, &ae) {
			m.warn(svc, EventReasonInvalid, err)
		}
		return nil, err
	}
	return m.apply(ctx, svc, fe, pl)
}

// Check vets the Service's Private Link Service settings on fe as
// Reconcile would, writing nothing and recording no event: every
// *annotations.Error Reconcile would stop at (a bad value, an IPv6-only or
// public frontend, a PLS another Service owns or another frontend holds, a
// rename, a NAT subnet that does not exist or a static address outside
// it, NAT ip configurations Azure cannot remove) is returned here, so a
// caller can refuse the Service before writing anything else for it.
// Other errors are reads that failed.
func (m *Manager) Check(ctx context.Context, svc *v1.Service, fe Frontend) error {
	_, err := m.plan(ctx, svc, fe)
	return err
}

// plsPlan is what Reconcile does, decided from reads only.
type plsPlan struct {
	spec     Spec
	existing *armnetwork.PrivateLinkService
	// remove: the Service asks for none and owns existing; share: it uses
	// existing, another Service's, as it is; otherwise desired is written.
	remove, share bool
	name          string
	subnetID      string
	desired       armnetwork.PrivateLinkService
}

// plan decides what Reconcile does; an *annotations.Error refuses it.
func (m *Manager) plan(ctx context.Context, svc *v1.Service, fe Frontend) (*plsPlan, error) {
	spec, err := m.Spec(svc)
	if err != nil {
		return nil, err
	}
	existing, err := m.store.ByFrontend(ctx, spec.ResourceGroup, fe.ID)
	if err != nil {
		return nil, err
	}
	pl := &plsPlan{spec: spec, existing: existing}
	owner := serviceKey(svc)
	if !spec.Create {
		pl.remove = existing != nil && m.owns(existing, owner)
		pl.share = !pl.remove
		return pl, nil
	}
	if err := checkFrontend(fe); err != nil {
		return nil, err
	}
	name := spec.NameFor(fe.ID)
	if existing != nil {
		if !m.sameCluster(existing) {
			return nil, &annotations.Error{Key: KeyCreate, Value: svc.Annotations[KeyCreate], Rule: fmt.Sprintf(
				"cannot be honoured: frontend %s already has Private Link Service %s, which is not this cluster's (tag %s)", fe.ID, ptr.Deref(existing.Name, ""), TagClusterName)}
		}
		if !m.owns(existing, owner) {
			if len(spec.Configured) > 0 {
				k := spec.Configured[0]
				return nil, &annotations.Error{Key: k, Value: svc.Annotations[k], Rule: fmt.Sprintf(
					"is not allowed: this Service shares Private Link Service %s of Service %s on the same frontend; only its owner configures it",
					ptr.Deref(existing.Name, ""), ptr.Deref(tagValue(existing.Tags, TagOwnerService), ""))}
			}
			pl.share = true
			return pl, nil
		}
		if spec.Name != "" && !strings.EqualFold(spec.Name, ptr.Deref(existing.Name, "")) {
			return nil, &annotations.Error{Key: KeyName, Value: svc.Annotations[KeyName], Rule: fmt.Sprintf(
				"cannot rename Private Link Service %s: a Private Link Service's name never changes once created", ptr.Deref(existing.Name, ""))}
		}
		name = ptr.Deref(existing.Name, name)
	} else if other, err := m.nameHolder(ctx, spec.ResourceGroup, name); err != nil {
		return nil, err
	} else if other != nil && !strings.EqualFold(FrontendOf(other), fe.ID) &&
		!slices.ContainsFunc(fe.Leaving, func(id string) bool { return strings.EqualFold(id, FrontendOf(other)) }) {
		k := KeyName
		err := &annotations.Error{Key: k, Value: svc.Annotations[k], Rule: fmt.Sprintf(
			"cannot be used: Private Link Service %s in resource group %s already serves frontend %s", name, spec.ResourceGroup, FrontendOf(other))}
		if svc.Annotations[k] == "" {
			err.Value = name
		}
		return nil, err
	}
	pl.name, pl.subnetID = name, m.SubnetID(spec.Subnet)
	pl.desired = Desired(spec, Target{FrontendID: fe.ID, Location: fe.Location, SubnetID: pl.subnetID, ClusterName: m.cfg.ClusterName, Owner: owner}, name)
	if existing != nil {
		if err := removedConfigsError(svc, spec, existing, pl.desired, name); err != nil {
			return nil, err
		}
		if _, changed := Merge(existing, pl.desired); !changed {
			return pl, nil // nothing to write: the NAT subnet is not read
		}
	}
	if err := m.checkSubnet(ctx, svc, spec, pl.subnetID); err != nil {
		return nil, err
	}
	return pl, nil
}

// removedConfigsError refuses a change that would remove NAT ip
// configurations of cur (Azure does not remove them once added).
func removedConfigsError(svc *v1.Service, spec Spec, cur *armnetwork.PrivateLinkService, desired armnetwork.PrivateLinkService, name string) error {
	gone := RemovedIPConfigs(cur, desired)
	if len(gone) == 0 {
		return nil
	}
	k := KeyIPCount
	if len(spec.StaticIPs) > 0 {
		k = KeyIPAddresses
	}
	return &annotations.Error{Key: k, Value: svc.Annotations[k], Rule: fmt.Sprintf(
		"would remove NAT IP configurations %s of Private Link Service %s; Azure does not remove NAT IP configurations once added (delete the Private Link Service by removing %s, then add it again)",
		strings.Join(gone, ", "), name, KeyCreate)}
}

// checkSubnet reads the NAT subnet (the Store keeps what it read): it must
// exist, and each static NAT address must be one Azure hands out in it
// (inside one of its prefixes, not the first four or the last address,
// which Azure reserves).
func (m *Manager) checkSubnet(ctx context.Context, svc *v1.Service, spec Spec, subnetID string) error {
	sn, err := m.store.Subnet(ctx, subnetID)
	if err != nil {
		return err
	}
	key, value, where := KeySubnet, svc.Annotations[KeySubnet], ""
	if !slices.Contains(spec.Configured, KeySubnet) {
		where = " (the default NAT subnet: " + annotations.KeyInternalSubnet + " or azure.json subnetName)"
		value = ""
	}
	if sn == nil {
		return &annotations.Error{Key: key, Value: value, Rule: fmt.Sprintf("names NAT subnet %s%s, which does not exist in virtual network %s (resource group %s)",
			spec.Subnet, where, m.cfg.VnetName, m.cfg.VnetResourceGroup)}
	}
	prefixes := subnetPrefixes(sn)
	for _, ip := range spec.StaticIPs {
		if !usableIn(ip, prefixes) {
			return &annotations.Error{Key: KeyIPAddresses, Value: svc.Annotations[KeyIPAddresses], Rule: fmt.Sprintf(
				"lists %s, which is not an address Azure hands out in NAT subnet %s (%s; the first four and the last address of a prefix are reserved)",
				ip, spec.Subnet, prefixList(prefixes))}
		}
	}
	return nil
}

// subnetPrefixes are a subnet's address prefixes.
func subnetPrefixes(sn *armnetwork.Subnet) []netip.Prefix {
	var out []netip.Prefix
	if sn.Properties == nil {
		return nil
	}
	for _, s := range append([]*string{sn.Properties.AddressPrefix}, sn.Properties.AddressPrefixes...) {
		if p, err := netip.ParsePrefix(ptr.Deref(s, "")); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// usableIn reports whether ip (IPv4) is inside one of the prefixes and
// none of the five addresses Azure reserves in it: the first four and the
// last.
func usableIn(ip netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if !p.Contains(ip) || !p.Addr().Is4() || !ip.Is4() {
			continue
		}
		a, b := p.Addr().As4(), ip.As4()
		first, at := binary.BigEndian.Uint32(a[:]), binary.BigEndian.Uint32(b[:])
		last := first | uint32(1<<(32-p.Bits())-1)
		return at >= first+4 && at < last
	}
	return false
}

func prefixList(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "no address prefix"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// apply carries out a plan.
func (m *Manager) apply(ctx context.Context, svc *v1.Service, fe Frontend, pl *plsPlan) (*armnetwork.PrivateLinkService, error) {
	spec, owner, name := pl.spec, serviceKey(svc), pl.name
	switch {
	case pl.remove:
		if err := m.delete(ctx, svc, spec.ResourceGroup, pl.existing, fe.ID); err != nil {
			return pl.existing, err
		}
		return nil, nil
	case pl.share:
		return pl.existing, nil
	}
	desired := pl.desired
	check := func(cur *armnetwork.PrivateLinkService) error {
		if cur == nil {
			return nil
		}
		if f := FrontendOf(cur); !strings.EqualFold(f, fe.ID) {
			return &annotations.Error{Key: KeyName, Value: name, Rule: "cannot be used: Private Link Service " + name + " already serves frontend " + f}
		}
		if !m.owns(cur, owner) {
			return fmt.Errorf("private link service %s is owned by %s, not %s", name, ptr.Deref(tagValue(cur.Tags, TagOwnerService), "(no owner tag)"), owner)
		}
		return removedConfigsError(svc, spec, cur, desired, name)
	}
	res, err := m.store.Ensure(ctx, spec.ResourceGroup, name, desired, pl.subnetID, check)
	if err != nil {
		var ae *annotations.Error
		if errors.As(err, &ae) {
			m.warn(svc, EventReasonInvalid, err)
		} else {
			// ARM refused: what the listing said may be out of date (a
			// PLS made outside azlb); the next reconcile lists again.
			m.store.Invalidate(spec.ResourceGroup)
			m.warn(svc, EventReasonFailed, err)
		}
		return nil, err
	}
	if res.Written && m.recorder != nil {
		m.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonEnsured, "Ensured Private Link Service %s (resource group %s) on frontend %s", name, spec.ResourceGroup, lastSegment(fe.ID))
	}
	return res.PLS, nil
}

// nameHolder is the PLS named name in rg as the Store knows it. One that
// serves another frontend is looked up again in a fresh listing first: a
// refusal must not rest on a stale copy (a PLS deleted or moved outside
// this Store since it listed).
func (m *Manager) nameHolder(ctx context.Context, rg, name string) (*armnetwork.PrivateLinkService, error) {
	other, known := m.store.Cached(rg, name)
	if !known || other == nil {
		return nil, nil
	}
	m.store.Invalidate(rg)
	if _, err := m.store.List(ctx, rg); err != nil {
		return nil, err
	}
	other, _ = m.store.Cached(rg, name)
	return other, nil
}

// ReleaseFrontend deletes the PLS serving frontendID in resource group rg
// (private endpoint connections first), whoever owns it, if it is this
// cluster's: call it before removing the frontend from its load balancer,
// which Azure refuses while a PLS uses it. svc, when not nil, gets the
// events. A PLS of another cluster is left, with an error.
func (m *Manager) ReleaseFrontend(ctx context.Context, svc *v1.Service, rg, frontendID string) error {
	if rg == "" {
		rg = m.cfg.ResourceGroup
	}
	// A frontend goes rarely, and a PLS left on it makes Azure refuse the
	// load balancer write: look with a fresh listing.
	m.store.Invalidate(rg)
	existing, err := m.store.ByFrontend(ctx, rg, frontendID)
	if err != nil || existing == nil {
		return err
	}
	if !m.sameCluster(existing) {
		err := fmt.Errorf("frontend %s is used by Private Link Service %s of another cluster (tag %s); it cannot be removed until that Private Link Service is deleted",
			frontendID, ptr.Deref(existing.Name, ""), TagClusterName)
		if svc != nil {
			m.warn(svc, EventReasonFailed, err)
		}
		return err
	}
	return m.delete(ctx, svc, rg, existing, frontendID)
}

func (m *Manager) delete(ctx context.Context, svc *v1.Service, rg string, p *armnetwork.PrivateLinkService, frontendID string) error {
	name := ptr.Deref(p.Name, "")
	res, err := m.store.Delete(ctx, rg, name, func(cur *armnetwork.PrivateLinkService) error {
		if cur != nil && !strings.EqualFold(FrontendOf(cur), frontendID) {
			return fmt.Errorf("private link service %s no longer serves frontend %s", name, frontendID)
		}
		return nil
	})
	if err != nil {
		if svc != nil {
			m.warn(svc, EventReasonFailed, err)
		}
		return err
	}
	if res.Written {
		klog.FromContext(ctx).V(2).Info("Deleted private link service", "resourceGroup", rg, "name", name, "frontend", frontendID)
		if svc != nil && m.recorder != nil {
			m.recorder.Eventf(svc, v1.EventTypeNormal, EventReasonDeleted, "Deleted Private Link Service %s (resource group %s) and its private endpoint connections", name, rg)
		}
	}
	return nil
}

func (m *Manager) owns(p *armnetwork.PrivateLinkService, owner string) bool {
	return m.sameCluster(p) && strings.EqualFold(ptr.Deref(tagValue(p.Tags, TagOwnerService), ""), owner)
}

func (m *Manager) sameCluster(p *armnetwork.PrivateLinkService) bool {
	return strings.EqualFold(ptr.Deref(tagValue(p.Tags, TagClusterName), ""), m.cfg.ClusterName)
}

// checkFrontend applies the controller's own rules (ARM accepts a PLS on a
// public frontend): internal or floating IP off, and IPv4.
func checkFrontend(fe Frontend) error {
	switch {
	case fe.IPv6Only:
		return &annotations.Error{Key: KeyCreate, Value: "true", Rule: "cannot be honoured: IPv6 is not supported for private link service (the Service has no IPv4 frontend)"}
	case !fe.Internal && fe.FloatingIP:
		return &annotations.Error{Key: KeyCreate, Value: "true", Rule: "cannot be honoured: a Private Link Service needs an internal Service (" +
			annotations.KeyInternal + ") or floating IP disabled (" + annotations.KeyDisableFloatingIP + ")"}
	}
	return nil
}

func (m *Manager) warn(svc *v1.Service, reason string, err error) {
	if m.recorder != nil && svc != nil {
		m.recorder.Event(svc, v1.EventTypeWarning, reason, err.Error())
	}
}
