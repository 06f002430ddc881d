package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// DefaultInterval is how often an Agent looks at its VM.
const DefaultInterval = time.Second

// PowerSource tells a VM's power state ("running", "deallocated", ...) from
// its providerID; found false means the VM does not exist.
type PowerSource interface {
	PowerState(ctx context.Context, providerID string) (state string, found bool, err error)
}

// Node is the node an Agent simulates.
type Node struct {
	Name string
	// ProviderID names the node's VM (the Agent reads its power state; it
	// does not put it on the node: the cloud node controller does). Empty:
	// the node has no VM and is always running; the Agent then leaves the
	// Node object to whoever registered it and only runs its kube-proxy.
	ProviderID string
	// IPs are the node's addresses (InternalIP).
	IPs    []string
	Labels map[string]string
}

// Options are what every Agent shares.
type Options struct {
	Client kubernetes.Interface
	Power  PowerSource
	// Clock drives the loop (default: the real clock).
	Clock clock.WithTicker
	// Interval is the loop period (default DefaultInterval).
	Interval time.Duration
	// Services and EndpointSlices, when both are set, make every Agent the
	// node's kube-proxy too (see Proxy): the data plane's member on the
	// node's loopback address.
	Services       corelisters.ServiceLister
	EndpointSlices discoverylisters.EndpointSliceLister
}

// Agent simulates one node.
type Agent struct {
	node  Node
	o     Options
	ready *bool  // the Ready status last written
	proxy *Proxy // nil without Service and EndpointSlice listers
}

// New builds an Agent.
func New(node Node, o Options) (*Agent, error) {
	if node.Name == "" || o.Client == nil || (node.ProviderID != "" && o.Power == nil) {
		return nil, errors.New("nodeagent: node name and client are required, and a power source for a node with a providerID")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	a := &Agent{node: node, o: o}
	if o.Services != nil && o.EndpointSlices != nil {
		p, err := NewProxy(node.Name, node.IPs, o.Services, o.EndpointSlices, klog.Background())
		if err != nil {
			return nil, err
		}
		a.proxy = p
	}
	return a, nil
}

// Run registers the node and keeps its status until ctx ends. Errors of one
// step are logged and retried on the next tick.
func (a *Agent) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithValues("node", a.node.Name)
	ctx = klog.NewContext(ctx, log)
	t := a.o.Clock.NewTicker(a.o.Interval)
	defer t.Stop()
	if a.proxy != nil {
		defer a.proxy.Close()
	}
	for {
		if err := a.Step(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Simulated node step failed; retrying")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Step runs one round of every simulated component: the kubelet's
// registration and Ready condition, then the kube-proxy's ports (served
// only while the VM runs).
func (a *Agent) Step(ctx context.Context) error {
	running := true
	var kerr error
	if a.node.ProviderID != "" {
		state, found, err := a.o.Power.PowerState(ctx, a.node.ProviderID)
		if err != nil {
			return fmt.Errorf("power state of %s: %w", a.node.ProviderID, err)
		}
		running = found && state == "running"
		kerr = a.kubelet(ctx, state, found)
	}
	if a.proxy != nil {
		if err := a.proxy.Sync(running); err != nil {
			return errors.Join(kerr, err)
		}
	}
	return kerr
}

// kubelet registers the node (while its VM runs) and writes its Ready
// condition when it changes.
func (a *Agent) kubelet(ctx context.Context, power string, found bool) error {
	ready := found && power == "running"
	nodes := a.o.Client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := nodes.Get(ctx, a.node.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if !ready {
				return nil // a stopped or deleted VM registers nothing
			}
			_, err = nodes.Create(ctx, a.newNode(), metav1.CreateOptions{})
			if err == nil {
				a.ready = &ready
				klog.FromContext(ctx).Info("Registered simulated node")
			}
			return err
		}
		if err != nil {
			return err
		}
		if cur := readyCondition(n); cur != nil && (cur.Status == v1.ConditionTrue) == ready && a.ready != nil {
			return nil
		}
		setReady(n, ready, power, a.o.Clock.Now())
		if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		a.ready = &ready
		klog.FromContext(ctx).Info("Node Ready condition follows the VM", "ready", ready, "powerState", power)
		return nil
	})
}

func (a *Agent) newNode() *v1.Node {
	labels := map[string]string{v1.LabelHostname: a.node.Name, v1.LabelOSStable: "linux"}
	for k, v := range a.node.Labels {
		labels[k] = v
	}
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.node.Name, Labels: labels}}
	n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	for _, ip := range a.node.IPs {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: a.node.Name})
	setReady(n, true, "running", a.o.Clock.Now())
	return n
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// setReady writes the Ready condition as a kubelet reports it.
func setReady(n *v1.Node, ready bool, power string, now time.Time) {
	c := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	if !ready {
		c.Status, c.Reason = v1.ConditionFalse, "KubeletNotReady"
		c.Message = fmt.Sprintf("the node's VM is not running (power state %q)", power)
	}
	if cur := readyCondition(n); cur != nil {
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = c
		return
	}
	n.Status.Conditions = append(n.Status.Conditions, c)
}
