package emulator

import (
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// seedNetwork creates rg, a vnet with a subnet, a Standard public IP and a
// Standard load balancer whose frontend uses it, all through the SDK.
func seedNetwork(t *testing.T, env *sdkEnv, rg string) armnetwork.LoadBalancer {
	t.Helper()
	ctx := ctxT(t)
	env.createGroup(t, rg, "eastus")
	vp, err := env.vnets.BeginCreateOrUpdate(ctx, rg, "vnet", armnetwork.VirtualNetwork{
		Location: to.Ptr("eastus"),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
			Subnets:      []*armnetwork.Subnet{{Name: to.Ptr("nodes"), Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")}}},
		},
	}, nil)
	if err != nil {
		t.Fatalf("vnet create: %v", err)
	}
	if _, err := vp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatalf("vnet poll: %v", err)
	}
	pp, err := env.pips.BeginCreateOrUpdate(ctx, rg, "pip", armnetwork.PublicIPAddress{
		Location: to.Ptr("eastus"),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
		},
	}, nil)
	if err != nil {
		t.Fatalf("pip create: %v", err)
	}
	pip, err := pp.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatalf("pip poll: %v", err)
	}
	if pip.Properties == nil || pip.Properties.IPAddress == nil || *pip.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("pip after create has no address or is not Succeeded: %+v", pip.Properties)
	}
	lp, err := env.lbs.BeginCreateOrUpdate(ctx, rg, "kubernetes", armnetwork.LoadBalancer{
		Location: to.Ptr("eastus"),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{
				Name:       to.Ptr("fe"),
				Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: pip.ID}},
			}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("kubernetes")}},
			Probes: []*armnetwork.Probe{{Name: to.Ptr("p80"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr[int32](80)}}},
			LoadBalancingRules: []*armnetwork.LoadBalancingRule{{
				Name: to.Ptr("r80"),
				Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
					FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(netID(rg, "loadBalancers", "kubernetes") + "/frontendIPConfigurations/fe")},
					BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(netID(rg, "loadBalancers", "kubernetes") + "/backendAddressPools/kubernetes")},
					Probe:                   &armnetwork.SubResource{ID: to.Ptr(netID(rg, "loadBalancers", "kubernetes") + "/probes/p80")},
					Protocol:                to.Ptr(armnetwork.TransportProtocolTCP),
					FrontendPort:            to.Ptr[int32](80),
					BackendPort:             to.Ptr[int32](30080),
				},
			}},
		},
	}, nil)
	if err != nil {
		t.Fatalf("lb create: %v", err)
	}
	lb, err := lp.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatalf("lb poll: %v", err)
	}
	return lb.LoadBalancer
}

func TestSDKLoadBalancerLifecycle(t *testing.T) {
	env := newSDKEnv(t, Options{})
	ctx := ctxT(t)
	lb := seedNetwork(t, env, "rg-life")

	// Back-references ARM computes.
	fe := lb.Properties.FrontendIPConfigurations[0]
	if len(fe.Properties.LoadBalancingRules) != 1 || *fe.Etag != *lb.Etag {
		t.Fatalf("frontend back-reference/etag wrong: rules=%v etag=%v lb etag=%v", fe.Properties.LoadBalancingRules, *fe.Etag, *lb.Etag)
	}
	if got := lb.Properties.BackendAddressPools[0].Properties.LoadBalancingRules; len(got) != 1 {
		t.Fatalf("pool back-reference: %v", got)
	}
	pip, err := env.pips.Get(ctx, "rg-life", "pip", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pip.Properties.IPConfiguration == nil || *pip.Properties.IPConfiguration.ID != *fe.ID {
		t.Fatalf("public IP ipConfiguration back-reference = %v, want %s", pip.Properties.IPConfiguration, *fe.ID)
	}

	// Backend pool subresource PUT with IP-based addresses changes the LB.
	vnetID := netID("rg-life", "virtualNetworks", "vnet")
	pp, err := env.pools.BeginCreateOrUpdate(ctx, "rg-life", "kubernetes", "kubernetes", armnetwork.BackendAddressPool{
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{
				{Name: to.Ptr("node-0"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress: to.Ptr("10.0.0.4"), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)}}},
				{Name: to.Ptr("node-1"), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
					IPAddress: to.Ptr("10.0.0.5"), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnetID)},
					AdminState: to.Ptr(armnetwork.LoadBalancerBackendAddressAdminStateDown)}},
			},
		},
	}, nil)
	if err != nil {
		t.Fatalf("pool put: %v", err)
	}
	pool, err := pp.PollUntilDone(ctx, pollOpts)
	if err != nil {
		t.Fatalf("pool poll: %v", err)
	}
	if n := len(pool.Properties.LoadBalancerBackendAddresses); n != 2 {
		t.Fatalf("pool has %d addresses, want 2", n)
	}
	if s := pool.Properties.LoadBalancerBackendAddresses[1].Properties.AdminState; s == nil || *s != armnetwork.LoadBalancerBackendAddressAdminStateDown {
		t.Fatalf("adminState = %v, want Down", s)
	}
	lb2, err := env.lbs.Get(ctx, "rg-life", "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *lb2.Etag == *lb.Etag {
		t.Fatal("pool PUT did not change the load balancer etag")
	}
	if *pool.Etag != *lb2.Etag {
		t.Fatalf("pool etag %s differs from LB etag %s", *pool.Etag, *lb2.Etag)
	}
	if n := len(lb2.Properties.BackendAddressPools[0].Properties.LoadBalancerBackendAddresses); n != 2 {
		t.Fatalf("LB GET shows %d pool addresses, want 2", n)
	}

	// A stale etag (the LB's etag before the pool PUT) gives 412.
	stale := policy.WithHTTPHeader(ctx, http.Header{"If-Match": []string{*lb.Etag}})
	_, err = env.lbs.BeginCreateOrUpdate(stale, "rg-life", "kubernetes", lb, nil)
	if code, status := errorCode(err); status != http.StatusPreconditionFailed || code != "PreconditionFailed" {
		t.Fatalf("stale If-Match: got %v (%s %d), want 412 PreconditionFailed", err, code, status)
	}
	// The current etag is accepted; the update is one round trip (Succeeded).
	cur := policy.WithHTTPHeader(ctx, http.Header{"If-Match": []string{*lb2.Etag}})
	up, err := env.lbs.BeginCreateOrUpdate(cur, "rg-life", "kubernetes", lb2.LoadBalancer, nil)
	if err != nil {
		t.Fatalf("update with current etag: %v", err)
	}
	if !up.Done() {
		t.Fatal("an update answered Succeeded should be done without polling")
	}
	if _, err := up.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}

	// 404 classification.
	_, err = env.lbs.Get(ctx, "rg-life", "missing", nil)
	if code, status := errorCode(err); status != 404 || code != "ResourceNotFound" {
		t.Fatalf("missing LB: %s %d", code, status)
	}
	_, err = env.pools.Get(ctx, "rg-life", "kubernetes", "missing", nil)
	if code, status := errorCode(err); status != 404 || code != "NotFound" {
		t.Fatalf("missing pool: %s %d", code, status)
	}
	_, err = env.lbs.Get(ctx, "rg-missing", "kubernetes", nil)
	if code, status := errorCode(err); status != 404 || code != "ResourceGroupNotFound" {
		t.Fatalf("missing group: %s %d", code, status)
	}
	_, err = env.subnets.Get(ctx, "rg-life", "vnet", "missing", nil)
	if code, status := errorCode(err); status != 404 || code != "NotFound" {
		t.Fatalf("missing subnet: %s %d", code, status)
	}

	// The public IP cannot be deleted while the frontend uses it.
	_, err = env.pips.BeginDelete(ctx, "rg-life", "pip", nil)
	if code, status := errorCode(err); status != 400 || code != "PublicIPAddressInUseCannotBeDeleted" {
		t.Fatalf("delete in-use pip: %v", err)
	}

	// Deletes complete through the poller; the LB delete frees the IP.
	for _, del := range []func() error{
		func() error {
			p, err := env.pools.BeginDelete(ctx, "rg-life", "kubernetes", "kubernetes", nil)
			if err == nil {
				_, err = p.PollUntilDone(ctx, pollOpts)
			}
			return err
		},
	} {
		err := del()
		if code, status := errorCode(err); status != 400 || code != "InUseBackendAddressPoolCannotBeDeleted" {
			t.Fatalf("deleting a pool used by a rule: %v", err)
		}
	}
	dp, err := env.lbs.BeginDelete(ctx, "rg-life", "kubernetes", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatalf("lb delete poll: %v", err)
	}
	if _, err := env.lbs.Get(ctx, "rg-life", "kubernetes", nil); err == nil {
		t.Fatal("LB still exists after delete")
	}
	pd, err := env.pips.BeginDelete(ctx, "rg-life", "pip", nil)
	if err != nil {
		t.Fatalf("pip delete after LB delete: %v", err)
	}
	if _, err := pd.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
	// Deleting again is a no-op 204 that the poller accepts.
	pd, err = env.pips.BeginDelete(ctx, "rg-life", "pip", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pd.PollUntilDone(ctx, pollOpts); err != nil {
		t.Fatal(err)
	}
}
