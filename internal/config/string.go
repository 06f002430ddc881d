package config

import (
	"fmt"
	"strings"
)

// String is a one-line summary of the configuration for logs. It holds no
// secret: the client secret appears only as whether it is set.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("Config{")
	kv := func(k string, v any) {
		if b.Len() > len("Config{") {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, v)
	}
	kv("cloud", c.Cloud)
	kv("subscriptionId", c.SubscriptionID)
	if c.NetworkResourceSubscriptionID != "" {
		kv("networkResourceSubscriptionID", c.NetworkResourceSubscriptionID)
	}
	if c.NetworkResourceTenantID != "" {
		kv("networkResourceTenantID", c.NetworkResourceTenantID)
	}
	kv("resourceGroup", c.ResourceGroup)
	kv("location", c.Location)
	kv("clusterName", c.ClusterName)
	kv("loadBalancerSku", c.LoadBalancerSKU)
	kv("defaultLoadBalancer", c.DefaultLoadBalancerName())
	kv("backendPoolType", c.LoadBalancerBackendPoolConfigurationType)
	kv("auth", authSummary(&c))
	if c.ResourceManagerEndpoint != "" {
		kv("resourceManagerEndpoint", c.ResourceManagerEndpoint)
	}
	if c.UseMultipleStandardLoadBalancers() {
		names := make([]string, len(c.MultipleStandardLoadBalancerConfigurations))
		for i, m := range c.MultipleStandardLoadBalancerConfigurations {
			names[i] = m.Name
		}
		kv("multipleStandardLoadBalancers", "["+strings.Join(names, ",")+"]")
	}
	kv("serviceGatewayEnabled", c.ServiceGatewayEnabled)
	kv("adminStateEnabled", c.AdminStateEnabled())
	kv("backendPoolUpdateMaxRetries", c.BackendPoolUpdateMaxRetries())
	kv("rateLimit", c.CloudProviderRateLimit)
	if n := len(c.unknownFields); n > 0 {
		kv("unknownFields", n)
	}
	b.WriteByte('}')
	return b.String()
}

func authSummary(c *Config) string {
	m := c.AuthMethod()
	switch m {
	case AuthMethodNone:
		return "none"
	case AuthMethodManagedIdentity:
		if c.UserAssignedIdentityID != "" {
			return fmt.Sprintf("%s(userAssignedIdentityID=%s)", m, c.UserAssignedIdentityID)
		}
		return string(m)
	default:
		return fmt.Sprintf("%s(aadClientId=%s)", m, c.AADClientID)
	}
}
