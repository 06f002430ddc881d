package sandbox

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
)

// nodeNICSuffix names the network interface that holds a demo node's
// addresses in the emulated subnet: aks-pool1-0-nic.
const nodeNICSuffix = "-nic"

// reserveNodeAddresses gives every demo node a network interface in the
// sandbox's subnet holding its addresses (static, one ip configuration per
// family), as the NIC of the node's VM does in Azure. The default demo's
// nodes have no VM in the emulator, only loopback addresses registered on
// their Node objects: without these interfaces the emulator would see the
// addresses as free and give them to the first internal frontends
// (127.240.0.4 is aks-pool1-0's), whose traffic the data plane and that
// node's simulated kube-proxy would then both claim. The interfaces are in
// no backend pool (the demo's pools are IP-based) and carry no network
// security group.
func reserveNodeAddresses(ctx context.Context, env *devenv.Env, nodes []demoNode) error {
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "azlb-sandbox"})
	if err != nil {
		return err
	}
	defer clients.Close()
	cfg := env.Config
	subnet := &armnetwork.Subnet{ID: to.Ptr(names.SubnetID(names.VirtualNetworkID(cfg.NetworkSubscriptionID(), cmp.Or(cfg.VnetResourceGroup, cfg.ResourceGroup), cfg.VnetName), cfg.SubnetName))}
	for _, d := range nodes {
		var ipcs []*armnetwork.InterfaceIPConfiguration
		for i, s := range []string{d.ip, d.ipv6} {
			a, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			p := &armnetwork.InterfaceIPConfigurationPropertiesFormat{
				Primary:                   to.Ptr(i == 0),
				Subnet:                    subnet,
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
				PrivateIPAddress:          to.Ptr(a.String()),
				PrivateIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
			}
			name := "ipconfig1"
			if a.Is6() {
				p.PrivateIPAddressVersion, name = to.Ptr(armnetwork.IPVersionIPv6), "ipconfig-v6"
			}
			ipcs = append(ipcs, &armnetwork.InterfaceIPConfiguration{Name: to.Ptr(name), Properties: p})
		}
		if _, err := clients.Interface.CreateOrUpdate(ctx, cfg.ResourceGroup, d.name+nodeNICSuffix, armnetwork.Interface{
			Location:   to.Ptr(cfg.Location),
			Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: ipcs},
		}, ""); err != nil {
			return fmt.Errorf("reserve the addresses of node %s (network interface %s): %w", d.name, d.name+nodeNICSuffix, err)
		}
	}
	return nil
}
