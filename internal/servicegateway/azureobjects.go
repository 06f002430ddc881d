package servicegateway

import (
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/names"
)

// Azure values of pod-based load balancing (pinned: NRP compares them
// exactly).
const (
	// SKUService is the load balancer SKU; armnetwork v9 has no constant
	// for it.
	SKUService = armnetwork.LoadBalancerSKUName("Service")
	// publicIPSKU is the public IP SKU a Service SKU load balancer takes.
	publicIPSKU = armnetwork.PublicIPAddressSKUNameStandardV2
)

func uidOf(s string) types.UID { return types.UID(s) }

func (e *Controller) lbRef(uid string) names.LoadBalancerRef {
	return names.LoadBalancerRef{Subscription: e.cfg.NetworkSubscriptionID(), ResourceGroup: e.store.ResourceGroup(), Name: uid}
}

// poolID is the id of the Service's one (empty) backend pool.
func (e *Controller) poolID(uid string) string {
	return e.lbRef(uid).Child("backendAddressPools", uid)
}

// publicIP is the Service's public IP: StandardV2, Static, of its family,
// tagged with the cluster and the Service.
func (e *Controller) publicIP(svc *v1.Service, family v1.IPFamily) armnetwork.PublicIPAddress {
	version := armnetwork.IPVersionIPv4
	if family == v1.IPv6Protocol {
		version = armnetwork.IPVersionIPv6
	}
	// azure.json tags/tagsMap too (docs/configuration.md), azlb's own last.
	tags, _ := e.cfg.ResourceTags().Apply(nil, map[string]string{
		names.TagClusterName: e.cfg.ClusterName,
		names.TagServiceName: names.ServiceKey(svc),
	})
	return armnetwork.PublicIPAddress{
		Location: to.Ptr(e.cfg.Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(publicIPSKU), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Tags:     tags,
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(version),
		},
	}
}

// desiredLB is the whole load balancer of a Service: SKU Service, scope
// Public, one frontend on its public IP, one empty pool (the gateway fills
// it; the configured drain period), one rule per port without floating IP
// (TCP reset on TCP), no probes.
func (e *Controller) desiredLB(uid string, spec *lbSpec, pipID string) *armnetwork.LoadBalancer {
	ref := e.lbRef(uid)
	feID := ref.Child("frontendIPConfigurations", names.ServiceFrontend)
	rules := make([]*armnetwork.LoadBalancingRule, 0, len(spec.rules))
	for _, r := range spec.rules {
		proto := armnetwork.TransportProtocolTCP
		if r.protocol == v1.ProtocolUDP {
			proto = armnetwork.TransportProtocolUDP
		}
		rules = append(rules, &armnetwork.LoadBalancingRule{
			Name: to.Ptr(r.name),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(feID)},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(e.poolID(uid))},
				Protocol:                to.Ptr(proto),
				FrontendPort:            to.Ptr(r.port),
				BackendPort:             to.Ptr(r.backendPort),
				EnableFloatingIP:        to.Ptr(false),
				EnableTCPReset:          to.Ptr(r.protocol == v1.ProtocolTCP),
				IdleTimeoutInMinutes:    to.Ptr(spec.idle),
			},
		})
	}
	return &armnetwork.LoadBalancer{
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(SKUService), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			Scope: to.Ptr(armnetwork.LoadBalancerScopePublic),
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
				Name:       to.Ptr(names.ServiceFrontend),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: to.Ptr(pipID)}},
			}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(uid), Properties: e.poolProperties()}},
			LoadBalancingRules:  rules,
			Probes:              []*armnetwork.Probe{},
		},
	}
}

// poolProperties are the Service pool's: the configured drain period
// (loadBalancerBackendPoolDrainPeriodInSeconds), so that a pod address that
// leaves the gateway keeps its established flows for it; none when 0.
func (e *Controller) poolProperties() *armnetwork.BackendAddressPoolPropertiesFormat {
	p := &armnetwork.BackendAddressPoolPropertiesFormat{}
	if d := e.cfg.BackendPoolDrainPeriodInSeconds(); d > 0 {
		p.DrainPeriodInSeconds = to.Ptr(d)
	}
	return p
}

// lbMutation makes the load balancer the Service's desired one, writing
// only when it differs in what azlb sets.
func (e *Controller) lbMutation(uid string, spec *lbSpec, pipID string) lbstore.Mutation {
	return func(lb *armnetwork.LoadBalancer) (bool, error) {
		want := e.desiredLB(uid, spec, pipID)
		// azure.json tags/tagsMap and the cluster's tag; a tags-only
		// change writes only the tags.
		tags, retag := e.cfg.ResourceTags().Apply(lb.Tags, map[string]string{names.TagClusterName: e.cfg.ClusterName})
		matches := lbMatches(lb, want)
		if matches && !retag {
			return false, nil
		}
		if !matches {
			lb.SKU = want.SKU
			lb.Properties = want.Properties
		}
		lb.Tags = tags
		return true, nil
	}
}

// hasClusterTag reports whether a resource carries the cluster's tag (azlb
// made it for this cluster).
func hasClusterTag(tags map[string]*string, cluster string) bool {
	for k, v := range tags {
		if strings.EqualFold(k, names.TagClusterName) && strings.EqualFold(ptr.Deref(v, ""), cluster) {
			return true
		}
	}
	return false
}

// lbMatches compares what azlb sets on a Service's load balancer.
func lbMatches(cur, want *armnetwork.LoadBalancer) bool {
	if cur == nil || cur.SKU == nil || ptr.Deref(cur.SKU.Name, "") != SKUService || cur.Properties == nil {
		return false
	}
	c, w := cur.Properties, want.Properties
	if ptr.Deref(c.Scope, "") != ptr.Deref(w.Scope, "") || len(c.Probes) != 0 || len(c.InboundNatRules) != 0 || len(c.OutboundRules) != 0 {
		return false
	}
	if len(c.FrontendIPConfigurations) != 1 || len(c.BackendAddressPools) != 1 || len(c.LoadBalancingRules) != len(w.LoadBalancingRules) {
		return false
	}
	cf, wf := c.FrontendIPConfigurations[0], w.FrontendIPConfigurations[0]
	if !strings.EqualFold(ptr.Deref(cf.Name, ""), *wf.Name) || cf.Properties == nil || cf.Properties.PublicIPAddress == nil ||
		!strings.EqualFold(ptr.Deref(cf.Properties.PublicIPAddress.ID, ""), *wf.Properties.PublicIPAddress.ID) {
		return false
	}
	if !strings.EqualFold(ptr.Deref(c.BackendAddressPools[0].Name, ""), *w.BackendAddressPools[0].Name) ||
		drainOf(c.BackendAddressPools[0]) != drainOf(w.BackendAddressPools[0]) {
		return false
	}
	for _, wr := range w.LoadBalancingRules {
		if !ruleIn(c.LoadBalancingRules, wr) {
			return false
		}
	}
	return true
}

func ruleIn(rules []*armnetwork.LoadBalancingRule, w *armnetwork.LoadBalancingRule) bool {
	for _, r := range rules {
		if r == nil || !strings.EqualFold(ptr.Deref(r.Name, ""), *w.Name) || r.Properties == nil {
			continue
		}
		p, q := r.Properties, w.Properties
		pool := ""
		if p.BackendAddressPool != nil {
			pool = ptr.Deref(p.BackendAddressPool.ID, "")
		}
		return p.FrontendIPConfiguration != nil && strings.EqualFold(ptr.Deref(p.FrontendIPConfiguration.ID, ""), *q.FrontendIPConfiguration.ID) &&
			strings.EqualFold(pool, *q.BackendAddressPool.ID) &&
			strings.EqualFold(string(ptr.Deref(p.Protocol, "")), string(*q.Protocol)) &&
			ptr.Deref(p.FrontendPort, 0) == *q.FrontendPort && ptr.Deref(p.BackendPort, 0) == *q.BackendPort &&
			!ptr.Deref(p.EnableFloatingIP, false) && ptr.Deref(p.EnableTCPReset, false) == *q.EnableTCPReset &&
			ptr.Deref(p.IdleTimeoutInMinutes, 4) == *q.IdleTimeoutInMinutes
	}
	return false
}

// registration registers the Service's inbound gateway service, pointing
// at its pool (with the pool's virtual network), or with no pool (withPool
// false: the first step of a deletion).
func (e *Controller) registration(uid string, withPool bool) armnetwork.ServiceGatewayUpdateServicesRequest {
	pools := []*armnetwork.BackendAddressPool{}
	if withPool {
		pools = append(pools, &armnetwork.BackendAddressPool{
			ID:   to.Ptr(e.poolID(uid)),
			Name: to.Ptr(uid),
			Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
				VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(e.vnetID)},
			},
		})
	}
	return armnetwork.ServiceGatewayUpdateServicesRequest{
		Action: to.Ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: []*armnetwork.ServiceGatewayServiceRequest{{
			IsDelete: to.Ptr(false),
			Service: &armnetwork.ServiceGatewayService{
				Name: to.Ptr(uid),
				Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
					ServiceType:              to.Ptr(armnetwork.ServiceTypeInbound),
					IsDefault:                to.Ptr(false),
					LoadBalancerBackendPools: pools,
				},
			},
		}},
	}
}

// unregistration removes the Service's gateway service.
func (e *Controller) unregistration(uid string) armnetwork.ServiceGatewayUpdateServicesRequest {
	return armnetwork.ServiceGatewayUpdateServicesRequest{
		Action: to.Ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: []*armnetwork.ServiceGatewayServiceRequest{{
			IsDelete: to.Ptr(true),
			Service:  &armnetwork.ServiceGatewayService{Name: to.Ptr(uid)},
		}},
	}
}

// drainOf is a pool's drainPeriodInSeconds (0: none).
func drainOf(p *armnetwork.BackendAddressPool) int32 {
	if p == nil || p.Properties == nil {
		return 0
	}
	return ptr.Deref(p.Properties.DrainPeriodInSeconds, 0)
}
