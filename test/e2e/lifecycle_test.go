package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/backendpool"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/testutil"
)

// The whole node lifecycle through the real binaries: nodes are VMs of a
// scale set in the emulator, registered by simulated kubelets; the cloud
// node controller initializes them, the Service's NIC-based pool takes
// them, and an ARM deallocate makes the node NotReady, the cloud node
// lifecycle controller taints it shut down, and its pool entry goes Down;
// an ARM start brings it back to None.
func TestNodeLifecycleFromVMPowerState(t *testing.T) {
	ctx := context.Background()
	const cluster = "e2e-nic"
	cmp, vms := scaleSetNodes(t, suite.env, arm(t), "e2e-lifecycle", 2, "e2e-lc-")

	startController(t, "a", writeConfig(t, map[string]any{"clusterName": cluster, "loadBalancerBackendPoolConfigurationType": "nodeIPConfiguration"}),
		false, "--node-monitor-period=1s")
	ns := createNamespace(t)
	if _, err := suite.cs.CoreV1().Services(ns).Create(ctx, loadBalancerService(ns, "web", 80), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressIP(t, ns, "web")

	// state returns the admin state of each NIC-derived entry, by VM.
	state := func() map[string]string { return nicEntries(arm(t), cluster) }
	owner := func(vm devenv.NodeVM) string { return strings.ToLower(strings.TrimPrefix(vm.ProviderID, "azure://")) }
	eventually(t, 60*time.Second, "both VMs in the NIC-based pool", func(context.Context) (bool, error) {
		s := state()
		return s[owner(vms[0])] == "None" && s[owner(vms[1])] == "None", nil
	})

	node := func() *v1.Node {
		n, err := suite.cs.CoreV1().Nodes().Get(ctx, vms[1].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if node().Spec.ProviderID != vms[1].ProviderID {
		t.Fatalf("the cloud node controller set providerID %q, want %q", node().Spec.ProviderID, vms[1].ProviderID)
	}

	if err := cmp.PowerAction(ctx, vms[1].ProviderID, devenv.ActionDeallocate); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the deallocated VM's node tainted shut down and Down in the pool", func(context.Context) (bool, error) {
		return hasTaint(node(), backendpool.TaintShutdown) && state()[owner(vms[1])] == "Down", nil
	})
	if s := state(); s[owner(vms[0])] != "None" {
		t.Fatalf("the running VM's entry is %s", s[owner(vms[0])])
	}

	if err := cmp.PowerAction(ctx, vms[1].ProviderID, devenv.ActionStart); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the started VM's node untainted and None in the pool", func(context.Context) (bool, error) {
		return !hasTaint(node(), backendpool.TaintShutdown) && state()[owner(vms[1])] == "None", nil
	})

	// The last Service leaves: the pools are taken out of the scale set
	// and the load balancer is deleted.
	deleteService(t, ns, "web")
	eventually(t, 60*time.Second, "load balancer "+cluster+" deleted", func(context.Context) (bool, error) {
		return getLB(t, cluster) == nil, nil
	})
	model, err := arm(t).ScaleSet.Get(ctx, devenv.ResourceGroup, "e2e-lifecycle")
	if err != nil {
		t.Fatal(err)
	}
	if ic := model.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0]; len(ic.Properties.LoadBalancerBackendAddressPools) != 0 {
		t.Fatalf("the scale set model still lists %v", ic.Properties.LoadBalancerBackendAddressPools)
	}
}

func hasTaint(n *v1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// runNodeAgents simulates the kubelets of the VMs' nodes until the returned
// function is called; it then deletes the nodes.
func runNodeAgents(t *testing.T, vms []devenv.NodeVM) func() {
	t.Helper()
	return runNodeAgentsWith(t, arm(t), vms)
}

// nicEntries are the admin states of the NIC-derived entries of the
// cluster pool of load balancer lb (named after the cluster), by the entry's
// VM; none while the pool cannot be read.
func nicEntries(clients *azure.Clients, lb string) map[string]string {
	out := map[string]string{}
	p, err := clients.BackendPool.Get(context.Background(), devenv.ResourceGroup, lb, lb)
	if err != nil {
		return out
	}
	for _, a := range p.Properties.LoadBalancerBackendAddresses {
		if backendpool.IsNICEntry(a) {
			out[backendpool.EntryKey(a)] = string(backendpool.AdminStateOf(a))
		}
	}
	return out
}

// scaleSetNodes makes a Uniform scale set of n VMs (computer names prefix
// and six digits) in env's emulator and registers them as nodes with
// simulated kubelets, reading their power through clients. The kubelets
// stop, the nodes go and the Compute closes when the test ends.
func scaleSetNodes(t *testing.T, env *devenv.Env, clients *azure.Clients, name string, n int, prefix string) (*devenv.Compute, []devenv.NodeVM) {
	t.Helper()
	cmp, err := env.Compute(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cmp.Close)
	vms, err := cmp.CreateScaleSet(context.Background(), name, n, devenv.ScaleSetOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runNodeAgentsWith(t, clients, vms))
	return cmp, vms
}

// runNodeAgentsWith is runNodeAgents reading the VMs' power through
// clients (of another emulator than the suite's).
func runNodeAgentsWith(t *testing.T, clients *azure.Clients, vms []devenv.NodeVM) func() {
	t.Helper()
	inv := testutil.Inventory(t, compute.ClientsOf(clients), nil)
	var nodes []nodeagent.Node
	for _, vm := range vms {
		nodes = append(nodes, nodeagent.Node{Name: vm.Name, ProviderID: vm.ProviderID, IPs: vm.IPs})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := nodeagent.RunAll(ctx, nodes, nodeagent.Options{Client: suite.cs,
			Power: nodeagent.InventoryPower{Inventory: inv, MaxAge: 200 * time.Millisecond}, Interval: 200 * time.Millisecond}); err != nil {
			t.Error(err)
		}
	})
	return func() {
		cancel()
		wg.Wait()
		for _, n := range nodes {
			_ = suite.cs.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{})
		}
	}
}
