package devenv

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

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
	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/names"
	"github.com/azlb/azlb/internal/securitygroup"
)

// A resource group as the Azure cloud provider (cloud-provider-azure, the
// controller azlb replaces) leaves it, for the takeover tests: the layout
// comes from the facts gathered about that provider
// (../shared/design/notes/azure-facts-wave3.md §5 and §6) and the ARM
// recordings, not from its code.
//
//   - one Standard public load balancer <cluster> and one internal
//     <cluster>-internal, each with the IP-based pool <cluster> of every
//     node (entries named after the nodes);
//   - per Service a frontend a<uid> (internal with the internal-subnet
//     annotation: a<uid>-<subnet>), per port a rule and a TCP probe on the
//     node port, both <frontend>-<TCP|UDP>-<port>, floating IP and TCP
//     reset on; Services sharing an IP put their rules on the frontend of
//     the first;
//   - per public Service a Standard static zone-redundant public IP
//     <cluster>-a<uid> tagged k8s-azure-service=<ns>/<name> and
//     k8s-azure-cluster-name=<cluster>; a shared one named by
//     azure-pip-name, tagged with every sharer, comma-separated;
//   - the NSG's allow rules k8s-azure-lb_allow_IPv4_<md5>, one per
//     (protocol, sources, ports), priorities from 500, destinations the
//     frontend addresses; an internal Service without source ranges has
//     none (it relies on AllowVnetInBound);
//   - the Services in Kubernetes with the ingress IPs in their status.

// TakeoverService is one LoadBalancer Service of that cluster.
type TakeoverService struct {
	Name     string
	Port     int32
	Protocol v1.Protocol // default TCP
	Internal bool
	// Subnet, for an internal Service, is its
	// azure-load-balancer-internal-subnet annotation (the frontend is then
	// a<uid>-<subnet>); it must be the environment's subnet.
	Subnet string
	// SharedIP names a public IP several Services share (azure-pip-name).
	SharedIP string
	// SourceRanges is spec.loadBalancerSourceRanges.
	SourceRanges []string
}

// TakeoverOptions shape SeedCloudProviderCluster.
type TakeoverOptions struct {
	Cluster   string // default "kubernetes"
	Namespace string // default "default"
	// Nodes are the cluster's nodes, registered by the caller: name ->
	// InternalIP.
	Nodes    map[string]string
	Services []TakeoverService
	// NodePortBase, when set, gives the i-th Service the node port
	// NodePortBase+i (a fake clientset allocates none).
	NodePortBase int32
}

// TakeoverCluster is what SeedCloudProviderCluster made.
type TakeoverCluster struct {
	// Services are the Services as created, by name.
	Services map[string]*v1.Service
	// IPs is the ingress IP of each Service, by name.
	IPs map[string]string
}

// SeedCloudProviderCluster makes the emulator and the cluster look like
// one the Azure cloud provider ran (see above). Nothing of azlb runs
// meanwhile.
func (e *Env) SeedCloudProviderCluster(ctx context.Context, cs kubernetes.Interface, o TakeoverOptions) (*TakeoverCluster, error) {
	if o.Cluster == "" {
		o.Cluster = "kubernetes"
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	clients, err := e.Clients(ctx, azure.ClientOptions{Source: "devenv-takeover"})
	if err != nil {
		return nil, err
	}
	defer clients.Close()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	out := &TakeoverCluster{Services: map[string]*v1.Service{}, IPs: map[string]string{}}
	subnetID := names.SubnetID(names.VirtualNetworkID(SubscriptionID, ResourceGroup, VnetName), SubnetName)
	public := takeoverLB(o.Cluster, o.Nodes)
	internal := takeoverLB(names.InternalLB(o.Cluster), o.Nodes)
	sharedFE := map[string]string{} // shared public IP name -> frontend name
	sharers := map[string][]string{}
	for _, s := range o.Services {
		if s.SharedIP != "" {
			sharers[s.SharedIP] = append(sharers[s.SharedIP], o.Namespace+"/"+s.Name)
		}
	}
	pipIDs := map[string]string{} // public IP name -> id
	for i, s := range o.Services {
		var nodePort int32
		if o.NodePortBase != 0 {
			nodePort = o.NodePortBase + int32(i)
		}
		svc, err := createTakeoverService(ctx, cs, o.Namespace, s, nodePort)
		if err != nil {
			return nil, err
		}
		out.Services[s.Name] = svc
		lb, lbName := public, o.Cluster
		feName := names.FrontendBase(svc)
		fe := &armnetwork.FrontendIPConfigurationPropertiesFormat{}
		if s.Internal {
			lb, lbName = internal, names.InternalLB(o.Cluster)
			if s.Subnet != "" {
				feName += "-" + s.Subnet
			}
			fe.Subnet = &armnetwork.Subnet{ID: to.Ptr(subnetID)}
			fe.PrivateIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodDynamic)
			fe.PrivateIPAddressVersion = to.Ptr(armnetwork.IPVersionIPv4)
		} else {
			pipName, tag := names.PublicIP(o.Cluster, svc, v1.IPv4Protocol), names.ServiceKey(svc)
			if s.SharedIP != "" {
				pipName, tag = s.SharedIP, strings.Join(sharers[s.SharedIP], ",")
			}
			if pipIDs[pipName] == "" {
				pip, err := createTakeoverPIP(ctx, clients, pipName, tag, o.Cluster)
				if err != nil {
					return nil, err
				}
				pipIDs[pipName] = ptr.Deref(pip.ID, "")
				out.IPs[s.Name] = ptr.Deref(pip.Properties.IPAddress, "")
			}
			fe.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(pipIDs[pipName])}
			if s.SharedIP != "" {
				if first := sharedFE[s.SharedIP]; first != "" {
					fe, feName = nil, first // the rules go on the first sharer's frontend
				} else {
					sharedFE[s.SharedIP] = feName
				}
			}
		}
		if fe != nil {
			lb.Properties.FrontendIPConfigurations = append(lb.Properties.FrontendIPConfigurations, &armnetwork.FrontendIPConfiguration{Name: to.Ptr(feName), Properties: fe})
		}
		addTakeoverRules(lb, lbName, o.Cluster, names.FrontendBase(svc), feName, svc)
	}
	if err := createTakeoverLBs(ctx, clients, o, out, public, internal); err != nil {
		return nil, err
	}
	for _, s := range o.Services {
		if s.SharedIP != "" {
			out.IPs[s.Name] = out.IPs[strings.TrimPrefix(sharers[s.SharedIP][0], o.Namespace+"/")]
		}
	}
	if err := seedTakeoverRules(ctx, clients, o, out); err != nil {
		return nil, err
	}
	for name, svc := range out.Services {
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: out.IPs[name]}}
		if _, err := cs.CoreV1().Services(o.Namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("write the status of service %s: %w", name, err)
		}
	}
	return out, nil
}

// createTakeoverPIP creates a public IP as that provider does: Standard,
// static, zone-redundant, tagged with its Services and the cluster.
func createTakeoverPIP(ctx context.Context, clients *azure.Clients, name, services, cluster string) (*armnetwork.PublicIPAddress, error) {
	pip, err := clients.PublicIP.CreateOrUpdate(ctx, ResourceGroup, name, armnetwork.PublicIPAddress{
		Location: to.Ptr(Location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard), Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)},
		Zones:    []*string{to.Ptr("1"), to.Ptr("2"), to.Ptr("3")},
		Tags:     map[string]*string{names.TagServiceName: to.Ptr(services), names.TagClusterName: to.Ptr(cluster)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
		},
	}, "")
	if err != nil {
		return nil, fmt.Errorf("create public IP %s: %w", name, err)
	}
	return pip, nil
}

// createTakeoverLBs writes the load balancers that have frontends and
// records the internal Services' addresses.
func createTakeoverLBs(ctx context.Context, clients *azure.Clients, o TakeoverOptions, out *TakeoverCluster, lbs ...*armnetwork.LoadBalancer) error {
	for _, lb := range lbs {
		if len(lb.Properties.FrontendIPConfigurations) == 0 {
			continue
		}
		got, err := clients.LoadBalancer.CreateOrUpdate(ctx, ResourceGroup, *lb.Name, *lb, "")
		if err != nil {
			return fmt.Errorf("create load balancer %s: %w", *lb.Name, err)
		}
		for _, s := range o.Services {
			if !s.Internal || *lb.Name != names.InternalLB(o.Cluster) {
				continue
			}
			base := names.FrontendBase(out.Services[s.Name])
			for _, f := range got.Properties.FrontendIPConfigurations {
				if names.Owns(base, ptr.Deref(f.Name, "")) {
					out.IPs[s.Name] = ptr.Deref(f.Properties.PrivateIPAddress, "")
				}
			}
		}
	}
	return nil
}

func createTakeoverService(ctx context.Context, cs kubernetes.Interface, ns string, s TakeoverService, nodePort int32) (*v1.Service, error) {
	proto := s.Protocol
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns, Annotations: map[string]string{}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": s.Name}, LoadBalancerSourceRanges: s.SourceRanges,
			Ports: []v1.ServicePort{{Name: "p", Port: s.Port, TargetPort: intstr.FromInt32(s.Port), Protocol: proto, NodePort: nodePort}}},
	}
	if nodePort != 0 {
		svc.UID = uuid.NewUUID() // the API server assigns its own; a fake clientset keeps this one
	}
	if s.Internal {
		svc.Annotations[annotations.KeyInternal] = "true"
		if s.Subnet != "" {
			svc.Annotations[annotations.KeyInternalSubnet] = s.Subnet
		}
	}
	if s.SharedIP != "" {
		svc.Annotations[annotations.KeyPIPName] = s.SharedIP
	}
	created, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create service %s: %w", s.Name, err)
	}
	return created, nil
}

func takeoverLB(name string, nodes map[string]string) *armnetwork.LoadBalancer {
	vnet := names.VirtualNetworkID(SubscriptionID, ResourceGroup, VnetName)
	pool := &armnetwork.BackendAddressPool{Name: to.Ptr(strings.TrimSuffix(name, names.InternalLBSuffix)), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	nodeNames := make([]string, 0, len(nodes))
	for n := range nodes {
		nodeNames = append(nodeNames, n)
	}
	sort.Strings(nodeNames)
	for _, n := range nodeNames {
		pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(n),
			Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{
				IPAddress: to.Ptr(nodes[n]), VirtualNetwork: &armnetwork.SubResource{ID: to.Ptr(vnet)},
			},
		})
	}
	return &armnetwork.LoadBalancer{
		Name:     to.Ptr(name),
		Location: to.Ptr(Location),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard), Tier: to.Ptr(armnetwork.LoadBalancerSKUTierRegional)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{pool},
		},
	}
}

// addTakeoverRules adds a Service's rules and probes (named after base) on
// the frontend feName.
func addTakeoverRules(lb *armnetwork.LoadBalancer, lbName, cluster, base, feName string, svc *v1.Service) {
	ref := names.LoadBalancerRef{Subscription: SubscriptionID, ResourceGroup: ResourceGroup, Name: lbName}
	for _, sp := range svc.Spec.Ports {
		name := base + "-" + string(sp.Protocol) + "-" + fmt.Sprint(sp.Port)
		proto := armnetwork.TransportProtocolTCP
		if sp.Protocol == v1.ProtocolUDP {
			proto = armnetwork.TransportProtocolUDP // no per-port probe: there is no UDP probe
		} else {
			lb.Properties.Probes = append(lb.Properties.Probes, &armnetwork.Probe{Name: to.Ptr(name), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr(sp.NodePort),
				IntervalInSeconds: to.Ptr[int32](5), NumberOfProbes: to.Ptr[int32](2), ProbeThreshold: to.Ptr[int32](2),
			}})
		}
		props := &armnetwork.LoadBalancingRulePropertiesFormat{
			Protocol: to.Ptr(proto), FrontendPort: to.Ptr(sp.Port), BackendPort: to.Ptr(sp.Port),
			FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(ref.Child("frontendIPConfigurations", feName))},
			BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(ref.Child("backendAddressPools", cluster))},
			EnableFloatingIP:        to.Ptr(true),
			LoadDistribution:        to.Ptr(armnetwork.LoadDistributionDefault),
			DisableOutboundSnat:     to.Ptr(false),
		}
		if proto == armnetwork.TransportProtocolTCP {
			props.EnableTCPReset, props.IdleTimeoutInMinutes = to.Ptr(true), to.Ptr[int32](4)
			props.Probe = &armnetwork.SubResource{ID: to.Ptr(ref.Child("probes", name))}
		}
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{Name: to.Ptr(name), Properties: props})
	}
}

// seedTakeoverRules writes the NSG's allow rules as that provider lays
// them out.
func seedTakeoverRules(ctx context.Context, clients *azure.Clients, o TakeoverOptions, c *TakeoverCluster) error {
	type key struct{ proto, src, port string }
	dsts := map[key][]string{}
	for _, s := range o.Services {
		svc := c.Services[s.Name]
		srcs := s.SourceRanges
		if len(srcs) == 0 {
			if s.Internal {
				continue
			}
			srcs = []string{"Internet"}
		}
		for _, sp := range svc.Spec.Ports {
			proto := "Tcp"
			if sp.Protocol == v1.ProtocolUDP {
				proto = "Udp"
			}
			k := key{proto, strings.Join(srcs, ","), fmt.Sprint(sp.Port)}
			if !slices.Contains(dsts[k], c.IPs[s.Name]) {
				dsts[k] = append(dsts[k], c.IPs[s.Name])
			}
		}
	}
	keys := make([]key, 0, len(dsts))
	for k := range dsts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return securitygroup.AllowRuleName(securitygroup.IPv4, keys[i].proto, strings.Split(keys[i].src, ","), []string{keys[i].port}) <
			securitygroup.AllowRuleName(securitygroup.IPv4, keys[j].proto, strings.Split(keys[j].src, ","), []string{keys[j].port})
	})
	sg, err := clients.SecurityGroup.Get(ctx, ResourceGroup, SecurityGroupName)
	if err != nil {
		return err
	}
	for i, k := range keys {
		srcs := strings.Split(k.src, ",")
		d := dsts[k]
		sort.Strings(d)
		props := &armnetwork.SecurityRulePropertiesFormat{
			Protocol: to.Ptr(armnetwork.SecurityRuleProtocol(k.proto)), Access: to.Ptr(armnetwork.SecurityRuleAccessAllow),
			Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), Priority: to.Ptr(int32(500 + i)),
			SourcePortRange: to.Ptr("*"), DestinationPortRanges: []*string{to.Ptr(k.port)},
		}
		if len(srcs) == 1 {
			props.SourceAddressPrefix = to.Ptr(srcs[0])
		} else {
			props.SourceAddressPrefixes = to.SliceOfPtrs(srcs...)
		}
		if len(d) == 1 {
			props.DestinationAddressPrefix = to.Ptr(d[0])
		} else {
			props.DestinationAddressPrefixes = to.SliceOfPtrs(d...)
		}
		sg.Properties.SecurityRules = append(sg.Properties.SecurityRules, &armnetwork.SecurityRule{
			Name: to.Ptr(securitygroup.AllowRuleName(securitygroup.IPv4, k.proto, srcs, []string{k.port})), Properties: props,
		})
	}
	if _, err := clients.SecurityGroup.CreateOrUpdate(ctx, ResourceGroup, SecurityGroupName, *sg, ptr.Deref(sg.Etag, "")); err != nil {
		return fmt.Errorf("write the security rules: %w", err)
	}
	return nil
}
