package compute

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/names"
)

// Defaults of Options.
const (
	// DefaultTTL is how old a listing may be for metadata (addresses,
	// size, zone): the cloud node controller asks for every node every
	// five minutes.
	DefaultTTL = 5 * time.Minute
	// DefaultMissRefresh is how often a lookup that misses may list its
	// scope again.
	DefaultMissRefresh = 10 * time.Second
)

// ErrNotFound is returned (wrapped) for a VM that does not exist.
var ErrNotFound = errors.New("VM not found")

// ErrOtherSubscription is returned (wrapped) for a VM of a subscription
// other than the configured one.
var ErrOtherSubscription = errors.New("VM of another subscription")

// Clients are the ARM clients the Inventory reads with.
type Clients struct {
	ScaleSets   azure.ScaleSetClient
	ScaleSetVMs azure.ScaleSetVMClient
	VMs         azure.VMClient
	Interfaces  azure.InterfaceClient
}

// ClientsOf takes the Inventory's clients from a set of azure clients.
func ClientsOf(c *azure.Clients) Clients {
	return Clients{ScaleSets: c.ScaleSet, ScaleSetVMs: c.ScaleSetVM, VMs: c.VM, Interfaces: c.Interface}
}

// Options configure an Inventory. Clients, SubscriptionID and ResourceGroup
// are required.
type Options struct {
	Clients
	SubscriptionID string
	// ResourceGroup is where nodes without a providerID are looked for.
	ResourceGroup string
	Clock         clock.PassiveClock
	// TTL is the default maxAge (DefaultTTL when 0).
	TTL time.Duration
	// MissRefresh bounds re-listing for lookups that miss
	// (DefaultMissRefresh when 0).
	MissRefresh time.Duration
}

// Inventory reads VMs with cached listings; see the package documentation.
// It is safe for concurrent use.
type Inventory struct {
	c         Clients
	sub, rg   string
	clock     clock.PassiveClock
	ttl, miss time.Duration
	mu        sync.Mutex
	scopes    map[string]*scope
}

// New builds an Inventory.
func New(o Options) (*Inventory, error) {
	if o.ScaleSets == nil || o.ScaleSetVMs == nil || o.VMs == nil || o.Interfaces == nil || o.SubscriptionID == "" || o.ResourceGroup == "" {
		return nil, errors.New("compute: the four clients, SubscriptionID and ResourceGroup are required")
	}
	inv := &Inventory{c: o.Clients, sub: o.SubscriptionID, rg: o.ResourceGroup, clock: o.Clock, ttl: o.TTL, miss: o.MissRefresh,
		scopes: map[string]*scope{}}
	if inv.clock == nil {
		inv.clock = clock.RealClock{}
	}
	if inv.ttl <= 0 {
		inv.ttl = DefaultTTL
	}
	if inv.miss <= 0 {
		inv.miss = DefaultMissRefresh
	}
	return inv, nil
}

// TTL is the default maxAge.
func (inv *Inventory) TTL() time.Duration { return inv.ttl }

// ResourceGroup is the configured resource group.
func (inv *Inventory) ResourceGroup() string { return inv.rg }

// SubscriptionID is the configured subscription.
func (inv *Inventory) SubscriptionID() string { return inv.sub }

// scope is one cached listing.
type scope struct {
	fetched time.Time
	stale   bool
	data    any
	loading chan struct{} // closed when the running load ends
	err     error         // of the load that just ended (for its waiters)
}

// load returns the listing of key no older than maxAge, listing it with
// fetch when needed; concurrent callers share one fetch.
func (inv *Inventory) load(ctx context.Context, key string, maxAge time.Duration, fetch func(context.Context) (any, error)) (any, time.Time, error) {
	for {
		inv.mu.Lock()
		s := inv.scopes[key]
		if s == nil {
			s = &scope{}
			inv.scopes[key] = s
		}
		if s.data != nil && !s.stale && inv.clock.Since(s.fetched) < maxAge {
			d, at := s.data, s.fetched
			inv.mu.Unlock()
			return d, at, nil
		}
		if ch := s.loading; ch != nil {
			inv.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, time.Time{}, ctx.Err()
			}
			inv.mu.Lock()
			err, d, at := s.err, s.data, s.fetched
			inv.mu.Unlock()
			if err != nil {
				return nil, time.Time{}, err
			}
			if d != nil {
				return d, at, nil
			}
			continue
		}
		ch := make(chan struct{})
		s.loading = ch
		inv.mu.Unlock()
		start := inv.clock.Now()
		d, err := fetch(ctx)
		inv.mu.Lock()
		s.loading, s.err = nil, err
		if err == nil {
			s.data, s.fetched, s.stale = d, start, false
		}
		inv.mu.Unlock()
		close(ch)
		if err != nil {
			return nil, time.Time{}, err
		}
		return d, start, nil
	}
}

// Invalidate makes the next lookup in the scope of a VM list it again:
// the scale set's VMs and NICs, or the resource group's VMs and NICs.
func (inv *Inventory) Invalidate(ref names.VMRef) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var keys []string
	if ref.Kind == names.ScaleSetVM {
		keys = []string{scaleSetKey(ref.ResourceGroup, ref.ScaleSet), scaleSetNICKey(ref.ResourceGroup, ref.ScaleSet)}
	} else {
		keys = []string{groupKey(ref.ResourceGroup), groupNICKey(ref.ResourceGroup)}
	}
	keys = append(keys, scaleSetsKey(ref.ResourceGroup))
	for _, k := range keys {
		if s := inv.scopes[k]; s != nil {
			s.stale = true
		}
	}
}

func scaleSetKey(rg, vmss string) string    { return "vmssvms/" + strings.ToLower(rg+"/"+vmss) }
func scaleSetNICKey(rg, vmss string) string { return "vmssnics/" + strings.ToLower(rg+"/"+vmss) }
func groupKey(rg string) string             { return "vms/" + strings.ToLower(rg) }
func groupNICKey(rg string) string          { return "nics/" + strings.ToLower(rg) }
func scaleSetsKey(rg string) string         { return "vmss/" + strings.ToLower(rg) }

// instances is a listing of VMs: by key (instance id, or lower-cased VM
// name) and by lower-cased computer name.
type instances struct {
	byKey, byName map[string]*Instance
}

func newInstances() *instances {
	return &instances{byKey: map[string]*Instance{}, byName: map[string]*Instance{}}
}

func (l *instances) add(key string, inst *Instance) {
	l.byKey[strings.ToLower(key)] = inst
	if inst.ComputerName != "" {
		l.byName[inst.ComputerName] = inst
	}
}

// stale404 turns "the scope does not exist" into an empty listing.
func stale404(err error) error {
	if azure.Classify(err) == azure.ClassStale {
		return nil
	}
	return err
}

func (inv *Inventory) scaleSetVMs(ctx context.Context, rg, vmss string, maxAge time.Duration) (*instances, time.Time, error) {
	d, at, err := inv.load(ctx, scaleSetKey(rg, vmss), maxAge, func(ctx context.Context) (any, error) {
		vms, err := inv.c.ScaleSetVMs.List(ctx, rg, vmss)
		if err = stale404(err); err != nil {
			return nil, err
		}
		l := newInstances()
		for _, vm := range vms {
			id := ptr.Deref(vm.InstanceID, "")
			if id == "" {
				continue
			}
			ref := names.VMRef{Kind: names.ScaleSetVM, Subscription: inv.sub, ResourceGroup: rg, ScaleSet: vmss, Instance: id}
			l.add(id, fromScaleSetVM(ref, vm))
		}
		return l, nil
	})
	if err != nil {
		return nil, at, err
	}
	return d.(*instances), at, nil
}

func (inv *Inventory) groupVMs(ctx context.Context, rg string, maxAge time.Duration) (*instances, time.Time, error) {
	d, at, err := inv.load(ctx, groupKey(rg), maxAge, func(ctx context.Context) (any, error) {
		vms, err := inv.c.VMs.List(ctx, rg)
		if err = stale404(err); err != nil {
			return nil, err
		}
		l := newInstances()
		for _, vm := range vms {
			name := ptr.Deref(vm.Name, "")
			if name == "" {
				continue
			}
			ref := names.VMRef{Kind: names.StandaloneVM, Subscription: inv.sub, ResourceGroup: rg, Name: name}
			l.add(name, fromVM(ref, vm))
		}
		return l, nil
	})
	if err != nil {
		return nil, at, err
	}
	return d.(*instances), at, nil
}

// Get returns the VM ref names, no older than maxAge (0: the TTL). A VM
// that is not found wraps ErrNotFound.
func (inv *Inventory) Get(ctx context.Context, ref names.VMRef, maxAge time.Duration) (*Instance, error) {
	if maxAge <= 0 {
		maxAge = inv.ttl
	}
	if !strings.EqualFold(ref.Subscription, inv.sub) {
		return nil, fmt.Errorf("%s: %w (%s, not the configured %s)", ref.ID(), ErrOtherSubscription, ref.Subscription, inv.sub)
	}
	lookup := func(maxAge time.Duration) (*Instance, time.Time, error) {
		if ref.Kind == names.ScaleSetVM {
			l, at, err := inv.scaleSetVMs(ctx, ref.ResourceGroup, ref.ScaleSet, maxAge)
			if err != nil {
				return nil, at, err
			}
			return l.byKey[strings.ToLower(ref.Instance)], at, nil
		}
		l, at, err := inv.groupVMs(ctx, ref.ResourceGroup, maxAge)
		if err != nil {
			return nil, at, err
		}
		return l.byKey[strings.ToLower(ref.Name)], at, nil
	}
	inst, at, err := lookup(maxAge)
	if err != nil {
		return nil, err
	}
	if inst == nil && inv.clock.Since(at) >= inv.miss {
		// A VM newer than the listing: list again (at most once per
		// MissRefresh, however many lookups miss).
		if inst, _, err = lookup(inv.miss); err != nil {
			return nil, err
		}
	}
	if inst == nil {
		return nil, fmt.Errorf("%s: %w", ref.ID(), ErrNotFound)
	}
	return inst, nil
}

// ForNode returns the node's VM: by providerID, else by name in the
// configured resource group (standalone VMs, then each scale set's VMs).
func (inv *Inventory) ForNode(ctx context.Context, node *v1.Node, maxAge time.Duration) (*Instance, error) {
	if node.Spec.ProviderID != "" {
		ref, err := names.ParseProviderID(node.Spec.ProviderID)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node.Name, err)
		}
		return inv.Get(ctx, ref, maxAge)
	}
	return inv.byName(ctx, strings.ToLower(node.Name), maxAge)
}

func (inv *Inventory) byName(ctx context.Context, name string, maxAge time.Duration) (*Instance, error) {
	if maxAge <= 0 {
		maxAge = inv.ttl
	}
	vms, _, err := inv.groupVMs(ctx, inv.rg, maxAge)
	if err != nil {
		return nil, err
	}
	if inst := vms.byKey[name]; inst != nil {
		return inst, nil
	}
	if inst := vms.byName[name]; inst != nil {
		return inst, nil
	}
	sets, err := inv.ScaleSetNames(ctx, inv.rg, maxAge)
	if err != nil {
		return nil, err
	}
	for _, vmss := range sets {
		l, _, err := inv.scaleSetVMs(ctx, inv.rg, vmss, maxAge)
		if err != nil {
			return nil, err
		}
		if inst := l.byName[name]; inst != nil {
			return inst, nil
		}
	}
	return nil, fmt.Errorf("no VM named or with computer name %q in resource group %s: %w", name, inv.rg, ErrNotFound)
}

// scaleSets is a listing of a resource group's scale sets.
type scaleSets struct {
	uniform []string // names of the Uniform ones, sorted
	byName  map[string]*armcompute.VirtualMachineScaleSet
}

func (inv *Inventory) scaleSets(ctx context.Context, rg string, maxAge time.Duration) (*scaleSets, error) {
	if maxAge <= 0 {
		maxAge = inv.ttl
	}
	d, _, err := inv.load(ctx, scaleSetsKey(rg), maxAge, func(ctx context.Context) (any, error) {
		sets, err := inv.c.ScaleSets.List(ctx, rg)
		if err = stale404(err); err != nil {
			return nil, err
		}
		l := &scaleSets{byName: map[string]*armcompute.VirtualMachineScaleSet{}}
		for _, s := range sets {
			n := ptr.Deref(s.Name, "")
			if n == "" {
				continue
			}
			l.byName[strings.ToLower(n)] = s
			if s.Properties == nil || s.Properties.OrchestrationMode == nil || !strings.EqualFold(string(*s.Properties.OrchestrationMode), "Flexible") {
				l.uniform = append(l.uniform, n)
			}
		}
		sort.Strings(l.uniform)
		return l, nil
	})
	if err != nil {
		return nil, err
	}
	return d.(*scaleSets), nil
}

// ScaleSetNames lists the Uniform scale sets of a resource group (cached).
func (inv *Inventory) ScaleSetNames(ctx context.Context, rg string, maxAge time.Duration) ([]string, error) {
	l, err := inv.scaleSets(ctx, rg, maxAge)
	if err != nil {
		return nil, err
	}
	return l.uniform, nil
}

// ScaleSet returns a scale set model from the resource group's listing (no
// older than maxAge, 0: the TTL); ErrNotFound when there is none.
func (inv *Inventory) ScaleSet(ctx context.Context, rg, name string, maxAge time.Duration) (*armcompute.VirtualMachineScaleSet, error) {
	l, err := inv.scaleSets(ctx, rg, maxAge)
	if err != nil {
		return nil, err
	}
	if s := l.byName[strings.ToLower(name)]; s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("scale set %s/%s: %w", rg, name, ErrNotFound)
}

// InvalidateScaleSets makes the next ScaleSet lookup in rg list again.
func (inv *Inventory) InvalidateScaleSets(rg string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if s := inv.scopes[scaleSetsKey(rg)]; s != nil {
		s.stale = true
	}
}

// NIC returns a network interface from its resource group's listing (no
// older than maxAge, 0: the TTL); ErrNotFound when there is none.
func (inv *Inventory) NIC(ctx context.Context, id string, maxAge time.Duration) (*armnetwork.Interface, error) {
	if maxAge <= 0 {
		maxAge = inv.ttl
	}
	rg, _, err := names.ParseID(id)
	if err != nil {
		return nil, err
	}
	m, err := inv.nicListing(ctx, groupNICKey(rg), maxAge, func(ctx context.Context) ([]*armnetwork.Interface, error) {
		return inv.c.Interfaces.List(ctx, rg)
	})
	if err != nil {
		return nil, err
	}
	if n := m[strings.ToLower(id)]; n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("network interface %s: %w", id, ErrNotFound)
}

// nics maps lower-cased NIC ids to network interfaces.
type nics map[string]*armnetwork.Interface

func (inv *Inventory) nicListing(ctx context.Context, key string, maxAge time.Duration, list func(context.Context) ([]*armnetwork.Interface, error)) (nics, error) {
	d, _, err := inv.load(ctx, key, maxAge, func(ctx context.Context) (any, error) {
		all, err := list(ctx)
		if err = stale404(err); err != nil {
			return nil, err
		}
		m := nics{}
		for _, n := range all {
			if n != nil && n.ID != nil {
				m[strings.ToLower(*n.ID)] = n
			}
		}
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return d.(nics), nil
}

// Addresses returns the VM's private addresses (InternalIP, the primary
// NIC's primary ip configuration first) and its computer name
// (Hostname), from a NIC listing no older than maxAge (0: the TTL).
func (inv *Inventory) Addresses(ctx context.Context, inst *Instance, maxAge time.Duration) ([]v1.NodeAddress, error) {
	if maxAge <= 0 {
		maxAge = inv.ttl
	}
	rg := inst.Ref.ResourceGroup
	var m nics
	var err error
	if inst.Ref.Kind == names.ScaleSetVM {
		m, err = inv.nicListing(ctx, scaleSetNICKey(rg, inst.Ref.ScaleSet), maxAge, func(ctx context.Context) ([]*armnetwork.Interface, error) {
			return inv.c.Interfaces.ListScaleSetNICs(ctx, rg, inst.Ref.ScaleSet)
		})
	} else {
		m, err = inv.nicListing(ctx, groupNICKey(rg), maxAge, func(ctx context.Context) ([]*armnetwork.Interface, error) {
			return inv.c.Interfaces.List(ctx, rg)
		})
	}
	if err != nil {
		return nil, err
	}
	var out []v1.NodeAddress
	seen := map[string]bool{}
	for _, id := range inst.NICIDs {
		for _, ip := range NICAddresses(m[strings.ToLower(id)]) {
			if !seen[ip] {
				seen[ip] = true
				out = append(out, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
			}
		}
	}
	if inst.ComputerName != "" {
		out = append(out, v1.NodeAddress{Type: v1.NodeHostName, Address: inst.ComputerName})
	}
	return out, nil
}

// NICAddresses lists a NIC's private addresses: the primary ip
// configuration's first, IPv4 before IPv6.
func NICAddresses(nic *armnetwork.Interface) []string {
	if nic == nil || nic.Properties == nil {
		return nil
	}
	type addr struct {
		ip      string
		primary bool
		v6      bool
	}
	var list []addr
	for _, c := range nic.Properties.IPConfigurations {
		if c == nil || c.Properties == nil || c.Properties.PrivateIPAddress == nil {
			continue
		}
		a, err := netip.ParseAddr(*c.Properties.PrivateIPAddress)
		if err != nil {
			continue
		}
		list = append(list, addr{a.String(), ptr.Deref(c.Properties.Primary, false), a.Is6()})
	}
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].v6 != list[j].v6 {
			return !list[i].v6
		}
		return list[i].primary && !list[j].primary
	})
	out := make([]string, len(list))
	for i, a := range list {
		out[i] = a.ip
	}
	return out
}

// MemberKeys returns the owners of a node's NIC-based pool members
// (names.IPConfigOwner, lower-cased): a scale set VM's own id (from the
// providerID, without a read), or the ids of a VM's network interfaces
// (from the cached listing). A node without an Azure VM of this
// subscription has none.
func (inv *Inventory) MemberKeys(ctx context.Context, node *v1.Node) ([]string, error) {
	ref, err := names.ParseProviderID(node.Spec.ProviderID)
	if err != nil {
		return nil, nil
	}
	if ref.Kind == names.ScaleSetVM {
		return []string{strings.ToLower(ref.ID())}, nil
	}
	inst, err := inv.Get(ctx, ref, 0)
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrOtherSubscription) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return inst.OwnerKeys(), nil
}
