package sandbox

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/privatelink"
)

// The Private Link part of the default demo (docs/private-link.md): the
// internal Service "private" (port 80, on "kubernetes", its pod on
// aks-pool1-2) is published through a Private Link Service, and a
// consumer's private endpoint in a second virtual network reaches it:
// `curl http://127.230.0.4/` answers with a node's name, the node seeing
// the Private Link Service's NAT address as the source.
const (
	// PrivateDemoService is the published Service.
	PrivateDemoService = "private"
	// ConsumerVnet is the consumer's virtual network, ConsumerPrefix its
	// (loopback) address space and only subnet "endpoints".
	ConsumerVnet   = "consumer-vnet"
	ConsumerPrefix = "127.230.0.0/24"
	// PrivateEndpointName is the consumer's private endpoint.
	PrivateEndpointName = "consumer-pe"
	// PrivateDemoFQDN is the Private Link Service's DNS name (the
	// endpoint's customDnsConfigs carry its address under it).
	PrivateDemoFQDN = "private.demo.example"
)

// createPrivateDemo creates the Service "private" and its EndpointSlice.
func createPrivateDemo(ctx context.Context, cs kubernetes.Interface) error {
	svc := demoService(PrivateDemoService, 80, v1.ServiceExternalTrafficPolicyCluster)
	svc.Annotations = map[string]string{
		annotationLBConfigurations: "kubernetes",
		annotations.KeyInternal:    "true",
		privatelink.KeyCreate:      "true",
		privatelink.KeyFQDNs:       PrivateDemoFQDN,
	}
	if _, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s: %w", svc.Name, err)
	}
	sl := demoSlice(PrivateDemoService, 80, map[string]string{"aks-pool1-2": "10.244.2.80"})
	if _, err := cs.DiscoveryV1().EndpointSlices(DemoNamespace).Create(ctx, sl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create endpointslice %s: %w", sl.Name, err)
	}
	return nil
}

// privateLinkTimeout bounds the wait for the Service's Private Link
// Service.
const privateLinkTimeout = 90 * time.Second

// connectPrivateEndpoint waits for the Private Link Service of
// demo/private, then creates the consumer's virtual network and private
// endpoint (same subscription: approved at once) and returns the service's
// name and the endpoint's address.
func connectPrivateEndpoint(ctx context.Context, env *devenv.Env) (string, netip.Addr, error) {
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "azlb-sandbox"})
	if err != nil {
		return "", netip.Addr{}, err
	}
	defer clients.Close()
	cfg := env.Config
	opts := clients.ARMClientOptions("sandbox-private-link")
	plsc, err := armnetwork.NewPrivateLinkServicesClient(cfg.NetworkSubscriptionID(), clients.NetworkCredential(), opts)
	if err != nil {
		return "", netip.Addr{}, err
	}
	rg := cfg.PrivateLinkServiceResourceGroup
	if rg == "" {
		rg = cfg.ResourceGroup
	}
	owner := DemoNamespace + "/" + PrivateDemoService
	var pls *armnetwork.PrivateLinkService
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, privateLinkTimeout, true, func(ctx context.Context) (bool, error) {
		pager := plsc.NewListPager(rg, nil)
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return false, nil //nolint:nilerr // not there yet: poll again
			}
			for _, p := range page.Value {
				if privatelink.Owner(p) == owner {
					pls = p
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("no Private Link Service for service %s within %v: %w", owner, privateLinkTimeout, err)
	}
	poll := &devenv.PollOptions // a second: the least the SDK takes outside a test binary
	vnets, err := armnetwork.NewVirtualNetworksClient(cfg.NetworkSubscriptionID(), clients.NetworkCredential(), opts)
	if err != nil {
		return "", netip.Addr{}, err
	}
	vp, err := vnets.BeginCreateOrUpdate(ctx, cfg.ResourceGroup, ConsumerVnet, armnetwork.VirtualNetwork{Location: to.Ptr(cfg.Location),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr(ConsumerPrefix)}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("endpoints"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr(ConsumerPrefix)}}},
		}}, nil)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("create virtual network %s: %w", ConsumerVnet, err)
	}
	vn, err := vp.PollUntilDone(ctx, poll)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("create virtual network %s: %w", ConsumerVnet, err)
	}
	pec, err := armnetwork.NewPrivateEndpointsClient(cfg.NetworkSubscriptionID(), clients.NetworkCredential(), opts)
	if err != nil {
		return "", netip.Addr{}, err
	}
	pp, err := pec.BeginCreateOrUpdate(ctx, cfg.ResourceGroup, PrivateEndpointName, armnetwork.PrivateEndpoint{Location: to.Ptr(cfg.Location),
		Properties: &armnetwork.PrivateEndpointProperties{Subnet: &armnetwork.Subnet{ID: to.Ptr(*vn.ID + "/subnets/endpoints")},
			PrivateLinkServiceConnections: []*armnetwork.PrivateLinkServiceConnection{{Name: to.Ptr(PrivateEndpointName),
				Properties: &armnetwork.PrivateLinkServiceConnectionProperties{PrivateLinkServiceID: pls.ID}}}}}, nil)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("create private endpoint %s: %w", PrivateEndpointName, err)
	}
	pe, err := pp.PollUntilDone(ctx, poll)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("create private endpoint %s: %w", PrivateEndpointName, err)
	}
	for _, d := range pe.Properties.CustomDNSConfigs {
		for _, a := range d.IPAddresses {
			if addr, err := netip.ParseAddr(*a); err == nil {
				return *pls.Name, addr, nil
			}
		}
	}
	return "", netip.Addr{}, fmt.Errorf("private endpoint %s shows no address in customDnsConfigs", PrivateEndpointName)
}

// readyPrivateLink connects the consumer's endpoint and waits until it
// answers.
func (v *variantRun) readyPrivateLink(ctx context.Context) error {
	name, addr, err := connectPrivateEndpoint(ctx, v.env)
	if err != nil {
		return err
	}
	fe := netip.AddrPortFrom(addr, 80)
	var node string
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, answerTimeout, true, func(context.Context) (bool, error) {
		node, last = helloTCP(netip.Addr{}, fe, 2*time.Second)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("private endpoint %s (%s) did not answer within %v (last: %w)", PrivateEndpointName, fe, answerTimeout, last)
	}
	v.step("service %s/%s published through Private Link Service %s; private endpoint %s in virtual network %s (%s) answers on %s: %s",
		DemoNamespace, PrivateDemoService, name, PrivateEndpointName, ConsumerVnet, ConsumerPrefix, fe, node)
	return nil
}
