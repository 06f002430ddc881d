package provider

import (
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// findPool returns the named pool of a load balancer, or nil.
func findPool(lb *armnetwork.LoadBalancer, name string) *armnetwork.BackendAddressPool {
	if lb == nil || lb.Properties == nil {
		return nil
	}
	if i := findByName(lb.Properties.BackendAddressPools, name, poolNameOf); i >= 0 {
		return lb.Properties.BackendAddressPools[i]
	}
	return nil
}
