package devenv

import (
	"context"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/names"
)

// PodIP turns a configuration into pod-based load balancing: the three
// settings that select it together.
func PodIP(c *config.Config) {
	c.ServiceGatewayEnabled = true
	c.LoadBalancerBackendPoolConfigurationType = config.BackendPoolPodIP
	c.LoadBalancerSKU = config.LoadBalancerSKUService
}

// SeedServiceGateway creates what the resource provider provisions with a
// pod-based cluster: the ServiceGateway names.ServiceGateway in the
// cluster's resource group, on its virtual network, and the outbound
// default service names.DefaultOutboundService (a StandardV2 NAT gateway of
// that name with its public IP, registered as the gateway's Outbound,
// isDefault service). It is idempotent.
func (e *Env) SeedServiceGateway(ctx context.Context) error {
	clients, err := e.Clients(ctx, azure.ClientOptions{Source: "devenv-seed"})
	if err != nil {
		return err
	}
	defer clients.Close()
	vnetID := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s", SubscriptionID, ResourceGroup, VnetName)
	gws, err := armnetwork.NewServiceGatewaysClient(SubscriptionID, clients.Credential(), clients.ARMClientOptions("devenv-sgw"))
	if err != nil {
		return err
	}
	gp, err := gws.BeginCreateOrUpdate(ctx, ResourceGroup, names.ServiceGateway, armnetwork.ServiceGateway{
		Location: to.Ptr(Location),
		SKU:      &armnetwork.ServiceGatewaySKU{Name: to.Ptr(armnetwork.ServiceGatewaySKUNameStandard), Tier: to.Ptr(armnetwork.ServiceGatewaySKUTierRegional)},
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{
			VirtualNetwork: &armnetwork.VirtualNetwork{ID: to.Ptr(vnetID)},
			RouteTargetAddress: &armnetwork.RouteTargetAddressPropertiesFormat{
				Subnet:                    &armnetwork.Subnet{ID: to.Ptr(vnetID + "/subnets/" + SubnetName)},
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
			},
		},
	}, nil)
	if err == nil {
		_, err = gp.PollUntilDone(ctx, &PollOptions)
	}
	if err != nil {
		return fmt.Errorf("seed service gateway: %w", err)
	}
	pip, err := clients.PublicIP.CreateOrUpdate(ctx, ResourceGroup, names.DefaultOutboundService+"-pip", armnetwork.PublicIPAddress{
		Location:   to.Ptr(Location),
		SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandardV2)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)},
	}, "")
	if err != nil {
		return fmt.Errorf("seed default NAT gateway public IP: %w", err)
	}
	nats, err := armnetwork.NewNatGatewaysClient(SubscriptionID, clients.Credential(), clients.ARMClientOptions("devenv-nat"))
	if err != nil {
		return err
	}
	np, err := nats.BeginCreateOrUpdate(ctx, ResourceGroup, names.DefaultOutboundService, armnetwork.NatGateway{
		Location: to.Ptr(Location),
		SKU:      &armnetwork.NatGatewaySKU{Name: to.Ptr(armnetwork.NatGatewaySKUNameStandardV2)},
		Properties: &armnetwork.NatGatewayPropertiesFormat{PublicIPAddresses: []*armnetwork.SubResource{{ID: pip.ID}},
			ServiceGateway: &armnetwork.SubResource{ID: to.Ptr(fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/serviceGateways/%s", SubscriptionID, ResourceGroup, names.ServiceGateway))}},
	}, nil)
	var nat armnetwork.NatGatewaysClientCreateOrUpdateResponse
	if err == nil {
		nat, err = np.PollUntilDone(ctx, &PollOptions)
	}
	if err != nil {
		return fmt.Errorf("seed default NAT gateway: %w", err)
	}
	err = clients.ServiceGateway.UpdateServices(ctx, ResourceGroup, names.ServiceGateway, armnetwork.ServiceGatewayUpdateServicesRequest{
		Action: to.Ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: []*armnetwork.ServiceGatewayServiceRequest{{
			IsDelete: to.Ptr(false),
			Service: &armnetwork.ServiceGatewayService{
				Name: to.Ptr(names.DefaultOutboundService),
				Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
					ServiceType:        to.Ptr(armnetwork.ServiceTypeOutbound),
					IsDefault:          to.Ptr(true),
					PublicNatGatewayID: nat.ID,
				},
			},
		}},
	})
	if err != nil {
		return fmt.Errorf("seed default outbound service: %w", err)
	}
	return nil
}
