package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// The hub: a second tenant of the emulator and its subscription, which
// holds the cluster's network resources.
const (
	hubTenant = "0b0b0b0b-0000-4000-8000-00000000000b"
	hubSub    = "0c0c0c0c-0000-4000-8000-00000000000c"
)

// TestNetworkResourcesInAnotherTenant runs the controller with the
// network resources in another subscription of another tenant
// (networkResourceSubscriptionID, networkResourceTenantID): the emulator's
// second tenant holds the virtual network, subnet and NSG; the nodes are
// VMs of a scale set in the cluster's subscription, in the hub's subnet,
// with NIC-based pools. The emulator holds ARM's rules across tenants: a
// subscription takes only tokens of its tenant, and a compute write that
// links the hub's pool needs the hub's auxiliary token.
//
// Without networkResourceTenantID the controller's calls to the hub carry
// the cluster tenant's token: the Service gets a Warning naming
// InvalidAuthenticationTokenTenant and no load balancer exists. With it,
// the load balancer, public IP and rules are in the hub, and the VMs of the
// cluster's subscription are members of its pool.
func TestNetworkResourcesInAnotherTenant(t *testing.T) {
	ctx := context.Background()
	const cluster = "e2e-hub"
	hub := func(c *config.Config) { c.NetworkResourceSubscriptionID, c.NetworkResourceTenantID = hubSub, hubTenant }
	env, err := devenv.Start(ctx, t.TempDir(), emulator.Options{Tenants: []emulator.Tenant{{ID: hubTenant, Subscriptions: []string{hubSub}}}}, hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	clients, err := env.Clients(ctx, azure.ClientOptions{Source: "e2e-hub"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clients.Close)
	cmp, err := env.Compute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cmp.Close()
	// The scale set (cluster subscription) in the hub's subnet: the
	// devenv's own compute write already needs the hub's auxiliary token.
	vms, err := cmp.CreateScaleSet(ctx, "e2e-hub", 2, devenv.ScaleSetOptions{Prefix: "e2e-hub-"})
	if err != nil {
		t.Fatal(err)
	}
	stopAgents := runNodeAgentsWith(t, clients, vms)
	defer stopAgents()
	ns := createNamespace(t)
	settings := map[string]any{"clusterName": cluster, "loadBalancerBackendPoolConfigurationType": "nodeIPConfiguration",
		"networkResourceSubscriptionID": hubSub}

	// The hub's tenant left out: refused, nothing written in the hub.
	a := startController(t, "a", writeConfigFor(t, env, settings), false)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteService(t, ns, "web") })
	eventually(t, 60*time.Second, "a SyncLoadBalancerFailed event naming InvalidAuthenticationTokenTenant",
		serviceEvent(ns, "web", "SyncLoadBalancerFailed", "InvalidAuthenticationTokenTenant"))
	a.stop()
	if lbs, err := clients.LoadBalancer.List(ctx, devenv.ResourceGroup); err != nil || len(lbs) != 0 {
		t.Fatalf("load balancers in the hub after the refusals: %d, %v", len(lbs), err)
	}

	// With the tenant: served from the hub.
	settings["networkResourceTenantID"] = hubTenant
	startController(t, "b", writeConfigFor(t, env, settings), false)
	ip := ingressIP(t, ns, "web")
	lb, err := clients.LoadBalancer.Get(ctx, devenv.ResourceGroup, cluster)
	if err != nil || !strings.HasPrefix(strings.ToLower(*lb.ID), "/subscriptions/"+hubSub+"/") {
		t.Fatalf("load balancer %s in the hub: %v", cluster, err)
	}
	pips, err := clients.PublicIP.List(ctx, devenv.ResourceGroup)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range pips {
		found = found || (p.Properties != nil && p.Properties.IPAddress != nil && *p.Properties.IPAddress == ip && strings.Contains(*p.ID, hubSub))
	}
	if !found {
		t.Fatalf("the ingress IP %s is no public IP of the hub", ip)
	}
	owner := func(vm devenv.NodeVM) string { return strings.ToLower(strings.TrimPrefix(vm.ProviderID, "azure://")) }
	eventually(t, 60*time.Second, "both VMs of the cluster's subscription in the hub's pool", func(context.Context) (bool, error) {
		p, err := clients.BackendPool.Get(ctx, devenv.ResourceGroup, cluster, cluster)
		if err != nil {
			return false, nil //nolint:nilerr // not yet
		}
		in := map[string]bool{}
		for _, a := range p.Properties.LoadBalancerBackendAddresses {
			if backendpool.IsNICEntry(a) {
				in[backendpool.EntryKey(a)] = true
			}
		}
		return in[owner(vms[0])] && in[owner(vms[1])], nil
	})
	for _, vm := range vms {
		if !strings.HasPrefix(strings.ToLower(strings.TrimPrefix(vm.ProviderID, "azure://")), "/subscriptions/"+devenv.SubscriptionID+"/") {
			t.Fatalf("VM %s is not in the cluster's subscription", vm.ProviderID)
		}
	}
	deleteServiceAndWait(t, ns, "web")
}
