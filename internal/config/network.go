package config

import (
	"fmt"
	"strings"
)

// Network resources in another subscription, and perhaps another tenant:
// networkResourceSubscriptionID and networkResourceTenantID, as the Azure
// cloud provider reads them. The network resources (load balancers and
// their pools, public IPs and prefixes, the NSG, the virtual network and
// subnets, Private Link Services, NAT and service gateways) live in the
// network subscription; VMs, scale sets and network interfaces in
// subscriptionId. Across tenants the service principal (registered in both
// tenants) gets a token of each: the network tenant's for the network
// calls, and the cluster tenant's for the compute calls, which carry the
// network tenant's as an auxiliary token (their writes link the subnet and
// the pools in the network tenant).

// NetworkSubscriptionID is the subscription of the network resources:
// networkResourceSubscriptionID, else subscriptionId.
func (c *Config) NetworkSubscriptionID() string {
	if c.NetworkResourceSubscriptionID != "" {
		return c.NetworkResourceSubscriptionID
	}
	return c.SubscriptionID
}

// NetworkTenantID is the tenant of the network subscription:
// networkResourceTenantID, else tenantId.
func (c *Config) NetworkTenantID() string {
	if c.NetworkResourceTenantID != "" {
		return c.NetworkResourceTenantID
	}
	return c.TenantID
}

// CrossTenantNetwork reports whether the network resources are in another
// tenant than the cluster's (networkResourceTenantID set and not tenantId,
// compared ignoring case).
func (c *Config) CrossTenantNetwork() bool {
	return c.NetworkResourceTenantID != "" && !strings.EqualFold(c.NetworkResourceTenantID, c.TenantID)
}

// networkResources checks the two settings: a network tenant of its own
// needs a credential that can get tokens of two tenants (a service
// principal: client secret or certificate) and the network tenant's
// subscription.
func (v *validator) networkResources(c *Config) {
	if !c.CrossTenantNetwork() {
		return
	}
	switch m := c.AuthMethod(); m {
	case AuthMethodClientSecret, AuthMethodClientCertificate:
	default:
		what := string(m)
		if m == AuthMethodNone {
			what = "no authentication method"
		}
		v.add("networkResourceTenantID", fmt.Sprintf("a network tenant other than tenantId (%q) needs a service principal registered in both tenants "+
			"(aadClientId with aadClientSecret or aadClientCertPath): %s gets tokens of its own tenant only", c.TenantID, what))
	}
	if c.NetworkResourceSubscriptionID == "" || strings.EqualFold(c.NetworkResourceSubscriptionID, c.SubscriptionID) {
		v.add("networkResourceSubscriptionID", "required with networkResourceTenantID, and other than subscriptionId: "+
			"the network tenant's subscription (subscriptionId belongs to tenantId)")
	}
}
