package emulator_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
)

// A consumer reaches the load balancer's member through a private
// endpoint, from the Private Link Service's NAT address: the member's
// security group lets only that address in, so the same client straight to
// the frontend is refused.
func TestPrivateEndpointCarriesTrafficFromTheNATAddress(t *testing.T) {
	r := newNSGRig(t, emulator.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	poll := &runtime.PollUntilDoneOptions{Frequency: time.Millisecond}
	link := testutil.LoopbackNet(t) // NAT subnet .0/25, endpoint subnet .128/25
	nat := testutil.Nth(link, 10)
	client := testutil.Nth(testutil.LoopbackNet(t), 5) // a consumer outside every virtual network: Internet
	vnetID := secureNodes(t, r.clients, "n", r.nodes, allowRule("from-nat", 100, nat.String()+"/32", "*", "*"))
	r.putLB(vnetID)

	opts := r.clients.ARMClientOptions("pls-test")
	vnets, _ := armnetwork.NewVirtualNetworksClient(devenv.SubscriptionID, r.clients.Credential(), opts)
	vp, err := vnets.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, "linknet", armnetwork.VirtualNetwork{Location: to.Ptr(devenv.Location),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(link.String())}},
			Subnets: []*armnetwork.Subnet{
				{Name: to.Ptr("nat"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(netip.PrefixFrom(link.Addr(), 25).String()),
					PrivateLinkServiceNetworkPolicies: to.Ptr(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled)}},
				{Name: to.Ptr("pe"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(netip.PrefixFrom(testutil.Nth(link, 128), 25).String())}},
			}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vn, err := vp.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	plsc, _ := armnetwork.NewPrivateLinkServicesClient(devenv.SubscriptionID, r.clients.Credential(), opts)
	pp, err := plsc.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, "pls", armnetwork.PrivateLinkService{Location: to.Ptr(devenv.Location),
		Properties: &armnetwork.PrivateLinkServiceProperties{
			LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: to.Ptr(networkID("loadBalancers", "lb") + "/frontendIPConfigurations/fe")}},
			IPConfigurations: []*armnetwork.PrivateLinkServiceIPConfiguration{{Name: to.Ptr("nat"), Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
				Primary: to.Ptr(true), PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic), PrivateIPAddress: to.Ptr(nat.String()),
				Subnet: &armnetwork.Subnet{ID: to.Ptr(*vn.ID + "/subnets/nat")}}}},
			Fqdns: []*string{to.Ptr("svc.example.com")},
		}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pls, err := pp.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	pec, _ := armnetwork.NewPrivateEndpointsClient(devenv.SubscriptionID, r.clients.Credential(), opts)
	ep, err := pec.BeginCreateOrUpdate(ctx, devenv.ResourceGroup, "pe", armnetwork.PrivateEndpoint{Location: to.Ptr(devenv.Location),
		Properties: &armnetwork.PrivateEndpointProperties{Subnet: &armnetwork.Subnet{ID: to.Ptr(*vn.ID + "/subnets/pe")},
			PrivateLinkServiceConnections: []*armnetwork.PrivateLinkServiceConnection{{Name: to.Ptr("c"),
				Properties: &armnetwork.PrivateLinkServiceConnectionProperties{PrivateLinkServiceID: pls.ID}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := ep.PollUntilDone(ctx, poll)
	if err != nil {
		t.Fatal(err)
	}
	if len(pe.Properties.CustomDNSConfigs) != 1 || len(pe.Properties.CustomDNSConfigs[0].IPAddresses) != 1 {
		t.Fatalf("the endpoint's address is not in customDnsConfigs: %+v", pe.Properties.CustomDNSConfigs)
	}
	endpoint := netip.AddrPortFrom(netip.MustParseAddr(*pe.Properties.CustomDNSConfigs[0].IPAddresses[0]), r.fe.Port())

	var answer string
	testutil.Poll(t, wait, "an answer through the private endpoint "+endpoint.String(), func() bool {
		answer, err = helloFrom(client, endpoint)
		return err == nil
	})
	if answer != "node" {
		t.Fatalf("through the endpoint: %q", answer)
	}
	if got, err := helloFrom(client, r.fe); err == nil {
		t.Fatalf("straight to the frontend from %v (not the NAT address) went through: %q", client, got)
	}
	// Deleting the endpoint stops it.
	dp, err := pec.BeginDelete(ctx, devenv.ResourceGroup, "pe", nil)
	if err == nil {
		_, err = dp.PollUntilDone(ctx, poll)
	}
	if err != nil {
		t.Fatal(err)
	}
	testutil.Poll(t, wait, "the endpoint to stop answering", func() bool {
		_, err := helloFrom(client, endpoint)
		return err != nil
	})
}
