package main

import (
	"context"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// labelKeeper keeps an initialized node's instance-type, zone and region
// labels (stable and beta keys) equal to its instance metadata: the
// framework's node controller sets them only when it initializes the node,
// and a VM resized (deallocate, resize, start) keeps its node.
type labelKeeper struct {
	cs        kubernetes.Interface
	nodes     corelisters.NodeLister
	nodeName  string
	instances cloudprovider.InstancesV2
	clock     clock.WithTicker
	every     time.Duration
}

// run checks the labels every k.every until ctx ends.
func (k *labelKeeper) run(ctx context.Context) {
	t := k.clock.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := k.sync(ctx); err != nil {
				klog.ErrorS(err, "Keeping the node's labels", "node", k.nodeName)
			}
		}
	}
}

// sync patches the labels that differ from instance metadata.
func (k *labelKeeper) sync(ctx context.Context) error {
	node, err := k.nodes.Get(k.nodeName)
	if err != nil {
		return err
	}
	if node.Spec.ProviderID == "" || hasCloudTaint(node) {
		return nil // the node controller has not initialized it yet
	}
	md, err := k.instances.InstanceMetadata(ctx, node)
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, l := range []struct{ stable, beta, value string }{
		{v1.LabelInstanceTypeStable, v1.LabelInstanceType, md.InstanceType},
		{v1.LabelTopologyZone, v1.LabelFailureDomainBetaZone, md.Zone},
		{v1.LabelTopologyRegion, v1.LabelFailureDomainBetaRegion, md.Region},
	} {
		if l.value == "" {
			continue
		}
		if node.Labels[l.stable] != l.value {
			want[l.stable] = l.value
		}
		if _, ok := node.Labels[l.beta]; ok && node.Labels[l.beta] != l.value {
			want[l.beta] = l.value
		}
	}
	if len(want) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want}})
	if err != nil {
		return err
	}
	if _, err := k.cs.CoreV1().Nodes().Patch(ctx, k.nodeName, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	klog.InfoS("Updated the node's labels from instance metadata", "node", klog.KObj(node), "labels", want)
	return nil
}

func hasCloudTaint(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}
