package localcluster

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/devenv"
)

// What azlb and its emulator need from a cluster: the emulator's data
// plane serves the cluster's frontends in the load balancer's namespace,
// the virtual network's subnet is the nodes' network, and every node has
// a VM (of its name, with its address) for azlb's node controllers.

// EmulatorArgs are the azlb-emulator flags that serve the cluster's
// network: public IPs from Plan.Public, served in the load balancer's
// namespace with the nodes' and pods' networks, probes from
// 168.63.129.16, and the host's client address counted as the Internet.
func (c *Cluster) EmulatorArgs() []string {
	p := c.Plan
	return []string{
		"--data-plane",
		"--data-plane-netns", c.LBNetNS,
		"--data-plane-prefixes", p.Public.String() + "," + p.NodeNet.String() + "," + p.PodNet.String(),
		"--data-plane-probe-source", ProbeSource.String(),
		"--public-ipv4-cidr", p.Public.String(),
		"--internet-prefixes", p.ClientNet.String(),
	}
}

// Network is the emulated virtual network: its subnet is the nodes'
// network (IPv4 only).
func (c *Cluster) Network() devenv.Network {
	return devenv.Network{VnetPrefixes: []string{c.Plan.NodeNet.String()}, SubnetPrefixes: []string{c.Plan.NodeNet.String()}}
}

// CreateVMs creates each node's VM in the emulator: the node's name, a NIC
// in the subnet holding the node's address.
func (c *Cluster) CreateVMs(ctx context.Context, env *devenv.Env) error {
	comp, err := env.Compute(ctx)
	if err != nil {
		return err
	}
	defer comp.Close()
	for _, n := range c.Plan.Nodes {
		if _, err := comp.CreateVMAt(ctx, n.Name, "", n.IP.String()); err != nil {
			return err
		}
	}
	return nil
}

// WaitInitialized waits until the cloud controller manager has
// initialized every node (the uninitialized taint gone, a provider ID
// set) and every node is Ready.
func (c *Cluster) WaitInitialized(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		done := 0
		last = ""
		for _, n := range nodes.Items {
			tainted := false
			for _, t := range n.Spec.Taints {
				if t.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
					tainted = true
				}
			}
			ready := false
			for _, cond := range n.Status.Conditions {
				if cond.Type == v1.NodeReady && cond.Status == v1.ConditionTrue {
					ready = true
				}
			}
			if !tainted && ready && n.Spec.ProviderID != "" {
				done++
			} else {
				last += fmt.Sprintf("%s (uninitialized %v, Ready %v, providerID %q) ", n.Name, tainted, ready, n.Spec.ProviderID)
			}
		}
		return done == len(c.Plan.Nodes), nil
	})
	if err != nil {
		return fmt.Errorf("nodes not initialized after %v: %s", timeout, last)
	}
	return nil
}
