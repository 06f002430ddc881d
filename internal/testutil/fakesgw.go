package testutil

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
)

// FakeGatewayName is the only service gateway FakeARM knows.
const FakeGatewayName = "servicegateway"

// fakeGateway is FakeARM's service gateway: services and address
// locations with NRP's Full/Partial semantics (see docs/emulator.md), keyed
// canonically.
type fakeGateway struct {
	services map[string]*armnetwork.ServiceGatewayService // lower(name)
	locs     map[netip.Addr]map[netip.Addr][]string
}

func newFakeGateway() *fakeGateway {
	return &fakeGateway{services: map[string]*armnetwork.ServiceGatewayService{}, locs: map[netip.Addr]map[netip.Addr][]string{}}
}

// poolUser names the service using a pool of load balancer lb.
func (g *fakeGateway) poolUser(lb string) (string, bool) {
	for _, s := range g.services {
		if s.Properties == nil {
			continue
		}
		for _, p := range s.Properties.LoadBalancerBackendPools {
			if strings.Contains(strings.ToLower(ptr.Deref(p.ID, "")), "/loadbalancers/"+strings.ToLower(lb)+"/") {
				return ptr.Deref(s.Name, ""), true
			}
		}
	}
	return "", false
}

func (g *fakeGateway) named(lname string) bool {
	for _, l := range g.locs {
		for _, svcs := range l {
			for _, s := range svcs {
				if strings.ToLower(s) == lname {
					return true
				}
			}
		}
	}
	return false
}

// PublicIPs is the public IP client: StandardV2/Standard static addresses
// from 20.50.0.0/16 (IPv4) or 2603:1030:50::/48 (IPv6).
func (f *FakeARM) PublicIPs() azure.PublicIPClient { return (*fakePIPClient)(f) }

// ServiceGateway is the service gateway client of FakeGatewayName.
func (f *FakeARM) ServiceGateway() azure.ServiceGatewayClient { return (*fakeSGWClient)(f) }

// SeedPublicIP creates a public IP without counting a call.
func (f *FakeARM) SeedPublicIP(pip *armnetwork.PublicIPAddress) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.storePIP(ptr.Deref(pip.Name, ""), clone(pip))
}

// PublicIP returns a copy of a public IP as stored, or nil.
func (f *FakeARM) PublicIP(name string) *armnetwork.PublicIPAddress {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pips[strings.ToLower(name)]; ok {
		return clone(p)
	}
	return nil
}

// SeedGatewayService registers a service without counting a call.
func (f *FakeARM) SeedGatewayService(s *armnetwork.ServiceGatewayService) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sgw.services[strings.ToLower(ptr.Deref(s.Name, ""))] = clone(s)
}

// SeedAddress maps an address under a location to services without
// counting a call (no validation: it may hold what NRP would refuse).
func (f *FakeARM) SeedAddress(location, address string, services ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	loc, a := netip.MustParseAddr(location), netip.MustParseAddr(address)
	if f.sgw.locs[loc] == nil {
		f.sgw.locs[loc] = map[netip.Addr][]string{}
	}
	f.sgw.locs[loc][a] = slices.Sorted(slices.Values(services))
}

// GatewayServices lists the registered service names, sorted.
func (f *FakeARM) GatewayServices() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, s := range f.sgw.services {
		out = append(out, ptr.Deref(s.Name, ""))
	}
	sort.Strings(out)
	return out
}

// GatewayService returns a copy of a registered service, or nil.
func (f *FakeARM) GatewayService(name string) *armnetwork.ServiceGatewayService {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sgw.services[strings.ToLower(name)]; ok {
		return clone(s)
	}
	return nil
}

// Addresses renders the address locations as "location: address=svc,svc;
// ..." lines, sorted, for assertions.
func (f *FakeARM) Addresses() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for loc, addrs := range f.sgw.locs {
		var as []string
		for a, svcs := range addrs {
			as = append(as, a.String()+"="+strings.Join(svcs, ","))
		}
		sort.Strings(as)
		out = append(out, loc.String()+": "+strings.Join(as, " "))
	}
	sort.Strings(out)
	return out
}

// storePIP saves a public IP, allocating its address. Caller holds mu.
func (f *FakeARM) storePIP(name string, p *armnetwork.PublicIPAddress) {
	if p.Properties == nil {
		p.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	if cur, ok := f.pips[strings.ToLower(name)]; ok && cur.Properties != nil && cur.Properties.IPAddress != nil {
		p.Properties.IPAddress = cur.Properties.IPAddress
	}
	if p.Properties.IPAddress == nil {
		f.ipSeq++
		ip := fmt.Sprintf("20.50.%d.%d", f.ipSeq/250, f.ipSeq%250+1)
		if ptr.Deref(p.Properties.PublicIPAddressVersion, "") == armnetwork.IPVersionIPv6 {
			ip = fmt.Sprintf("2603:1030:50::%x", f.ipSeq)
		}
		p.Properties.IPAddress = to.Ptr(ip)
	}
	p.Name = to.Ptr(name)
	p.ID = to.Ptr("/subscriptions/sub/resourceGroups/" + FakeRG + "/providers/Microsoft.Network/publicIPAddresses/" + name)
	f.etagSeq++
	p.Etag = to.Ptr(fmt.Sprintf(`W/"%d"`, f.etagSeq))
	f.pips[strings.ToLower(name)] = p
}

type fakePIPClient FakeARM

func (c *fakePIPClient) f() *FakeARM { return (*FakeARM)(c) }

func (c *fakePIPClient) Get(_ context.Context, rg, name string) (*armnetwork.PublicIPAddress, error) {
	f := c.f()
	if err := f.begin(Call{Op: "pip.get", Name: name}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pips[strings.ToLower(name)]
	if rg != FakeRG || !ok {
		return nil, RespErr(http.StatusNotFound, "ResourceNotFound")
	}
	return clone(p), nil
}

func (c *fakePIPClient) List(_ context.Context, rg string) ([]*armnetwork.PublicIPAddress, error) {
	f := c.f()
	if err := f.begin(Call{Op: "pip.list"}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rg != FakeRG {
		return nil, RespErr(http.StatusNotFound, "ResourceGroupNotFound")
	}
	var out []*armnetwork.PublicIPAddress
	for _, p := range f.pips {
		out = append(out, clone(p))
	}
	sort.Slice(out, func(i, j int) bool { return ptr.Deref(out[i].Name, "") < ptr.Deref(out[j].Name, "") })
	return out, nil
}

func (c *fakePIPClient) CreateOrUpdate(_ context.Context, rg, name string, pip armnetwork.PublicIPAddress, etag string) (*armnetwork.PublicIPAddress, error) {
	f := c.f()
	if err := f.begin(Call{Op: "pip.put", Name: name, IfMatch: etag, Body: clone(&pip)}); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rg != FakeRG {
		return nil, RespErr(http.StatusNotFound, "ResourceGroupNotFound")
	}
	f.storePIP(name, clone(&pip))
	return clone(f.pips[strings.ToLower(name)]), nil
}

func (c *fakePIPClient) Delete(_ context.Context, rg, name string) error {
	f := c.f()
	if err := f.begin(Call{Op: "pip.delete", Name: name}); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pips[strings.ToLower(name)]; rg != FakeRG || !ok {
		return RespErr(http.StatusNotFound, "ResourceNotFound")
	}
	id := "/publicipaddresses/" + strings.ToLower(name)
	for _, l := range f.lbs {
		if l.lb.Properties == nil {
			continue
		}
		for _, fe := range l.lb.Properties.FrontendIPConfigurations {
			if fe.Properties != nil && fe.Properties.PublicIPAddress != nil && strings.HasSuffix(strings.ToLower(ptr.Deref(fe.Properties.PublicIPAddress.ID, "")), id) {
				return RespErr(http.StatusBadRequest, "PublicIPAddressInUseCannotBeDeleted")
			}
		}
	}
	delete(f.pips, strings.ToLower(name))
	return nil
}

type fakeSGWClient FakeARM

func (c *fakeSGWClient) f() *FakeARM { return (*FakeARM)(c) }

func gatewayKnown(rg, gw string) error {
	if rg != FakeRG || !strings.EqualFold(gw, FakeGatewayName) {
		return RespErr(http.StatusNotFound, "ResourceNotFound")
	}
	return nil
}

func (c *fakeSGWClient) GetServices(_ context.Context, rg, gw string) ([]*armnetwork.ServiceGatewayService, error) {
	f := c.f()
	if err := f.begin(Call{Op: "sgw.services"}); err != nil {
		return nil, err
	}
	if err := gatewayKnown(rg, gw); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*armnetwork.ServiceGatewayService
	for _, s := range f.sgw.services {
		out = append(out, clone(s))
	}
	sort.Slice(out, func(i, j int) bool { return ptr.Deref(out[i].Name, "") < ptr.Deref(out[j].Name, "") })
	return out, nil
}

// renderIP renders like NRP: IPv6 upper-case.
func renderIP(a netip.Addr) string {
	if a.Is6() {
		return strings.ToUpper(a.String())
	}
	return a.String()
}

func (c *fakeSGWClient) GetAddressLocations(_ context.Context, rg, gw string) ([]*armnetwork.ServiceGatewayAddressLocationResponse, error) {
	f := c.f()
	if err := f.begin(Call{Op: "sgw.locations"}); err != nil {
		return nil, err
	}
	if err := gatewayKnown(rg, gw); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*armnetwork.ServiceGatewayAddressLocationResponse
	for loc, addrs := range f.sgw.locs {
		l := &armnetwork.ServiceGatewayAddressLocationResponse{AddressLocation: to.Ptr(renderIP(loc)), Addresses: []*armnetwork.ServiceGatewayAddress{}}
		for a, svcs := range addrs {
			l.Addresses = append(l.Addresses, &armnetwork.ServiceGatewayAddress{Address: to.Ptr(renderIP(a)), Services: to.SliceOfPtrs(svcs...)})
		}
		out = append(out, l)
	}
	return out, nil
}

func (c *fakeSGWClient) UpdateServices(_ context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateServicesRequest) error {
	f := c.f()
	if err := f.begin(Call{Op: "sgw.update_services", Body: clone(&req)}); err != nil {
		return err
	}
	if err := gatewayKnown(rg, gw); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	after := map[string]*armnetwork.ServiceGatewayService{}
	if ptr.Deref(req.Action, "") != armnetwork.ServiceUpdateActionFullUpdate {
		for k, v := range f.sgw.services {
			after[k] = v
		}
	}
	for _, r := range req.ServiceRequests {
		if r == nil || r.Service == nil || ptr.Deref(r.Service.Name, "") == "" {
			return RespErr(http.StatusBadRequest, "InvalidRequestFormat")
		}
		key := strings.ToLower(*r.Service.Name)
		if ptr.Deref(r.IsDelete, false) {
			delete(after, key)
			continue
		}
		if r.Service.Properties != nil {
			for _, p := range r.Service.Properties.LoadBalancerBackendPools {
				id := strings.ToLower(ptr.Deref(p.ID, ""))
				i := strings.Index(id, "/loadbalancers/")
				if i < 0 {
					return RespErr(http.StatusBadRequest, "InvalidResourceReference")
				}
				lbName, _, _ := strings.Cut(id[i+len("/loadbalancers/"):], "/")
				if _, ok := f.lbs[lbName]; !ok {
					return RespErr(http.StatusBadRequest, "InvalidResourceReference")
				}
			}
		}
		after[key] = clone(r.Service)
	}
	for k := range f.sgw.services {
		if _, kept := after[k]; !kept && f.sgw.named(k) {
			return RespErr(http.StatusBadRequest, "ServiceWithOverlayMappingsCannotBeDeleted")
		}
	}
	f.sgw.services = after
	return nil
}

func (c *fakeSGWClient) UpdateAddressLocations(_ context.Context, rg, gw string, req armnetwork.ServiceGatewayUpdateAddressLocationsRequest) error {
	f := c.f()
	if err := f.begin(Call{Op: "sgw.update_locations", Body: clone(&req)}); err != nil {
		return err
	}
	if err := gatewayKnown(rg, gw); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	next := map[netip.Addr]map[netip.Addr][]string{}
	if ptr.Deref(req.Action, "") != armnetwork.UpdateActionFullUpdate {
		for loc, addrs := range f.sgw.locs {
			next[loc] = addrs
		}
	}
	seen := map[netip.Addr]bool{}
	for _, l := range req.AddressLocations {
		loc, err := netip.ParseAddr(ptr.Deref(l.AddressLocation, ""))
		if err != nil || l.Addresses == nil || l.AddressUpdateAction == nil {
			return RespErr(http.StatusBadRequest, "InvalidRequestFormat")
		}
		if seen[loc] {
			return RespErr(http.StatusBadRequest, "DuplicateLocationsInRequest")
		}
		seen[loc] = true
		full := *l.AddressUpdateAction == armnetwork.AddressUpdateActionFullUpdate
		if !full && len(l.Addresses) == 0 {
			delete(next, loc)
			continue
		}
		addrs := map[netip.Addr][]string{}
		if !full {
			for a, s := range next[loc] {
				addrs[a] = s
			}
		}
		for _, a := range l.Addresses {
			ip, err := netip.ParseAddr(ptr.Deref(a.Address, ""))
			if err != nil || a.Services == nil || ip.Is4() != loc.Is4() {
				return RespErr(http.StatusBadRequest, "InvalidRequestFormat")
			}
			var svcs []string
			for _, s := range a.Services {
				if _, ok := f.sgw.services[strings.ToLower(ptr.Deref(s, ""))]; !ok {
					return RespErr(http.StatusBadRequest, "ServiceGatewayServiceNotFound")
				}
				svcs = append(svcs, ptr.Deref(s, ""))
			}
			sort.Strings(svcs)
			if len(svcs) == 0 {
				delete(addrs, ip)
			} else {
				addrs[ip] = svcs
			}
		}
		next[loc] = addrs
	}
	f.sgw.locs = next
	return nil
}
