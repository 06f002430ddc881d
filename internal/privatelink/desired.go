package privatelink

import (
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"
)

// Tags a PLS carries.
const (
	TagClusterName  = "k8s-azure-cluster-name"
	TagOwnerService = "k8s-azure-owner-service"
)

// maxIPConfigName is how long a NAT ip configuration name may be.
const maxIPConfigName = 80

// Target is where a Service's PLS goes: its frontend, and the ids that
// come from azure.json.
type Target struct {
	// FrontendID is the load balancer frontend's id.
	FrontendID string
	// Location is the load balancer's region.
	Location string
	// SubnetID is the NAT subnet's id.
	SubnetID string
	// ClusterName is the value of the cluster tag.
	ClusterName string
	// Owner is the owning Service, <namespace>/<name>.
	Owner string
}

// DefaultName is the PLS name of a frontend without azure-pls-name.
func DefaultName(frontendID string) string { return "pls-" + lastSegment(frontendID) }

// NameFor is the spec's PLS name on a frontend.
func (s Spec) NameFor(frontendID string) string {
	if s.Name != "" {
		return s.Name
	}
	return DefaultName(frontendID)
}

// IPConfigName names a NAT ip configuration: <subnet>-<pls>-static-<ip> or
// <subnet>-<pls>-dynamic-<i>, cut to 80 characters.
func IPConfigName(subnet, pls, kind string) string {
	n := subnet + "-" + pls + "-" + kind
	if len(n) > maxIPConfigName {
		n = n[:maxIPConfigName]
	}
	return n
}

// Desired is the PLS the spec asks for on t, named name (tags other than
// the two it owns are the caller's to merge).
func Desired(s Spec, t Target, name string) armnetwork.PrivateLinkService {
	subnet := lastSegment(t.SubnetID)
	cfgs := make([]*armnetwork.PrivateLinkServiceIPConfiguration, 0, s.IPCount)
	for i := 0; i < s.IPCount; i++ {
		p := &armnetwork.PrivateLinkServiceIPConfigurationProperties{
			Primary:                 ptr.To(i == 0),
			PrivateIPAddressVersion: ptr.To(armnetwork.IPVersionIPv4),
			Subnet:                  &armnetwork.Subnet{ID: ptr.To(t.SubnetID)},
		}
		var n string
		if i < len(s.StaticIPs) {
			ip := s.StaticIPs[i].String()
			n = IPConfigName(subnet, name, "static-"+ip)
			p.PrivateIPAllocationMethod = ptr.To(armnetwork.IPAllocationMethodStatic)
			p.PrivateIPAddress = ptr.To(ip)
		} else {
			n = IPConfigName(subnet, name, "dynamic-"+strconv.Itoa(i))
			p.PrivateIPAllocationMethod = ptr.To(armnetwork.IPAllocationMethodDynamic)
		}
		cfgs = append(cfgs, &armnetwork.PrivateLinkServiceIPConfiguration{Name: ptr.To(n), Properties: p})
	}
	props := &armnetwork.PrivateLinkServiceProperties{
		LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: ptr.To(t.FrontendID)}},
		IPConfigurations:                     cfgs,
		EnableProxyProtocol:                  ptr.To(s.ProxyProtocol),
		Fqdns:                                toPtrs(s.FQDNs),
	}
	if s.Visibility != nil {
		props.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: toPtrs(s.Visibility)}
	}
	if s.AutoApproval != nil {
		props.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: toPtrs(s.AutoApproval)}
	}
	return armnetwork.PrivateLinkService{
		Name:       ptr.To(name),
		Location:   ptr.To(t.Location),
		Properties: props,
		Tags: map[string]*string{
			TagClusterName:  ptr.To(t.ClusterName),
			TagOwnerService: ptr.To(t.Owner),
		},
	}
}

// Merge returns cur with the members desired sets (frontend, NAT ip
// configurations, visibility, auto-approval, fqdns, proxy protocol and the
// two tags) taken from desired, and whether anything changed. Everything
// else of cur (other tags, connections, alias) is kept.
func Merge(cur *armnetwork.PrivateLinkService, desired armnetwork.PrivateLinkService) (armnetwork.PrivateLinkService, bool) {
	out := *cur
	changed := false
	var props armnetwork.PrivateLinkServiceProperties
	if cur.Properties != nil {
		props = *cur.Properties
	}
	d := desired.Properties
	if !sameFrontends(props.LoadBalancerFrontendIPConfigurations, d.LoadBalancerFrontendIPConfigurations) {
		props.LoadBalancerFrontendIPConfigurations = d.LoadBalancerFrontendIPConfigurations
		changed = true
	}
	if !sameIPConfigs(props.IPConfigurations, d.IPConfigurations) {
		props.IPConfigurations = d.IPConfigurations
		changed = true
	}
	if ptr.Deref(props.EnableProxyProtocol, false) != ptr.Deref(d.EnableProxyProtocol, false) {
		props.EnableProxyProtocol = d.EnableProxyProtocol
		changed = true
	}
	if !sameSet(fromPtrs(props.Fqdns), fromPtrs(d.Fqdns), false) {
		props.Fqdns = d.Fqdns
		changed = true
	}
	var curVis, wantVis, curAuto, wantAuto []string
	if props.Visibility != nil {
		curVis = fromPtrs(props.Visibility.Subscriptions)
	}
	if d.Visibility != nil {
		wantVis = fromPtrs(d.Visibility.Subscriptions)
	}
	if props.AutoApproval != nil {
		curAuto = fromPtrs(props.AutoApproval.Subscriptions)
	}
	if d.AutoApproval != nil {
		wantAuto = fromPtrs(d.AutoApproval.Subscriptions)
	}
	if !sameSet(curVis, wantVis, true) {
		props.Visibility = d.Visibility
		if props.Visibility == nil {
			props.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{}}
		}
		changed = true
	}
	if !sameSet(curAuto, wantAuto, true) {
		props.AutoApproval = d.AutoApproval
		if props.AutoApproval == nil {
			props.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: []*string{}}
		}
		changed = true
	}
	tags := make(map[string]*string, len(cur.Tags)+2)
	for k, v := range cur.Tags {
		tags[k] = v
	}
	for k, v := range desired.Tags {
		if ptr.Deref(tagValue(cur.Tags, k), "\x00") != ptr.Deref(v, "") {
			for ck := range tags {
				if strings.EqualFold(ck, k) {
					delete(tags, ck)
				}
			}
			tags[k] = v
			changed = true
		}
	}
	out.Tags = tags
	out.Properties = &props
	return out, changed
}

// tagValue finds a tag by key, ignoring case.
func tagValue(tags map[string]*string, key string) *string {
	if v, ok := tags[key]; ok {
		return v
	}
	for k, v := range tags {
		if strings.EqualFold(k, key) {
			return v
		}
	}
	return nil
}

// FrontendOf is the id of the (first) frontend a PLS serves.
func FrontendOf(p *armnetwork.PrivateLinkService) string {
	if p == nil || p.Properties == nil {
		return ""
	}
	for _, f := range p.Properties.LoadBalancerFrontendIPConfigurations {
		if f != nil && f.ID != nil {
			return *f.ID
		}
	}
	return ""
}

func sameFrontends(a, b []*armnetwork.FrontendIPConfiguration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] == nil || b[i] == nil || !strings.EqualFold(ptr.Deref(a[i].ID, ""), ptr.Deref(b[i].ID, "")) {
			return false
		}
	}
	return true
}

// sameIPConfigs compares NAT ip configurations by name, primary, subnet and
// (for static ones) address; a Dynamic configuration's address is Azure's.
func sameIPConfigs(cur, want []*armnetwork.PrivateLinkServiceIPConfiguration) bool {
	if len(cur) != len(want) {
		return false
	}
	byName := map[string]*armnetwork.PrivateLinkServiceIPConfiguration{}
	for _, c := range cur {
		if c == nil || c.Name == nil || c.Properties == nil {
			return false
		}
		byName[strings.ToLower(*c.Name)] = c
	}
	for _, w := range want {
		c := byName[strings.ToLower(*w.Name)]
		if c == nil {
			return false
		}
		cp, wp := c.Properties, w.Properties
		if ptr.Deref(cp.Primary, false) != ptr.Deref(wp.Primary, false) {
			return false
		}
		if cp.Subnet == nil || !strings.EqualFold(ptr.Deref(cp.Subnet.ID, ""), ptr.Deref(wp.Subnet.ID, "")) {
			return false
		}
		static := ptr.Deref(wp.PrivateIPAllocationMethod, "") == armnetwork.IPAllocationMethodStatic
		if static != (ptr.Deref(cp.PrivateIPAllocationMethod, "") == armnetwork.IPAllocationMethodStatic) {
			return false
		}
		if static && ptr.Deref(cp.PrivateIPAddress, "") != ptr.Deref(wp.PrivateIPAddress, "") {
			return false
		}
	}
	return true
}

// RemovedIPConfigs lists the NAT ip configurations of cur that want drops.
func RemovedIPConfigs(cur *armnetwork.PrivateLinkService, want armnetwork.PrivateLinkService) []string {
	if cur == nil || cur.Properties == nil {
		return nil
	}
	keep := map[string]bool{}
	for _, w := range want.Properties.IPConfigurations {
		keep[strings.ToLower(*w.Name)] = true
	}
	var out []string
	for _, c := range cur.Properties.IPConfigurations {
		if c != nil && c.Name != nil && !keep[strings.ToLower(*c.Name)] {
			out = append(out, *c.Name)
		}
	}
	return out
}

// sameSet compares two lists as sets (case-insensitively when fold).
func sameSet(a, b []string, fold bool) bool {
	norm := func(l []string) []string {
		out := make([]string, 0, len(l))
		for _, s := range l {
			if fold {
				s = strings.ToLower(s)
			}
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(norm(a), norm(b))
}

func toPtrs(l []string) []*string {
	out := make([]*string, len(l))
	for i := range l {
		out[i] = ptr.To(l[i])
	}
	return out
}

func fromPtrs(l []*string) []string {
	out := make([]string, 0, len(l))
	for _, p := range l {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

func lastSegment(id string) string {
	return id[strings.LastIndexByte(id, '/')+1:]
}
