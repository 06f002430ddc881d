package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/nodeagent"
)

// NodesFile lists the simulated nodes of the sandbox (nodeagent.Node as
// JSON); `azlb node-agent` reads it.
const NodesFile = "nodes.json"

// NICAzureJSON is the NIC demo's azure.json: one load balancer, NIC-based
// pools (the default, spelled out).
func NICAzureJSON(url, caFile string) []byte {
	var m map[string]any
	_ = json.Unmarshal(devenv.ConfigJSON(url, caFile), &m) // ConfigJSON is always a JSON object
	m["loadBalancerBackendPoolConfigurationType"] = "nodeIPConfiguration"
	b, _ := json.MarshalIndent(m, "", "  ") // maps of JSON values always marshal
	return append(b, '\n')
}

// createNICVMs creates the NIC demo's VMs: a scale set of three and two
// VMs in an availability set.
func createNICVMs(ctx context.Context, env *devenv.Env) ([]nodeagent.Node, error) {
	c, err := env.Compute(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	vmss, err := c.CreateScaleSet(ctx, "aks-nic", 3, devenv.ScaleSetOptions{Prefix: "aks-nic-"})
	if err != nil {
		return nil, err
	}
	if err := c.CreateAvailabilitySet(ctx, "aks-as"); err != nil {
		return nil, err
	}
	var out []nodeagent.Node
	for _, vm := range vmss {
		out = append(out, nodeagent.Node{Name: vm.Name, ProviderID: vm.ProviderID, IPs: vm.IPs, Labels: map[string]string{"kubernetes.azure.com/agentpool": "nic"}})
	}
	for _, name := range []string{"aks-as-0", "aks-as-1"} {
		vm, err := c.CreateVM(ctx, name, "aks-as")
		if err != nil {
			return nil, err
		}
		out = append(out, nodeagent.Node{Name: vm.Name, ProviderID: vm.ProviderID, IPs: vm.IPs, Labels: map[string]string{"kubernetes.azure.com/agentpool": "as"}})
	}
	return out, nil
}

// writeNodes writes the simulated nodes for `azlb node-agent`.
func writeNodes(dir string, nodes []nodeagent.Node) (string, error) {
	b, err := json.MarshalIndent(nodes, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, NodesFile)
	return path, os.WriteFile(path, b, 0o600)
}

// ReadNodes reads a nodes file written for `azlb node-agent`.
func ReadNodes(path string) ([]nodeagent.Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var nodes []nodeagent.Node
	if err := json.Unmarshal(b, &nodes); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nodes, nil
}

// createNICDemo creates the NIC demo's namespace and Service "web".
func createNICDemo(ctx context.Context, cs kubernetes.Interface) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DemoNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	web := demoService("web", 80, v1.ServiceExternalTrafficPolicyCluster)
	if _, err := cs.CoreV1().Services(DemoNamespace).Create(ctx, web, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service web: %w", err)
	}
	return nil
}

// waitNICMembers waits until the cluster pool holds n ip configurations.
func waitNICMembers(ctx context.Context, env *devenv.Env, n int) error {
	c, err := env.Clients(ctx, azure.ClientOptions{Source: "azlb-sandbox"})
	if err != nil {
		return err
	}
	defer c.Close()
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.BackendPool.Get(ctx, env.Config.ResourceGroup, "kubernetes", "kubernetes")
		if err != nil {
			return false, nil
		}
		return p.Properties != nil && len(p.Properties.BackendIPConfigurations) == n, nil
	})
}
