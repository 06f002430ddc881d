package devenv

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"go.uber.org/goleak"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/names"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Start seeds the emulator so that the configuration it returns reaches it
// through the real SDK; Connect attaches to the same emulator by URL and CA
// file, and seeding again is harmless.
func TestStartSeedsAndConnectAttaches(t *testing.T) {
	ctx := context.Background()
	env, err := Start(ctx, t.TempDir(), emulator.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if env.Config.ResourceManagerEndpoint != env.URL || env.Config.CACertFile != env.CAFile {
		t.Fatalf("config does not point at the emulator: %s", env.Config)
	}
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	subnet, err := clients.Subnet.Get(ctx, ResourceGroup, VnetName, SubnetName)
	if err != nil {
		t.Fatalf("seeded subnet: %v", err)
	}
	if subnet.Name == nil || *subnet.Name != SubnetName {
		t.Fatalf("subnet %+v", subnet)
	}

	again, err := Connect(ctx, env.URL, env.CAFile, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if again.Server != nil || again.Close() != nil {
		t.Fatal("a connected environment must not own the emulator")
	}
	if _, err := Connect(ctx, env.URL, "/does/not/exist.pem", nil); err == nil {
		t.Fatal("Connect with a missing CA file succeeded")
	}
}

// The pod-based environment: the gateway and its RP-owned outbound default.
func TestSeedServiceGateway(t *testing.T) {
	ctx := context.Background()
	env, err := Start(ctx, t.TempDir(), emulator.Options{}, PodIP)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if !env.Config.PodIPMode() {
		t.Fatal("PodIP did not select pod-based load balancing")
	}
	for range 2 { // idempotent
		if err := env.SeedServiceGateway(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	svcs, err := clients.ServiceGateway.GetServices(ctx, ResourceGroup, names.ServiceGateway)
	if err != nil {
		t.Fatal(err)
	}
	if len(svcs) != 1 || *svcs[0].Name != names.DefaultOutboundService || !*svcs[0].Properties.IsDefault ||
		*svcs[0].Properties.ServiceType != armnetwork.ServiceTypeOutbound {
		t.Fatalf("services: %+v", svcs)
	}
}

// WithNetwork seeds another address space: the loopback subnet the data
// plane needs.
func TestWithNetworkSeedsTheLoopbackSubnet(t *testing.T) {
	ctx := context.Background()
	env, err := Start(ctx, t.TempDir(), emulator.Options{}, nil, WithNetwork(LoopbackNetwork))
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	clients, err := env.Clients(ctx, azure.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	subnet, err := clients.Subnet.Get(ctx, ResourceGroup, VnetName, SubnetName)
	if err != nil {
		t.Fatal(err)
	}
	if p := subnet.Properties.AddressPrefixes; len(p) != 2 || *p[0] != "127.240.0.0/16" {
		t.Fatalf("subnet prefixes %v", p)
	}
}
