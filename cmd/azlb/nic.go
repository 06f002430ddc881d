package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/compute"
	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nodeagent"
	"github.com/azlb/azlb/internal/sandbox"
)

const nicHelp = `
The NIC demo is running. Its nodes are VMs in the emulator (scale set aks-nic, availability
set aks-as) whose simulated kubelets keep them Ready while the VM runs. Try:

  export KUBECONFIG=%[1]s/kubeconfig
  bin/azlb status                        # NIC-based pool: the VMs' ip configurations, admin state
  bin/azlb vm deallocate aks-nic-000001  # ARM deallocate: NotReady, shutdown taint, AdminState Down
  bin/kubectl get nodes                  # aks-nic-000001 NotReady
  bin/azlb status                        # aks-nic-000001 Down in the pool
  bin/azlb vm start aks-nic-000001       # Ready again, taint removed, AdminState None

Files: %[1]s (azure.json, kubeconfig, nodes.json, logs/). Stop everything with: make sandbox-down
`

// clusterFlags are the kubeconfig and azure.json of the sandbox (or any
// cluster).
func clusterFlags(fs *flag.FlagSet) (kubeconfig, cloudConfig *string) {
	kubeconfig = fs.String("kubeconfig", filepath.Join(".sandbox", sandbox.KubeconfigFile), "kubeconfig of the cluster")
	cloudConfig = fs.String("cloud-config", filepath.Join(".sandbox", sandbox.AzureJSONFile), "azure.json")
	return kubeconfig, cloudConfig
}

func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

// vmAction runs a power action on the VM of a node (its providerID) or on
// a providerID given as is.
func vmAction(ctx context.Context, action string, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("vm", flag.ContinueOnError)
	kubeconfig, cloudConfig := clusterFlags(fs)
	target := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch action {
	case devenv.ActionStart, devenv.ActionDeallocate, devenv.ActionPowerOff, devenv.ActionRestart:
	default:
		return fmt.Errorf("unknown VM action %q (start, deallocate, powerOff, restart)", action)
	}
	providerID := target
	if !strings.HasPrefix(strings.ToLower(target), names.ProviderIDPrefix) {
		cs, err := kubeClient(*kubeconfig)
		if err != nil {
			return err
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, target, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", target, err)
		}
		if providerID = n.Spec.ProviderID; providerID == "" {
			return fmt.Errorf("node %s has no providerID yet (the cloud node controller sets it)", target)
		}
	}
	cfg, err := config.LoadFile(*cloudConfig)
	if err != nil {
		return err
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "azlb-vm"})
	if err != nil {
		return err
	}
	c, err := devenv.NewCompute(clients, cfg.SubscriptionID)
	if err != nil {
		clients.Close()
		return err
	}
	defer c.Close()
	if err := c.PowerAction(ctx, providerID, action); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s %s: done\n", action, target)
	return nil
}

// nodeAgent runs the simulated kubelets of a nodes file until a signal.
func nodeAgent(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node-agent", flag.ContinueOnError)
	kubeconfig, cloudConfig := clusterFlags(fs)
	nodesFile := fs.String("nodes", filepath.Join(".sandbox", sandbox.NodesFile), "the nodes to simulate (JSON)")
	interval := fs.Duration("interval", nodeagent.DefaultInterval, "how often each node looks at its VM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nodes, err := sandbox.ReadNodes(*nodesFile)
	if err != nil {
		return err
	}
	if len(nodes) == 0 {
		return errors.New("no nodes to simulate")
	}
	cs, err := kubeClient(*kubeconfig)
	if err != nil {
		return err
	}
	cfg, err := config.LoadFile(*cloudConfig)
	if err != nil {
		return err
	}
	clients, err := azure.NewClients(ctx, cfg, azure.ClientOptions{Source: "azlb-node-agent"})
	if err != nil {
		return err
	}
	defer clients.Close()
	inv, err := compute.New(compute.Options{
		Clients:        compute.ClientsOf(clients),
		SubscriptionID: cfg.SubscriptionID, ResourceGroup: cfg.ResourceGroup,
	})
	if err != nil {
		return err
	}
	// Services and EndpointSlices make each agent its node's kube-proxy
	// (the data plane's member on the node's loopback address).
	// Pods on the nodes make each agent the kubelet that confirms a
	// deleted pod's end (nodeagent.PodTerminator).
	factory := informers.NewSharedInformerFactory(cs, 0)
	svcs, slices, pods := factory.Core().V1().Services(), factory.Discovery().V1().EndpointSlices(), factory.Core().V1().Pods()
	svcs.Informer()
	slices.Informer()
	nodeNames := make([]string, 0, len(nodes))
	for _, n := range nodes {
		nodeNames = append(nodeNames, n.Name)
	}
	terminator, err := nodeagent.NewPodTerminator(cs, pods, nodeNames)
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("the %v informer did not sync", typ)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { terminator.Run(ctx) })
	return nodeagent.RunAll(ctx, nodes, nodeagent.Options{Client: cs,
		Power: nodeagent.InventoryPower{Inventory: inv, MaxAge: *interval}, Interval: max(*interval, 100*time.Millisecond),
		Services: svcs.Lister(), EndpointSlices: slices.Lister()})
}
