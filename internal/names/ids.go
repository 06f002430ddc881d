package names

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
)

// LoadBalancerRef identifies a load balancer and builds the ARM IDs of its
// children.
type LoadBalancerRef struct {
	Subscription, ResourceGroup, Name string
}

// ID is the load balancer's ARM ID.
func (r LoadBalancerRef) ID() string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s",
		r.Subscription, r.ResourceGroup, r.Name)
}

// Child is the ID of a child: kind is the collection, e.g.
// "frontendIPConfigurations", "backendAddressPools", "probes".
func (r LoadBalancerRef) Child(kind, name string) string { return r.ID() + "/" + kind + "/" + name }

// VirtualNetworkID is the ARM ID of a virtual network.
func VirtualNetworkID(subscription, resourceGroup, vnet string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
		subscription, resourceGroup, vnet)
}

// SubnetID is the ARM ID of a subnet of a virtual network ID.
func SubnetID(vnetID, subnet string) string { return vnetID + "/subnets/" + subnet }

// ParseID parses an ARM resource ID and returns its resource group and
// (last) name, with an error that quotes the ID when it is malformed.
func ParseID(id string) (resourceGroup, name string, err error) {
	r, err := arm.ParseResourceID(id)
	if err != nil {
		return "", "", fmt.Errorf("malformed ARM resource id %q: %w", id, err)
	}
	if r.ResourceGroupName == "" || r.Name == "" {
		return "", "", fmt.Errorf("malformed ARM resource id %q: no resource group or name", id)
	}
	return r.ResourceGroupName, r.Name, nil
}

// ChildName returns the last segment of an ID (a child's name), or "".
func ChildName(id string) string {
	id = strings.TrimRight(id, "/")
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		return id[i+1:]
	}
	return ""
}

// ChildOf reports whether id names a child of the given collection kind
// (e.g. "backendAddressPools") called name, under any parent.
func ChildOf(id, kind, name string) bool {
	return HasSuffixFold(strings.TrimRight(id, "/"), "/"+kind+"/"+name)
}
