package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/emulator"
)

const emuSGW = "servicegateway"

// seedGateway creates the resource group, a virtual network, the gateway and
// per name a StandardV2 public IP and a load balancer of SKU Service with
// the empty pool <name>.
func (env *emuEnv) seedGateway(t testing.TB, lbs ...string) {
	t.Helper()
	env.seed(t)
	ctx := context.Background()
	vnets, err := armnetwork.NewVirtualNetworksClient(emuSub, env.c.Credential(), env.c.ARMClientOptions("test-vnet"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := vnets.BeginCreateOrUpdate(ctx, emuRG, "vnet", armnetwork.VirtualNetwork{
		Location: to.Ptr(emuLoc),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/8"), to.Ptr("fd00::/48")}},
		},
	}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	gws, err := armnetwork.NewServiceGatewaysClient(emuSub, env.c.Credential(), env.c.ARMClientOptions("test-sgw"))
	if err != nil {
		t.Fatal(err)
	}
	gp, err := gws.BeginCreateOrUpdate(ctx, emuRG, emuSGW, armnetwork.ServiceGateway{Location: to.Ptr(emuLoc),
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: to.Ptr(vnetID())}}}, nil)
	if err == nil {
		_, err = gp.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range lbs {
		pip, err := env.c.PublicIP.CreateOrUpdate(ctx, emuRG, n+"-pip", armnetwork.PublicIPAddress{Location: to.Ptr(emuLoc),
			SKU:        &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandardV2)},
			Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic)}}, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, n, armnetwork.LoadBalancer{Location: to.Ptr(emuLoc),
			SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUName("Service"))},
			Properties: &armnetwork.LoadBalancerPropertiesFormat{
				Scope: to.Ptr(armnetwork.LoadBalancerScopePublic),
				FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("frontend"),
					Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{ID: pip.ID}}}},
				BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(n)}},
			}}, "")
		if err != nil {
			t.Fatal(err)
		}
	}
}

func vnetID() string {
	return "/subscriptions/" + emuSub + "/resourceGroups/" + emuRG + "/providers/Microsoft.Network/virtualNetworks/vnet"
}

func register(names ...string) armnetwork.ServiceGatewayUpdateServicesRequest {
	req := armnetwork.ServiceGatewayUpdateServicesRequest{Action: to.Ptr(armnetwork.ServiceUpdateActionPartialUpdate)}
	for _, n := range names {
		req.ServiceRequests = append(req.ServiceRequests, &armnetwork.ServiceGatewayServiceRequest{
			IsDelete: to.Ptr(false),
			Service: &armnetwork.ServiceGatewayService{Name: to.Ptr(n), Properties: &armnetwork.ServiceGatewayServicePropertiesFormat{
				ServiceType: to.Ptr(armnetwork.ServiceTypeInbound),
				LoadBalancerBackendPools: []*armnetwork.BackendAddressPool{{
					ID:   to.Ptr("/subscriptions/" + emuSub + "/resourceGroups/" + emuRG + "/providers/Microsoft.Network/loadBalancers/" + n + "/backendAddressPools/" + n),
					Name: to.Ptr(n),
				}},
			}},
		})
	}
	return req
}

func addresses(loc string, addrs ...string) armnetwork.ServiceGatewayUpdateAddressLocationsRequest {
	l := &armnetwork.ServiceGatewayAddressLocation{AddressLocation: to.Ptr(loc),
		AddressUpdateAction: to.Ptr(armnetwork.AddressUpdateActionPartialUpdate), Addresses: []*armnetwork.ServiceGatewayAddress{}}
	for _, a := range addrs {
		l.Addresses = append(l.Addresses, &armnetwork.ServiceGatewayAddress{Address: to.Ptr(a), Services: []*string{to.Ptr("a")}})
	}
	return armnetwork.ServiceGatewayUpdateAddressLocationsRequest{Action: to.Ptr(armnetwork.UpdateActionPartialUpdate),
		AddressLocations: []*armnetwork.ServiceGatewayAddressLocation{l}}
}

func TestServiceGatewayClient(t *testing.T) {
	env := newEmuEnv(t, emulator.Options{ServiceGatewayPageSize: 1}, "test-sgw", nil)
	env.seedGateway(t, "a", "b")
	ctx := context.Background()
	sg := env.c.ServiceGateway

	// NRP's synchronous 200 (the emulator's default) is a success.
	if err := sg.UpdateServices(ctx, emuRG, emuSGW, register("a", "b")); err != nil {
		t.Fatalf("UpdateServices (200): %v", err)
	}
	svcs, err := sg.GetServices(ctx, emuRG, emuSGW)
	if err != nil || len(svcs) != 2 || ptr.Deref(svcs[1].Name, "") != "b" {
		t.Fatalf("GetServices over two pages = %v, %v", svcs, err)
	}
	if err := sg.UpdateAddressLocations(ctx, emuRG, emuSGW, addresses("10.1.0.4", "10.2.0.5")); err != nil {
		t.Fatalf("UpdateAddressLocations (200): %v", err)
	}

	// The specification's 202 and polling work too.
	if err := env.emu.SetServiceGatewayPOSTStatus(emulator.SGWPostAccepted); err != nil {
		t.Fatal(err)
	}
	if err := sg.UpdateAddressLocations(ctx, emuRG, emuSGW, addresses("fd00::4", "fd00:2::5")); err != nil {
		t.Fatalf("UpdateAddressLocations (202): %v", err)
	}
	locs, err := sg.GetAddressLocations(ctx, emuRG, emuSGW)
	if err != nil || len(locs) != 2 {
		t.Fatalf("GetAddressLocations = %v, %v", locs, err)
	}
	if got := ptr.Deref(locs[1].AddressLocation, ""); got != "FD00::4" {
		t.Errorf("IPv6 location %q, want NRP's upper-case FD00::4 as it came", got)
	}

	// An operation that ends Failed is an error, in either mode.
	for _, status := range []int{emulator.SGWPostOK, emulator.SGWPostAccepted} {
		if err := env.emu.SetServiceGatewayPOSTStatus(status); err != nil {
			t.Fatal(err)
		}
		env.addFault(t, emulator.Fault{Method: http.MethodPost, PathRegex: "updateAddressLocations$", LROResult: "Failed", Count: 1})
		err = sg.UpdateAddressLocations(ctx, emuRG, emuSGW, addresses("10.1.0.4", "10.2.0.6"))
		if err == nil || CompletedSynchronously(err) {
			t.Errorf("mode %d: failed operation returned %v", status, err)
		}
	}
	// A 200 that carries an error code is an error.
	env.addFault(t, emulator.Fault{Method: http.MethodPost, PathRegex: "updateServices$", Status: http.StatusOK, Code: "SGWUpdateFailed", Count: 1})
	if err := sg.UpdateServices(ctx, emuRG, emuSGW, register("a")); err == nil {
		t.Error("200 with an error code is a success")
	}
	// A 400 is classified Other and names the call.
	err = sg.UpdateAddressLocations(ctx, emuRG, emuSGW, addresses("10.1.0.4", "fd00::9"))
	if Classify(err) != ClassOther || !strings.Contains(err.Error(), "azure serviceGateway update_address_locations "+emuRG+"/"+emuSGW) {
		t.Errorf("family mismatch: %v (%v)", err, Classify(err))
	}
	// A missing gateway is stale.
	if _, err := sg.GetServices(ctx, emuRG, "missing"); Classify(err) != ClassStale {
		t.Errorf("missing gateway: %v", err)
	}
	// A throttled POST closes the write gate.
	env.addFault(t, emulator.Fault{Method: http.MethodPost, PathRegex: "updateServices$", Status: http.StatusTooManyRequests, RetryAfter: "7", Count: 1})
	err = sg.UpdateServices(ctx, emuRG, emuSGW, register("a"))
	if Classify(err) != ClassThrottled {
		t.Errorf("429: %v", err)
	}
	if after, ok := ThrottleRetryAfter(err); !ok || after.Sub(env.clk.Now()) != 7*time.Second {
		t.Errorf("Retry-After = %v %v", after, ok)
	}
}

func TestCompletedSynchronously(t *testing.T) {
	post, _ := http.NewRequest(http.MethodPost, "https://arm/x", nil)
	get, _ := http.NewRequest(http.MethodGet, "https://arm/x", nil)
	mk := func(status int, code string, req *http.Request) error {
		return &azcore.ResponseError{StatusCode: status, ErrorCode: code, RawResponse: &http.Response{StatusCode: status, Request: req}}
	}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{mk(200, "", post), true},
		{mk(200, "SGWUpdateFailed", post), false},
		{mk(200, "", get), false}, // a failed poll
		{mk(202, "", post), false},
		{mk(400, "", post), false},
		{errors.New("x"), false},
		{nil, false},
		{&azcore.ResponseError{StatusCode: 200}, false},
	} {
		if got := CompletedSynchronously(tt.err); got != tt.want {
			t.Errorf("CompletedSynchronously(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
