package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/testutil"
)

// The sandbox's "curl from the pod" through the emulator's control API: a
// pod registered in the gateway (here under the default outbound service)
// reaches the loopback server the command starts, which sees the NAT
// gateway's public IP; a pod without a route gets the emulator's reason.
func TestEgressCurlThroughTheControlAPI(t *testing.T) {
	ctx := context.Background()
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{DataPlane: true, PublicIPv4CIDR: testutil.LoopbackNet(t).String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	testutil.NotThrottled(t, env.Emulator(), emulator.Options{})
	if err := env.SeedServiceGateway(ctx); err != nil {
		t.Fatal(err)
	}
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "sandbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	ctl, err := newEmulatorControl(env.Config.ResourceManagerEndpoint, env.Config.CACertFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctl.close)

	const pod = "10.244.9.9"
	if _, err := ctl.curlThroughServer(ctx, pod, ""); err == nil || !strings.Contains(err.Error(), "no outbound route") {
		t.Fatalf("a pod the gateway does not hold: %v", err)
	}
	err = clients.ServiceGateway.UpdateAddressLocations(ctx, devenv.ResourceGroup, names.ServiceGateway, armnetwork.ServiceGatewayUpdateAddressLocationsRequest{
		Action: to.Ptr(armnetwork.UpdateActionPartialUpdate),
		AddressLocations: []*armnetwork.ServiceGatewayAddressLocation{{
			AddressLocation: to.Ptr("10.240.0.4"), AddressUpdateAction: to.Ptr(armnetwork.AddressUpdateActionFullUpdate),
			Addresses: []*armnetwork.ServiceGatewayAddress{{Address: to.Ptr(pod), Services: []*string{to.Ptr(names.DefaultOutboundService)}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	route, err := ctl.waitEgressRoute(ctx, pod, names.DefaultOutboundService, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := ctl.curlThroughServer(ctx, pod, "")
	if err != nil {
		t.Fatal(err)
	}
	if ans.Status != 200 || strings.TrimSpace(ans.Body) != sourceLine(route.Source) || ans.Service != names.DefaultOutboundService {
		t.Fatalf("answer %+v, want the server to see %s", ans, route.Source)
	}
	if _, err := ctl.egress(ctx, pod, "http://localhost:1/"); err == nil || !strings.Contains(err.Error(), "502") {
		t.Errorf("a host name as destination: %v", err)
	}
	if _, err := newEmulatorControl("", ""); err == nil {
		t.Error("no endpoint accepted")
	}
}
