package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/nodeagent"
)

// Variants (demo clusters) Up can create.
const (
	// VariantMulti ("" too): two Standard load balancers with IP-based
	// pools, nodes without VMs, a Local Service with a dedicated pool.
	VariantMulti = "multi"
	// VariantNIC: one load balancer with NIC-based pools over a scale set
	// and availability-set VMs in the emulator, whose nodes a simulated
	// kubelet per node keeps Ready while their VM runs.
	VariantNIC = "nic"
	// VariantContainer: pod-based load balancing (Container Load
	// Balancer): a service gateway, Services with their own load
	// balancers, pods registered under their nodes.
	VariantContainer = "container"
	// VariantBasic: a cluster an earlier cloud provider ran with Basic
	// load balancers (retired), azure.json at loadBalancerSku basic: the
	// controller refuses to start until it is set to standard and the
	// controller restarted (RestartController), which migrates it.
	VariantBasic = "basic"
)

// Variants lists the variants Up knows.
var Variants = []string{VariantMulti, VariantNIC, VariantContainer, VariantBasic, VariantNodes}

func knownVariant(v string) bool {
	return v == "" || slices.Contains(Variants, v)
}

// variantRun is what Up does for its variant on top of the processes every
// sandbox runs.
type variantRun struct {
	o    Options
	env  *devenv.Env
	cs   kubernetes.Interface
	logs string
	step func(format string, args ...any)
	// nodes are the simulated nodes (node agents).
	nodes []nodeagent.Node
	// nodeManagers: one azlb-node-manager per node initializes the nodes
	// (the NIC demo, when built), not the controller's cloud-node-controller.
	nodeManagers bool
}

// seed writes the variant's azure.json and seeds what it needs in Azure
// (the service gateway; the NIC demo's VMs; the Basic cluster's VMs, load
// balancers, public IPs and Services; the default demo's network
// interfaces holding its nodes' addresses) and starts the node agents
// (kubelets of the NIC and Basic demos' VMs; every node's kube-proxy)
// before the controller starts. It returns the azure.json path.
func (v *variantRun) seed(ctx context.Context, url, caFile, adminKubeconfig string) (string, error) {
	azureJSON := filepath.Join(v.o.Dir, AzureJSONFile)
	var cfgJSON []byte
	switch v.o.Variant {
	case VariantNIC:
		cfgJSON = NICAzureJSON(url, caFile)
	case VariantBasic:
		cfgJSON = BasicAzureJSON(url, caFile)
	case VariantContainer:
		cfgJSON = ContainerAzureJSON(url, caFile)
		if err := v.env.SeedServiceGateway(ctx); err != nil {
			return "", err
		}
		v.step("seeded service gateway %s with its outbound default %s", names.ServiceGateway, names.DefaultOutboundService)
	default:
		cfgJSON = AzureJSON(url, caFile)
	}
	if err := os.WriteFile(azureJSON, cfgJSON, 0o600); err != nil {
		return "", err
	}
	v.step("seeded resource group %s, virtual network %s; wrote %s", v.env.Config.ResourceGroup, v.env.Config.VnetName, azureJSON)
	var nodes []nodeagent.Node
	switch v.o.Variant {
	case VariantContainer:
		// Pods are the members there: the agents only play the kubelets
		// that confirm a deleted pod's end (no kube-proxy: no addresses).
		for _, d := range containerDemoNodes {
			nodes = append(nodes, nodeagent.Node{Name: d.name})
		}
	case VariantNIC:
		var err error
		if nodes, err = createNICVMs(ctx, v.env); err != nil {
			return "", err
		}
		v.step("created scale set aks-nic (3 VMs) and availability set aks-as (2 VMs) in the emulator")
	case VariantBasic:
		var err error
		if nodes, err = seedBasic(ctx, v.env, v.cs, v.step); err != nil {
			return "", err
		}
	default:
		if err := reserveNodeAddresses(ctx, v.env, demoNodes); err != nil {
			return "", err
		}
		v.step("reserved the nodes' addresses in subnet %s: a network interface per node (%s%s ...), as a VM's holds its address", v.env.Config.SubnetName, demoNodes[0].name, nodeNICSuffix)
		nodes = demoAgentNodes()
	}
	v.nodes = nodes
	nodesFile, err := writeNodes(v.o.Dir, nodes)
	if err != nil {
		return "", err
	}
	if err := startDetached(v.o.Dir, "azlb-node-agent", filepath.Join(v.logs, "node-agent.log"), filepath.Join(v.o.BinDir, "azlb"),
		"node-agent", "--kubeconfig", adminKubeconfig, "--cloud-config", azureJSON, "--nodes", nodesFile); err != nil {
		return "", err
	}
	if v.o.Variant == VariantNIC && nodeManagerBuilt(v.o.BinDir) {
		if err := startNodeManagers(ctx, v.cs, v.o.Dir, v.o.BinDir, v.logs, url, caFile, adminKubeconfig, nodes); err != nil {
			return "", err
		}
		v.nodeManagers = true
		v.step("azlb-node-manager started for each of the %d nodes (initializes its node from the VM's instance metadata; logs/%s-NODE.log)", len(nodes), nodeManagerName)
	}
	switch v.o.Variant {
	case VariantNIC, VariantBasic:
		v.step("simulated kubelets and kube-proxies started for %d nodes (Ready follows each VM's power state)", len(nodes))
	case VariantContainer:
		v.step("simulated kubelets started for %d nodes (they confirm the end of a deleted pod)", len(nodes))
	default:
		v.step("simulated kube-proxies started for %d nodes (each answers on its loopback address with its name)", len(nodes))
	}
	return azureJSON, nil
}

// demo creates the variant's demo cluster and returns the Services that
// get an ingress IP.
func (v *variantRun) demo(ctx context.Context, cs kubernetes.Interface) ([]string, error) {
	switch v.o.Variant {
	case VariantNIC:
		return []string{"web"}, createNICDemo(ctx, cs)
	case VariantContainer:
		return []string{"web", "api"}, createContainerDemo(ctx, cs)
	case VariantBasic:
		return basicServiceNames(), nil // seeded with their Basic-era IPs
	default:
		return demoServices, createDemo(ctx, cs)
	}
}

// ready waits for what the variant shows beyond the ingress IPs: the VMs
// in the NIC-based pool, the pods in the service gateway, or (the default
// demo, whose nodes carry traffic) every Service answering through the
// data plane.
func (v *variantRun) ready(ctx context.Context) error {
	controllerLog := filepath.Join(v.logs, "controller.log")
	switch v.o.Variant {
	case VariantNIC:
		if err := waitNICMembers(ctx, v.env, len(v.nodes)); err != nil {
			return fmt.Errorf("the %d VMs did not join the NIC-based pool (see %s): %w", len(v.nodes), controllerLog, err)
		}
		v.step("the %d VMs are members of the NIC-based pool kubernetes/kubernetes", len(v.nodes))
	case VariantContainer:
		n, err := waitGatewayAddresses(ctx, v.env, containerDemoPods)
		if err != nil {
			return fmt.Errorf("the pods did not reach the service gateway (see %s): %w", controllerLog, err)
		}
		v.step("service gateway holds the %d demo pods", n)
		if err := v.readyEgress(ctx); err != nil {
			return fmt.Errorf("%w (see %s)", err, controllerLog)
		}
	case VariantBasic:
		msg, err := waitRefusal(ctx, v.o.Dir, controllerLog)
		if err != nil {
			return err
		}
		v.step("azlb-controller-manager refused to start, as it must with loadBalancerSku basic: %s", msg)
	case "", VariantMulti:
		for _, name := range demoServices {
			fe, node, err := waitAnswer(ctx, v.cs, DemoNamespace, name, demoSource(name), answerTimeout)
			if err != nil {
				return fmt.Errorf("%w (see %s and %s)", err, filepath.Join(v.logs, "emulator.log"), filepath.Join(v.logs, "node-agent.log"))
			}
			v.step("service %s/%s answers on %s: %s", DemoNamespace, name, fe, node)
		}
		if err := v.readyPrivateLink(ctx); err != nil {
			return fmt.Errorf("%w (see %s)", err, controllerLog)
		}
	}
	return nil
}
