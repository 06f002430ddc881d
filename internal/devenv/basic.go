package devenv

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/annotations"
	"github.com/azlb/azlb/internal/names"
)

// BasicService is one LoadBalancer Service of a Basic cluster, as an
// earlier cloud provider set it up.
type BasicService struct {
	Name string
	Port int32
	// Internal Services sit on the internal Basic load balancer
	// (<cluster>-internal) with a Dynamic private IP, as that provider
	// gave them.
	Internal bool
	// Dynamic: the Service's public IP is Basic Dynamic (that provider's
	// default); otherwise Basic Static.
	Dynamic bool
	// UserPIP names a public IP the user made (Basic Static, without
	// azlb's tags) that the Service asks for with the azure-pip-name
	// annotation, or with spec.loadBalancerIP when ByAddress is set.
	UserPIP   string
	ByAddress bool
}

// BasicOptions shape SeedBasicCluster.
type BasicOptions struct {
	// Cluster is clusterName: the load balancers are <Cluster> and
	// <Cluster>-internal, the pool <Cluster>. Default "kubernetes".
	Cluster string
	// ScaleSet is the nodes' scale set (created with Nodes VMs, Prefix
	// their computer name prefix). Default "aks-basic", 3, "aks-basic-".
	ScaleSet string
	Nodes    int
	Prefix   string
	// Namespace holds the Services (created if missing).
	Namespace string
	Services  []BasicService
}

// BasicCluster is what SeedBasicCluster made.
type BasicCluster struct {
	// Nodes are the scale set's VMs (register them as nodes).
	Nodes []NodeVM
	// IPs is the ingress IP of each Service, by name, as written to its
	// status.
	IPs map[string]string
	// PublicIPs is the public IP name of each external Service, by name.
	PublicIPs map[string]string
}

// SeedBasicCluster makes the emulator and the cluster look like one an
// earlier cloud provider ran with loadBalancerSku basic: a scale set whose
// model and VMs are members of the NIC-based pools of a Basic public load
// balancer and a Basic internal one; a Basic public IP per external
// Service (Dynamic or Static, tagged as owned by the cluster, or the
// user's own); the Services in Kubernetes with the ingress IPs that
// provider wrote to their status. Nothing of azlb runs meanwhile.
func (e *Env) SeedBasicCluster(ctx context.Context, cs kubernetes.Interface, o BasicOptions) (*BasicCluster, error) {
	o = basicDefaults(o)
	svcs, err := createBasicServices(ctx, cs, o)
	if err != nil {
		return nil, err
	}
	c, err := e.Compute(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cred, opts := c.clients.Credential(), c.clients.ARMClientOptions("devenv-basic")
	lbs, err := armnetwork.NewLoadBalancersClient(SubscriptionID, cred, opts)
	if err != nil {
		return nil, err
	}
	pips, err := armnetwork.NewPublicIPAddressesClient(SubscriptionID, cred, opts)
	if err != nil {
		return nil, err
	}
	out := &BasicCluster{IPs: map[string]string{}, PublicIPs: map[string]string{}}
	public := basicLB(o.Cluster)
	internal := basicLB(names.InternalLB(o.Cluster))
	for i, s := range o.Services {
		svc := svcs[i]
		if s.Internal {
			addBasicFrontend(internal, names.InternalLB(o.Cluster), o.Cluster, svc, &armnetwork.FrontendIPConfigurationPropertiesFormat{
				Subnet:                    &armnetwork.Subnet{ID: to.Ptr(c.subnetID())},
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
			})
			continue
		}
		name, pip, err := createBasicPIP(ctx, pips, o.Cluster, s, svc)
		if err != nil {
			return nil, err
		}
		out.PublicIPs[s.Name] = name
		if s.ByAddress {
			// The user asked for the address of their public IP.
			svc.Spec.LoadBalancerIP = ptr.Deref(pip.Properties.IPAddress, "")
			if svc, err = cs.CoreV1().Services(o.Namespace).Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
				return nil, fmt.Errorf("set loadBalancerIP of service %s: %w", s.Name, err)
			}
			svcs[i] = svc
		}
		addBasicFrontend(public, o.Cluster, o.Cluster, svc, &armnetwork.FrontendIPConfigurationPropertiesFormat{
			PublicIPAddress: &armnetwork.PublicIPAddress{ID: pip.ID},
		})
	}
	written := map[string]*armnetwork.LoadBalancer{}
	var pools []string
	for _, lb := range []*armnetwork.LoadBalancer{public, internal} {
		if len(lb.Properties.FrontendIPConfigurations) == 0 {
			continue
		}
		p, err := lbs.BeginCreateOrUpdate(ctx, ResourceGroup, *lb.Name, *lb, nil)
		if err != nil {
			return nil, fmt.Errorf("create Basic load balancer %s: %w", *lb.Name, err)
		}
		res, err := p.PollUntilDone(ctx, &PollOptions)
		if err != nil {
			return nil, fmt.Errorf("create Basic load balancer %s: %w", *lb.Name, err)
		}
		written[*lb.Name] = &res.LoadBalancer
		pools = append(pools, ptr.Deref(res.Properties.BackendAddressPools[0].ID, ""))
	}
	// The nodes: the scale set's model (and so its VMs) in the Basic
	// pools, as the Basic-era provider put them.
	if out.Nodes, err = c.CreateScaleSet(ctx, o.ScaleSet, o.Nodes, ScaleSetOptions{Prefix: o.Prefix, Pools: pools}); err != nil {
		return nil, err
	}
	if err := writeBasicStatus(ctx, cs, pips, o, svcs, written, out); err != nil {
		return nil, err
	}
	return out, nil
}

func basicDefaults(o BasicOptions) BasicOptions {
	if o.Cluster == "" {
		o.Cluster = "kubernetes"
	}
	if o.ScaleSet == "" {
		o.ScaleSet = "aks-basic"
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Prefix == "" {
		o.Prefix = o.ScaleSet + "-"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	return o
}

// createBasicServices creates the namespace and the Services (their UIDs
// name the Azure objects).
func createBasicServices(ctx context.Context, cs kubernetes.Interface, o BasicOptions) ([]*v1.Service, error) {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	out := make([]*v1.Service, 0, len(o.Services))
	for _, s := range o.Services {
		svc := &v1.Service{
			// The API server assigns its own UID; a fake clientset keeps
			// this one.
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: o.Namespace, UID: uuid.NewUUID(), Annotations: map[string]string{}},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": s.Name},
				Ports: []v1.ServicePort{{Name: "p", Port: s.Port, TargetPort: intstr.FromInt32(s.Port), Protocol: v1.ProtocolTCP}}},
		}
		if s.Internal {
			svc.Annotations[annotations.KeyInternal] = "true"
		}
		if s.UserPIP != "" && !s.ByAddress {
			svc.Annotations[annotations.KeyPIPName] = s.UserPIP
		}
		created, err := cs.CoreV1().Services(o.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create service %s: %w", s.Name, err)
		}
		out = append(out, created)
	}
	return out, nil
}

// createBasicPIP creates the Service's Basic public IP: the user's own, or
// one named and tagged as the cluster's.
func createBasicPIP(ctx context.Context, pips *armnetwork.PublicIPAddressesClient, cluster string, s BasicService, svc *v1.Service) (string, *armnetwork.PublicIPAddress, error) {
	name := s.UserPIP
	pip := armnetwork.PublicIPAddress{
		Location: to.Ptr(Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameBasic), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
	}
	if name == "" {
		name = names.PublicIP(cluster, svc, v1.IPv4Protocol)
		pip.Tags = map[string]*string{names.TagServiceName: to.Ptr(names.ServiceKey(svc)), names.TagClusterName: to.Ptr(cluster)}
		if s.Dynamic {
			pip.Properties.PublicIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodDynamic)
		}
	}
	p, err := pips.BeginCreateOrUpdate(ctx, ResourceGroup, name, pip, nil)
	if err != nil {
		return "", nil, fmt.Errorf("create Basic public IP %s: %w", name, err)
	}
	res, err := p.PollUntilDone(ctx, &PollOptions)
	if err != nil {
		return "", nil, fmt.Errorf("create Basic public IP %s: %w", name, err)
	}
	return name, &res.PublicIPAddress, nil
}

func basicLB(name string) *armnetwork.LoadBalancer {
	return &armnetwork.LoadBalancer{
		Name: to.Ptr(name), Location: to.Ptr(Location),
		SKU: &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameBasic), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{},
		},
	}
}

// addBasicFrontend gives the Service a frontend, a probe and a rule per
// port on the load balancer, with the names azlb uses too.
func addBasicFrontend(lb *armnetwork.LoadBalancer, lbName, cluster string, svc *v1.Service, fe *armnetwork.FrontendIPConfigurationPropertiesFormat) {
	ref := names.LoadBalancerRef{Subscription: SubscriptionID, ResourceGroup: ResourceGroup, Name: lbName}
	p := lb.Properties
	if len(p.BackendAddressPools) == 0 {
		p.BackendAddressPools = append(p.BackendAddressPools, &armnetwork.BackendAddressPool{Name: to.Ptr(cluster)})
	}
	feName := names.Frontend(svc, v1.IPv4Protocol)
	p.FrontendIPConfigurations = append(p.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{Name: to.Ptr(feName), Properties: fe})
	for _, port := range svc.Spec.Ports {
		// Floating IP (the backend port is the Service port), a TCP probe
		// of the node port: the upstream provider's defaults.
		rule := names.Rule(svc, port.Protocol, port.Port, v1.IPv4Protocol)
		probePort := port.NodePort
		if probePort == 0 {
			probePort = port.Port
		}
		p.Probes = append(p.Probes, &armnetwork.Probe{Name: to.Ptr(rule), Properties: &armnetwork.ProbePropertiesFormat{
			Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr(probePort), IntervalInSeconds: to.Ptr[int32](5), NumberOfProbes: to.Ptr[int32](2)}})
		p.LoadBalancingRules = append(p.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr(rule), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: to.Ptr(armnetwork.TransportProtocolTCP), FrontendPort: to.Ptr(port.Port), BackendPort: to.Ptr(port.Port), EnableFloatingIP: to.Ptr(true),
			FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(ref.Child("frontendIPConfigurations", feName))},
			BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(ref.Child("backendAddressPools", cluster))},
			Probe:                   &armnetwork.SubResource{ID: to.Ptr(ref.Child("probes", rule))},
		}})
	}
}

// writeBasicStatus reads each Service's address (a Dynamic public IP has
// one now that a frontend uses it) and writes it to the Service's status.
func writeBasicStatus(ctx context.Context, cs kubernetes.Interface, pips *armnetwork.PublicIPAddressesClient, o BasicOptions,
	svcs []*v1.Service, lbs map[string]*armnetwork.LoadBalancer, out *BasicCluster) error {
	for i, s := range o.Services {
		svc := svcs[i]
		var ip string
		if s.Internal {
			lb := lbs[names.InternalLB(o.Cluster)]
			for _, fe := range lb.Properties.FrontendIPConfigurations {
				if ptr.Deref(fe.Name, "") == names.Frontend(svc, v1.IPv4Protocol) {
					ip = ptr.Deref(fe.Properties.PrivateIPAddress, "")
				}
			}
		} else {
			pip, err := pips.Get(ctx, ResourceGroup, out.PublicIPs[s.Name], nil)
			if err != nil {
				return fmt.Errorf("read public IP of service %s: %w", s.Name, err)
			}
			ip = ptr.Deref(pip.Properties.IPAddress, "")
		}
		if ip == "" {
			return errors.New("service " + s.Name + ": the Basic load balancer gave it no address")
		}
		out.IPs[s.Name] = ip
		svc = svc.DeepCopy()
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
		if _, err := cs.CoreV1().Services(o.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("write status of service %s: %w", s.Name, err)
		}
	}
	return nil
}
