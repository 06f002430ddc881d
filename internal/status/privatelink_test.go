package status

import (
	"bytes"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/privatelink"
)

func TestRenderPrivateLinkService(t *testing.T) {
	const net = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/"
	p := &armnetwork.PrivateLinkService{
		Name: ptr.To("pls-fe1"), ID: ptr.To(net + "privateLinkServices/pls-fe1"),
		Tags: map[string]*string{privatelink.TagClusterName: ptr.To("kubernetes"), privatelink.TagOwnerService: ptr.To("default/api")},
		Properties: &armnetwork.PrivateLinkServiceProperties{
			Alias:                                ptr.To("pls-fe1.1234.eastus.azure.privatelinkservice"),
			LoadBalancerFrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{ID: ptr.To(net + "loadBalancers/kubernetes-internal/frontendIPConfigurations/fe1")}},
			IPConfigurations: []*armnetwork.PrivateLinkServiceIPConfiguration{
				{Name: ptr.To("subnet-pls-fe1-static-10.0.0.9"), Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
					Primary: ptr.To(true), PrivateIPAddress: ptr.To("10.0.0.9"), Subnet: &armnetwork.Subnet{ID: ptr.To(net + "virtualNetworks/vnet/subnets/subnet")}}},
				{Name: ptr.To("subnet-pls-fe1-dynamic-1"), Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
					Primary: ptr.To(false), Subnet: &armnetwork.Subnet{ID: ptr.To(net + "virtualNetworks/vnet/subnets/subnet")}}},
			},
			Visibility:          &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: []*string{ptr.To("*")}},
			EnableProxyProtocol: ptr.To(true),
			Fqdns:               []*string{ptr.To("api.example.com")},
			PrivateEndpointConnections: []*armnetwork.PrivateEndpointConnection{{Name: ptr.To("pe1.abcd"), Properties: &armnetwork.PrivateEndpointConnectionProperties{
				PrivateEndpoint:                   &armnetwork.PrivateEndpoint{ID: ptr.To("/subscriptions/t/resourceGroups/consumer/providers/Microsoft.Network/privateEndpoints/pe1")},
				PrivateLinkServiceConnectionState: &armnetwork.PrivateLinkServiceConnectionState{Status: ptr.To("Pending"), Description: ptr.To("please")},
			}}},
		},
	}
	var buf bytes.Buffer
	if err := Render(&buf, &Snapshot{PrivateLinks: []*armnetwork.PrivateLinkService{p}}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"PRIVATE LINK SERVICE pls-fe1 (default/api)  frontend kubernetes-internal/fe1, resource group rg",
		"visibility: *; auto-approval: -; proxy protocol: on", "fqdns: api.example.com",
		"subnet-pls-fe1-static-10.0.0.9", "10.0.0.9", "subnet-pls-fe1-dynamic-1", "(dynamic)",
		"pe1.abcd", "consumer/pe1", "Pending", "please",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	buf.Reset()
	p.Properties.PrivateEndpointConnections, p.Properties.Visibility = nil, nil
	if err := Render(&buf, &Snapshot{PrivateLinks: []*armnetwork.PrivateLinkService{p}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "visibility: this subscription only") || !strings.Contains(out, "no private endpoint connections") {
		t.Errorf("no connections, no visibility:\n%s", out)
	}
}
