package imds

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// Instances answers InstancesV2 for one node, the one whose VM serves the
// metadata, and refuses every other: a node manager knows nothing of the
// other VMs.
type Instances struct {
	// NodeName is the node this process runs on.
	NodeName string
	Client   *Client
}

var _ cloudprovider.InstancesV2 = (*Instances)(nil)

func (i *Instances) own(node *v1.Node) error {
	if node == nil || node.Name != i.NodeName {
		name := "<nil>"
		if node != nil {
			name = node.Name
		}
		return fmt.Errorf("instance metadata answers only for node %s, not %s", i.NodeName, name)
	}
	return nil
}

// InstanceExists is true for the own node: its VM runs this process.
func (i *Instances) InstanceExists(_ context.Context, node *v1.Node) (bool, error) {
	if err := i.own(node); err != nil {
		return false, err
	}
	return true, nil
}

// InstanceShutdown is false for the own node: its VM runs this process.
func (i *Instances) InstanceShutdown(_ context.Context, node *v1.Node) (bool, error) {
	if err := i.own(node); err != nil {
		return false, err
	}
	return false, nil
}

// InstanceMetadata reads the VM's metadata from IMDS.
func (i *Instances) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	if err := i.own(node); err != nil {
		return nil, err
	}
	inst, err := i.Client.Instance(ctx)
	if err != nil {
		return nil, err
	}
	md, err := inst.NodeMetadata()
	if err != nil {
		return nil, err
	}
	klog.V(4).InfoS("Instance metadata", "node", klog.KObj(node), "providerID", md.ProviderID,
		"instanceType", md.InstanceType, "zone", md.Zone, "region", md.Region, "addresses", md.NodeAddresses)
	return md, nil
}

// Cloud is a cloudprovider.Interface that offers only InstancesV2 backed
// by instance metadata, for the framework's cloud node controller.
type Cloud struct {
	Node *Instances
}

var _ cloudprovider.Interface = (*Cloud)(nil)

// Initialize does nothing: IMDS needs no client.
func (*Cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// LoadBalancer is not offered.
func (*Cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return nil, false }

// Instances (v1) is not offered.
func (*Cloud) Instances() (cloudprovider.Instances, bool) { return nil, false }

// InstancesV2 answers for the own node.
func (c *Cloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return c.Node, true }

// Zones is not offered (InstancesV2 carries the zone).
func (*Cloud) Zones() (cloudprovider.Zones, bool) { return nil, false }

// Clusters is not offered.
func (*Cloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }

// Routes is not offered.
func (*Cloud) Routes() (cloudprovider.Routes, bool) { return nil, false }

// ProviderName is "azure", as the providerIDs say.
func (*Cloud) ProviderName() string { return "azure" }

// HasClusterID is true: the node manager needs no cluster ID.
func (*Cloud) HasClusterID() bool { return true }
