package sandbox

import (
	"context"
	"io"
	"os"
	"path/filepath"
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

// The default demo's nodes have no VM in the emulator: seeding reserves
// their addresses in the subnet, so that dynamic internal frontends (IPv4
// and IPv6) never take a node's address (the audit's first internal
// Service got 127.240.0.4, aks-pool1-0's, whose kube-proxy then never
// served it).
func TestSeedReservesNodeAddresses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	env, err := devenv.Start(ctx, dir, emulator.Options{}, nil, devenv.WithNetwork(devenv.LoopbackNetwork))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	testutil.NotThrottled(t, env.Emulator(), emulator.Options{})

	// seed starts the node agent: a stand-in that exits at once.
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "azlb"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil { //nolint:gosec // an executable stand-in
		t.Fatal(err)
	}
	v := &variantRun{o: Options{Dir: dir, BinDir: bin, Out: io.Discard}, env: env, logs: dir, step: func(string, ...any) {}}
	if _, err := v.seed(ctx, env.URL, env.CAFile, filepath.Join(dir, "kubeconfig")); err != nil {
		t.Fatal(err)
	}

	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "sandbox-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer clients.Close()
	cfg := env.Config
	subnet := &armnetwork.Subnet{ID: to.Ptr(names.SubnetID(names.VirtualNetworkID(cfg.SubscriptionID, cfg.ResourceGroup, cfg.VnetName), cfg.SubnetName))}
	nodeOf := map[string]string{}
	for _, d := range demoNodes {
		nodeOf[d.ip], nodeOf[d.ipv6] = d.name, d.name
	}
	// Internal frontends, one per family, a few times over: the first
	// free addresses of the subnet.
	var fes []*armnetwork.FrontendIPConfiguration
	for i, ver := range []armnetwork.IPVersion{armnetwork.IPVersionIPv4, armnetwork.IPVersionIPv6, armnetwork.IPVersionIPv4, armnetwork.IPVersionIPv6, armnetwork.IPVersionIPv4, armnetwork.IPVersionIPv4} {
		fes = append(fes, &armnetwork.FrontendIPConfiguration{Name: to.Ptr("fe" + string(rune('a'+i))), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
			Subnet: subnet, PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic), PrivateIPAddressVersion: to.Ptr(ver),
		}})
	}
	lb, err := clients.LoadBalancer.CreateOrUpdate(ctx, cfg.ResourceGroup, "kubernetes-internal", armnetwork.LoadBalancer{
		Location:   to.Ptr(cfg.Location),
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: fes},
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, fe := range lb.Properties.FrontendIPConfigurations {
		ip := *fe.Properties.PrivateIPAddress
		if node, ok := nodeOf[ip]; ok {
			t.Errorf("internal frontend %s got %s, the address of node %s", *fe.Name, ip, node)
		}
	}
}
