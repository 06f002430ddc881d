package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/config"
	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/nodeagent"
)

// basicServices are the Basic demo's Services: a public one whose Basic
// public IP is Dynamic (the old default), one with a Static one, an
// internal one, and one on a public IP the user made (azure-pip-name).
var basicServices = []devenv.BasicService{
	{Name: "web", Port: 80, Dynamic: true},
	{Name: "api", Port: 8080},
	{Name: "ilb", Port: 443, Internal: true},
	{Name: "byo", Port: 8443, UserPIP: "my-public-ip"},
}

func basicServiceNames() []string {
	out := make([]string, 0, len(basicServices))
	for _, s := range basicServices {
		out = append(out, s.Name)
	}
	return out
}

// BasicScaleSet is the Basic demo's scale set (its VMs are the nodes).
const BasicScaleSet = "aks-basic"

// BasicAzureJSON is the Basic demo's azure.json: the file of a cluster an
// earlier cloud provider ran with Basic load balancers (loadBalancerSku
// basic, NIC-based pools).
func BasicAzureJSON(url, caFile string) []byte {
	var m map[string]any
	_ = json.Unmarshal(devenv.ConfigJSON(url, caFile), &m) // ConfigJSON is always a JSON object
	m["loadBalancerSku"] = config.LoadBalancerSKUBasic
	m["loadBalancerBackendPoolConfigurationType"] = config.BackendPoolNodeIPConfiguration
	b, _ := json.MarshalIndent(m, "", "  ") // maps of JSON values always marshal
	return append(b, '\n')
}

// seedBasic seeds the Basic cluster (devenv.SeedBasicCluster) and returns
// its nodes for the simulated kubelets.
func seedBasic(ctx context.Context, env *devenv.Env, cs kubernetes.Interface, step func(string, ...any)) ([]nodeagent.Node, error) {
	bc, err := env.SeedBasicCluster(ctx, cs, devenv.BasicOptions{ScaleSet: BasicScaleSet, Nodes: 3, Namespace: DemoNamespace, Services: basicServices})
	if err != nil {
		return nil, err
	}
	step("seeded a Basic cluster as an earlier cloud provider left it: Basic load balancers kubernetes and kubernetes-internal, "+
		"scale set %s (%d VMs) in their NIC-based pools, Basic public IPs (web's Dynamic), Services %s with their IPs %v",
		BasicScaleSet, len(bc.Nodes), strings.Join(basicServiceNames(), ", "), bc.IPs)
	out := make([]nodeagent.Node, 0, len(bc.Nodes))
	for _, vm := range bc.Nodes {
		out = append(out, nodeagent.Node{Name: vm.Name, ProviderID: vm.ProviderID, IPs: vm.IPs, Labels: map[string]string{"kubernetes.azure.com/agentpool": "basic"}})
	}
	return out, nil
}

// waitRefusal waits for the controller to refuse loadBalancerSku basic and
// returns its explanation from the log.
func waitRefusal(ctx context.Context, dir, logPath string) (string, error) {
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return false, nil
		}
		for _, line := range strings.Split(string(b), "\n") {
			if i := strings.Index(line, "loadBalancerSku: "); i >= 0 && strings.Contains(line, "retired") {
				msg = line[i:]
			}
		}
		return msg != "" && !running(dir, "azlb-controller-manager.pid"), nil
	})
	if err != nil {
		return "", fmt.Errorf("the controller did not refuse loadBalancerSku basic (see %s): %w", logPath, err)
	}
	return msg, nil
}
