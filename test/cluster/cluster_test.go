package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// Annotations, as users write them.
const (
	annPrefix       = "service.beta.kubernetes.io/"
	annInternal     = annPrefix + "azure-load-balancer-internal"
	annIdleTimeout  = annPrefix + "azure-load-balancer-tcp-idle-timeout"
	annProbeProto   = annPrefix + "azure-load-balancer-health-probe-protocol"
	annProbePath    = annPrefix + "azure-load-balancer-health-probe-request-path"
	annPIPTags      = annPrefix + "azure-pip-tags"
	annPIPName      = annPrefix + "azure-pip-name"
	annIPv4         = annPrefix + "azure-load-balancer-ipv4"
	annPLSCreate    = annPrefix + "azure-pls-create"
	drainingTaint   = "cloudprovider.azure.microsoft.com/draining"
	serviceTagOwner = "k8s-azure-service"
)

// run is the suite's state: the target, its clients and the namespace.
type run struct {
	tg  *target
	arm *armClients
	cs  kubernetes.Interface
	ns  string
	id  string // names the run's Azure objects: azlb-e2e-<id>-*
}

// The scenarios, in one namespace of their own, deleted afterwards with
// everything azlb made for them.
func TestCluster(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tg, err := loadTarget(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster: %s; Azure: subscription %s, resource group %s (writes there: Services' load balancer rules, public IPs and security rules, through azlb, and one public IP azlb-e2e-*)", tg.kubeconfig, tg.sub, tg.rg)
	c, err := newARMClients(tg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	rc, err := clientcmd.BuildConfigFromFlags("", tg.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	r := &run{tg: tg, arm: c, cs: cs, id: hex.EncodeToString(b)}
	r.ns = "azlb-e2e-" + r.id
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns,
		Labels: map[string]string{"app.kubernetes.io/created-by": "azlb-e2e-cluster"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cleanUp(t) })

	t.Run("public with common annotations", r.publicAnnotated)
	t.Run("source ranges", r.sourceRanges)
	t.Run("shared IP", r.sharedIP)
	t.Run("user's public IP", r.usersPublicIP)
	t.Run("internal", r.internal)
	t.Run("UDP", r.udp)
	t.Run("Private Link", r.privateLink)
	t.Run("admin state taint", r.adminStateTaint)
	t.Run("verify", r.verify)
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// service creates a LoadBalancer Service (no selector: its endpoints do
// not matter to what azlb writes) and waits for its ingress address.
func (r *run) service(t *testing.T, name string, ann map[string]string, ports []v1.ServicePort, mutate func(*v1.Service)) (*v1.Service, netip.Addr) {
	t.Helper()
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Annotations: ann},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: ports}}
	if mutate != nil {
		mutate(svc)
	}
	ctx := context.Background()
	if _, err := r.cs.CoreV1().Services(r.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *v1.Service
	r.eventually(t, 3*time.Minute, "an ingress address for "+name, func(ctx context.Context) (bool, error) {
		var err error
		got, err = r.cs.CoreV1().Services(r.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && len(got.Status.LoadBalancer.Ingress) > 0 && got.Status.LoadBalancer.Ingress[0].IP != "", err
	})
	ip, err := netip.ParseAddr(got.Status.LoadBalancer.Ingress[0].IP)
	if err != nil {
		t.Fatalf("service %s: ingress %q: %v", name, got.Status.LoadBalancer.Ingress[0].IP, err)
	}
	return got, ip
}

func tcp(port int32) v1.ServicePort {
	return v1.ServicePort{Name: fmt.Sprintf("tcp-%d", port), Port: port, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}
}

// eventually polls cond until it holds, for at most d.
func (r *run) eventually(t *testing.T, d time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, d, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %v (last error: %v)", what, d, last)
	}
}

// frontendOf finds the load balancer frontend serving addr: the frontend
// whose private address it is, or whose public IP has it.
func (r *run) frontendOf(ctx context.Context, addr netip.Addr) (*armnetwork.LoadBalancer, *armnetwork.FrontendIPConfiguration, error) {
	lbs, err := r.arm.loadBalancers(ctx, r.tg.rg)
	if err != nil {
		return nil, nil, err
	}
	pipID := ""
	pips, err := r.arm.publicIPs(ctx, r.tg.rg)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pips {
		if p.Properties != nil && deref(p.Properties.IPAddress) == addr.String() {
			pipID = deref(p.ID)
		}
	}
	for _, lb := range lbs {
		if lb.Properties == nil {
			continue
		}
		for _, fe := range lb.Properties.FrontendIPConfigurations {
			p := fe.Properties
			if p == nil {
				continue
			}
			if deref(p.PrivateIPAddress) == addr.String() || (pipID != "" && p.PublicIPAddress != nil && sameID(deref(p.PublicIPAddress.ID), pipID)) {
				return lb, fe, nil
			}
		}
	}
	return nil, nil, fmt.Errorf("no load balancer frontend in %s serves %s", r.tg.rg, addr)
}

// rulesOn are the load balancing rules of lb on a frontend.
func rulesOn(lb *armnetwork.LoadBalancer, fe *armnetwork.FrontendIPConfiguration) []*armnetwork.LoadBalancingRule {
	var out []*armnetwork.LoadBalancingRule
	for _, rl := range lb.Properties.LoadBalancingRules {
		if rl.Properties != nil && rl.Properties.FrontendIPConfiguration != nil && sameID(deref(rl.Properties.FrontendIPConfiguration.ID), deref(fe.ID)) {
			out = append(out, rl)
		}
	}
	return out
}

// ruleFor is the rule of a frontend for a port and protocol.
func ruleFor(lb *armnetwork.LoadBalancer, fe *armnetwork.FrontendIPConfiguration, port int32, proto armnetwork.TransportProtocol) *armnetwork.LoadBalancingRule {
	for _, rl := range rulesOn(lb, fe) {
		if deref(rl.Properties.FrontendPort) == port && deref(rl.Properties.Protocol) == proto {
			return rl
		}
	}
	return nil
}

// waitRule waits for the frontend serving addr to have a rule for port.
func (r *run) waitRule(t *testing.T, addr netip.Addr, port int32, proto armnetwork.TransportProtocol) (*armnetwork.LoadBalancer, *armnetwork.FrontendIPConfiguration, *armnetwork.LoadBalancingRule) {
	t.Helper()
	var (
		lb *armnetwork.LoadBalancer
		fe *armnetwork.FrontendIPConfiguration
		rl *armnetwork.LoadBalancingRule
	)
	r.eventually(t, 2*time.Minute, fmt.Sprintf("a %s rule for %s:%d", proto, addr, port), func(ctx context.Context) (bool, error) {
		var err error
		if lb, fe, err = r.frontendOf(ctx, addr); err != nil {
			return false, err
		}
		rl = ruleFor(lb, fe, port, proto)
		return rl != nil, nil
	})
	return lb, fe, rl
}

// The common annotations: idle timeout, probe protocol and path, public IP
// tags: the rule, its probe and the owned public IP say what they ask.
func (r *run) publicAnnotated(t *testing.T) {
	_, ip := r.service(t, "web", map[string]string{annIdleTimeout: "10", annProbeProto: "Http", annProbePath: "/healthz", annPIPTags: "team=e2e,run=" + r.id}, []v1.ServicePort{tcp(80)}, nil)
	if !r.tg.emulator && (!ip.IsGlobalUnicast() || ip.IsPrivate()) {
		t.Errorf("ingress %s is not a public address", ip) // the sandbox's public addresses are on loopback
	}
	lb, _, rl := r.waitRule(t, ip, 80, armnetwork.TransportProtocolTCP)
	if got := deref(rl.Properties.IdleTimeoutInMinutes); got != 10 {
		t.Errorf("rule %s: idleTimeoutInMinutes %d, want 10 (%s)", deref(rl.Name), got, annIdleTimeout)
	}
	if rl.Properties.Probe == nil {
		t.Fatalf("rule %s has no probe", deref(rl.Name))
	}
	var probe *armnetwork.Probe
	for _, p := range lb.Properties.Probes {
		if sameID(deref(p.ID), deref(rl.Properties.Probe.ID)) {
			probe = p
		}
	}
	if probe == nil || probe.Properties == nil {
		t.Fatalf("rule %s: probe %s not on the load balancer", deref(rl.Name), deref(rl.Properties.Probe.ID))
	}
	if deref(probe.Properties.Protocol) != armnetwork.ProbeProtocolHTTP || deref(probe.Properties.RequestPath) != "/healthz" {
		t.Errorf("probe %s: %s %q, want Http /healthz", deref(probe.Name), deref(probe.Properties.Protocol), deref(probe.Properties.RequestPath))
	}
	pip := r.publicIPWith(t, ip)
	if pip.Tags["team"] == nil || *pip.Tags["team"] != "e2e" || pip.Tags["run"] == nil || *pip.Tags["run"] != r.id {
		t.Errorf("public IP %s tags %v, want team=e2e and run=%s (%s)", deref(pip.Name), tagMap(pip.Tags), r.id, annPIPTags)
	}
	if owner := pip.Tags[serviceTagOwner]; owner == nil || *owner != r.ns+"/web" {
		t.Errorf("public IP %s: %s tag %v, want %s/web (azlb's own)", deref(pip.Name), serviceTagOwner, tagMap(pip.Tags), r.ns)
	}
}

func tagMap(tags map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		out[k] = deref(v)
	}
	return out
}

// publicIPWith is the public IP holding addr.
func (r *run) publicIPWith(t *testing.T, addr netip.Addr) *armnetwork.PublicIPAddress {
	t.Helper()
	pips, err := r.arm.publicIPs(context.Background(), r.tg.rg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pips {
		if p.Properties != nil && deref(p.Properties.IPAddress) == addr.String() {
			return p
		}
	}
	t.Fatalf("no public IP in %s has %s", r.tg.rg, addr)
	return nil
}

// loadBalancerSourceRanges: the security group lets exactly those sources
// reach the Service's address and port, and nothing else allows more.
func (r *run) sourceRanges(t *testing.T) {
	ranges := []string{"203.0.113.0/24", "198.51.100.7/32"}
	_, ip := r.service(t, "restricted", nil, []v1.ServicePort{tcp(80)}, func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = ranges })
	r.waitRule(t, ip, 80, armnetwork.TransportProtocolTCP)
	r.eventually(t, 2*time.Minute, "security rules admitting exactly "+strings.Join(ranges, ",")+" to "+ip.String()+":80", func(ctx context.Context) (bool, error) {
		sources, err := r.allowedSources(ctx, ip, 80, armnetwork.SecurityRuleProtocolTCP)
		if err != nil {
			return false, err
		}
		slices.Sort(sources)
		want := slices.Clone(ranges)
		slices.Sort(want)
		if !slices.Equal(sources, want) {
			return false, fmt.Errorf("sources allowed to %s:80: %v, want %v", ip, sources, want)
		}
		return true, nil
	})
}

// allowedSources lists the sources of the inbound Allow rules whose
// destination and port cover addr:port, over every security group of the
// resource groups the suite reads (azure.json's, or all of the cluster's
// resource group).
func (r *run) allowedSources(ctx context.Context, addr netip.Addr, port int32, proto armnetwork.SecurityRuleProtocol) ([]string, error) {
	groups, err := r.arm.securityGroups(ctx, r.tg.nsgRG)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range groups {
		if r.tg.nsgName != "" && !strings.EqualFold(deref(g.Name), r.tg.nsgName) || g.Properties == nil {
			continue
		}
		for _, rule := range g.Properties.SecurityRules {
			p := rule.Properties
			if p == nil || deref(p.Direction) != armnetwork.SecurityRuleDirectionInbound || deref(p.Access) != armnetwork.SecurityRuleAccessAllow {
				continue
			}
			if pr := deref(p.Protocol); pr != proto && pr != armnetwork.SecurityRuleProtocolAsterisk {
				continue
			}
			if !covers(append([]*string{p.DestinationAddressPrefix}, p.DestinationAddressPrefixes...), addr.String()) ||
				!coversPort(append([]*string{p.DestinationPortRange}, p.DestinationPortRanges...), port) {
				continue
			}
			for _, s := range append([]*string{p.SourceAddressPrefix}, p.SourceAddressPrefixes...) {
				if v := deref(s); v != "" {
					out = append(out, v)
				}
			}
		}
	}
	return out, nil
}

// covers: one of the prefixes is the address, a CIDR holding it, or *.
func covers(prefixes []*string, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	for _, p := range prefixes {
		v := deref(p)
		if v == "*" || v == addr {
			return true
		}
		if pf, err := netip.ParsePrefix(v); err == nil && pf.Contains(a) {
			return true
		}
	}
	return false
}

// coversPort: one of the ranges is *, the port, or a range holding it.
func coversPort(ranges []*string, port int32) bool {
	for _, r := range ranges {
		v := deref(r)
		if v == "*" || v == fmt.Sprint(port) {
			return true
		}
		var lo, hi int32
		if n, _ := fmt.Sscanf(v, "%d-%d", &lo, &hi); n == 2 && lo <= port && port <= hi {
			return true
		}
	}
	return false
}

// Two Services naming one public IP (azure-pip-name) with different ports
// share its address and one frontend.
func (r *run) sharedIP(t *testing.T) {
	name := "azlb-e2e-" + r.id + "-shared"
	_, a := r.service(t, "shared-a", map[string]string{annPIPName: name}, []v1.ServicePort{tcp(80)}, nil)
	_, b := r.service(t, "shared-b", map[string]string{annPIPName: name}, []v1.ServicePort{tcp(8080)}, nil)
	if a != b {
		t.Fatalf("shared-a on %s, shared-b on %s: want one address", a, b)
	}
	r.waitRule(t, a, 80, armnetwork.TransportProtocolTCP)
	_, fe, _ := r.waitRule(t, a, 8080, armnetwork.TransportProtocolTCP)
	if pip := r.publicIPWith(t, a); !strings.EqualFold(deref(pip.Name), name) {
		t.Errorf("the shared address %s is public IP %s, want %s", a, deref(pip.Name), name)
	}
	t.Logf("shared-a and shared-b on %s, frontend %s", a, deref(fe.Name))
}

// A public IP of the user's (made by the suite, not by azlb), selected by
// address: it serves the Service and survives it.
func (r *run) usersPublicIP(t *testing.T) {
	ctx := context.Background()
	name := "azlb-e2e-" + r.id + "-byo"
	poller, err := r.arm.pips.BeginCreateOrUpdate(ctx, r.tg.rg, name, armnetwork.PublicIPAddress{
		Location: ptr.To(r.tg.location),
		SKU:      &armnetwork.PublicIPAddressSKU{Name: ptr.To(armnetwork.PublicIPAddressSKUNameStandard)},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{PublicIPAllocationMethod: ptr.To(armnetwork.IPAllocationMethodStatic),
			PublicIPAddressVersion: ptr.To(armnetwork.IPVersionIPv4)},
		Tags: map[string]*string{"created-by": ptr.To("azlb-e2e-cluster")},
	}, nil)
	if err != nil {
		t.Fatalf("create public IP %s: %v", name, err)
	}
	pip, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatalf("create public IP %s: %v", name, err)
	}
	t.Cleanup(func() { r.deletePublicIP(t, name) })
	addr := deref(pip.Properties.IPAddress)
	_, ip := r.service(t, "byo", map[string]string{annIPv4: addr}, []v1.ServicePort{tcp(80)}, nil)
	if ip.String() != addr {
		t.Fatalf("service byo got %s, want the user's %s", ip, addr)
	}
	r.waitRule(t, ip, 80, armnetwork.TransportProtocolTCP)
	r.deleteService(t, "byo")
	got, err := r.arm.pips.Get(ctx, r.tg.rg, name, nil)
	if err != nil {
		t.Fatalf("the user's public IP %s after its Service left: %v (azlb must never delete it)", name, err)
	}
	if got.Properties.IPConfiguration != nil {
		r.eventually(t, 2*time.Minute, "public IP "+name+" released", func(ctx context.Context) (bool, error) {
			got, err := r.arm.pips.Get(ctx, r.tg.rg, name, nil)
			return err == nil && got.Properties.IPConfiguration == nil, err
		})
	}
}

// deletePublicIP deletes a public IP the suite created.
func (r *run) deletePublicIP(t *testing.T, name string) {
	ctx := context.Background()
	r.eventually(t, 3*time.Minute, "public IP "+name+" deleted", func(ctx context.Context) (bool, error) {
		p, err := r.arm.pips.BeginDelete(ctx, r.tg.rg, name, nil)
		if err != nil {
			return false, err // still in use: again
		}
		_, err = p.PollUntilDone(ctx, nil)
		return err == nil, err
	})
	_ = ctx
}

// deleteService deletes a Service and waits until it is gone (azlb's
// finalizer removed: its load balancer part cleaned up).
func (r *run) deleteService(t *testing.T, name string) {
	t.Helper()
	if err := r.cs.CoreV1().Services(r.ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	r.eventually(t, 3*time.Minute, "service "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := r.cs.CoreV1().Services(r.ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// An internal Service: a private address on an internal load balancer.
func (r *run) internal(t *testing.T) {
	_, ip := r.service(t, "internal", map[string]string{annInternal: "true"}, []v1.ServicePort{tcp(80)}, nil)
	lb, fe, _ := r.waitRule(t, ip, 80, armnetwork.TransportProtocolTCP)
	if fe.Properties.PublicIPAddress != nil || deref(fe.Properties.PrivateIPAddress) != ip.String() || fe.Properties.Subnet == nil {
		t.Errorf("frontend %s of %s: want the private address %s in a subnet, no public IP", deref(fe.Name), deref(lb.Name), ip)
	}
}

// A UDP port: a Udp rule.
func (r *run) udp(t *testing.T) {
	_, ip := r.service(t, "dns", nil, []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, TargetPort: intstr.FromInt32(53)}}, nil)
	r.waitRule(t, ip, 53, armnetwork.TransportProtocolUDP)
}

// An internal Service published through a Private Link Service, which is
// deleted with it.
func (r *run) privateLink(t *testing.T) {
	_, ip := r.service(t, "private", map[string]string{annInternal: "true", annPLSCreate: "true"}, []v1.ServicePort{tcp(80)}, nil)
	_, fe, _ := r.waitRule(t, ip, 80, armnetwork.TransportProtocolTCP)
	var pls *armnetwork.PrivateLinkService
	r.eventually(t, 2*time.Minute, "a Private Link Service on frontend "+deref(fe.Name), func(ctx context.Context) (bool, error) {
		var err error
		pls, err = r.plsOn(ctx, deref(fe.ID))
		return pls != nil, err
	})
	if len(pls.Properties.IPConfigurations) == 0 {
		t.Errorf("Private Link Service %s has no NAT ip configuration", deref(pls.Name))
	}
	r.deleteService(t, "private")
	r.eventually(t, 2*time.Minute, "Private Link Service "+deref(pls.Name)+" deleted with its Service", func(ctx context.Context) (bool, error) {
		left, err := r.plsOn(ctx, deref(fe.ID))
		return err == nil && left == nil, err
	})
}

// plsOn is the Private Link Service on a frontend, if any.
func (r *run) plsOn(ctx context.Context, frontendID string) (*armnetwork.PrivateLinkService, error) {
	all, err := r.arm.privateLinkServices(ctx, r.tg.rg)
	if err != nil {
		return nil, err
	}
	for _, p := range all {
		if p.Properties == nil {
			continue
		}
		for _, f := range p.Properties.LoadBalancerFrontendIPConfigurations {
			if sameID(deref(f.ID), frontendID) {
				return p, nil
			}
		}
	}
	return nil, nil
}

// The admin-state taint (the one change to an object the suite did not
// create, removed afterwards): a node tainted
// cloudprovider.azure.microsoft.com/draining=spot-eviction:NoSchedule has
// its backend pool entries Down, and None again once the taint is gone.
func (r *run) adminStateTaint(t *testing.T) {
	if os.Getenv(envSkipTaint) != "" {
		t.Skipf("%s is set", envSkipTaint)
	}
	ctx := context.Background()
	_, ip := r.service(t, "drained", nil, []v1.ServicePort{tcp(80)}, nil)
	lb, _, _ := r.waitRule(t, ip, 80, armnetwork.TransportProtocolTCP)
	node, addr := r.memberNode(t, lb)
	taint := v1.Taint{Key: drainingTaint, Value: "spot-eviction", Effect: v1.TaintEffectNoSchedule}
	r.setTaint(t, node, &taint)
	t.Cleanup(func() { r.setTaint(t, node, nil) })
	r.eventually(t, time.Minute, "node "+node+" Down on "+deref(lb.Name), func(ctx context.Context) (bool, error) {
		return r.adminState(ctx, deref(lb.Name), addr) == "Down", nil
	})
	r.setTaint(t, node, nil)
	r.eventually(t, time.Minute, "node "+node+" back to None on "+deref(lb.Name), func(ctx context.Context) (bool, error) {
		s := r.adminState(ctx, deref(lb.Name), addr)
		return s == "None" || s == "", nil
	})
	_ = ctx
}

// memberNode is a node of the cluster with an entry in a pool of lb.
func (r *run) memberNode(t *testing.T, lb *armnetwork.LoadBalancer) (string, string) {
	t.Helper()
	nodes, err := r.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == v1.NodeInternalIP && r.adminState(context.Background(), deref(lb.Name), a.Address) != "absent" {
				return n.Name, a.Address
			}
		}
	}
	t.Fatalf("no node of the cluster has an entry in a backend pool of %s", deref(lb.Name))
	return "", ""
}

// adminState is the admin state of the pool entries of lb holding addr
// (by address, or by the address of the NIC ip configuration they name):
// "Down" when any is Down, "None" (or "") otherwise, "absent" without one.
func (r *run) adminState(ctx context.Context, lbName, addr string) string {
	lb, err := r.arm.lbs.Get(ctx, r.tg.rg, lbName, nil)
	if err != nil || lb.Properties == nil {
		return "absent"
	}
	state := "absent"
	for _, pool := range lb.Properties.BackendAddressPools {
		if pool.Properties == nil {
			continue
		}
		for _, e := range pool.Properties.LoadBalancerBackendAddresses {
			p := e.Properties
			if p == nil {
				continue
			}
			at := deref(p.IPAddress)
			if at == "" && p.NetworkInterfaceIPConfiguration != nil {
				at = r.nicAddress(ctx, deref(p.NetworkInterfaceIPConfiguration.ID))
			}
			if at != addr {
				continue
			}
			s := string(deref(p.AdminState))
			if s == "Down" {
				return "Down"
			}
			state = s
		}
	}
	return state
}

// nicAddress is the private address of a NIC ip configuration, by id.
func (r *run) nicAddress(ctx context.Context, id string) string {
	parts := strings.Split(strings.Trim(id, "/"), "/")
	// subscriptions/S/resourceGroups/RG/providers/Microsoft.Network/networkInterfaces/NIC/ipConfigurations/IPC
	if len(parts) != 10 {
		return ""
	}
	nic, err := r.arm.nics.Get(ctx, parts[3], parts[7], nil)
	if err != nil || nic.Properties == nil {
		return ""
	}
	for _, c := range nic.Properties.IPConfigurations {
		if strings.EqualFold(deref(c.Name), parts[9]) && c.Properties != nil {
			return deref(c.Properties.PrivateIPAddress)
		}
	}
	return ""
}

// setTaint adds the taint to a node, or (nil) removes the draining taint.
func (r *run) setTaint(t *testing.T, node string, taint *v1.Taint) {
	t.Helper()
	r.eventually(t, 30*time.Second, "taint of node "+node, func(ctx context.Context) (bool, error) {
		n, err := r.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(x v1.Taint) bool { return x.Key == drainingTaint })
		if taint != nil {
			n.Spec.Taints = append(n.Spec.Taints, *taint)
		}
		_, err = r.cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err == nil, err
	})
}

// azlb verify finds Azure as the documentation says (it needs the
// controller's azure.json).
func (r *run) verify(t *testing.T) {
	if r.tg.cloudConfig == "" {
		t.Skipf("azlb verify reads the controller's azure.json: set %s", envCloudConfig)
	}
	root, _ := repoRoot()
	bin := os.Getenv(envAzlb)
	if bin == "" {
		bin = filepath.Join(root, "bin", "azlb")
	}
	var out []byte
	r.eventually(t, 2*time.Minute, "azlb verify clean", func(ctx context.Context) (bool, error) {
		var err error
		out, err = exec.CommandContext(ctx, bin, "verify", "--kubeconfig", r.tg.kubeconfig, "--cloud-config", r.tg.cloudConfig).CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("%w:\n%s", err, out)
		}
		return true, nil
	})
	t.Logf("%s", out)
}

// cleanUp deletes the suite's Services (each waits for azlb's finalizer:
// its Azure part is cleaned up), then the namespace, and checks that azlb
// left nothing of them in Azure: no frontend on their addresses, no public
// IP tagged with them. A control plane without a namespace controller (the
// sandbox runs none) never finishes deleting a namespace: once it holds no
// Service, the suite finalizes its own namespace as that controller would.
func (r *run) cleanUp(t *testing.T) {
	ctx := context.Background()
	svcs, err := r.cs.CoreV1().Services(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Errorf("list the Services of %s: %v", r.ns, err)
		return
	}
	var addrs []netip.Addr
	for _, s := range svcs.Items {
		for _, in := range s.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				addrs = append(addrs, a)
			}
		}
		r.deleteService(t, s.Name)
	}
	if err := r.cs.CoreV1().Namespaces().Delete(ctx, r.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", r.ns, err)
		return
	}
	gone := func(ctx context.Context) (bool, error) {
		_, err := r.cs.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, gone); err != nil {
		ns, err := r.cs.CoreV1().Namespaces().Get(ctx, r.ns, metav1.GetOptions{})
		if err == nil && ns.DeletionTimestamp != nil {
			t.Logf("namespace %s still terminating after a minute (no namespace controller?): finalizing it, as that controller does once it is empty", r.ns)
			ns.Spec.Finalizers = nil
			if _, err := r.cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
				t.Errorf("finalize namespace %s: %v", r.ns, err)
			}
		}
		r.eventually(t, time.Minute, "namespace "+r.ns+" gone", gone)
	}
	r.eventually(t, 2*time.Minute, "nothing of the suite's Services left in Azure", func(ctx context.Context) (bool, error) {
		for _, a := range addrs {
			if _, fe, err := r.frontendOf(ctx, a); err == nil {
				return false, fmt.Errorf("frontend %s still serves %s", deref(fe.Name), a)
			}
		}
		pips, err := r.arm.publicIPs(ctx, r.tg.rg)
		if err != nil {
			return false, err
		}
		for _, p := range pips {
			if owner := deref(p.Tags[serviceTagOwner]); strings.HasPrefix(owner, r.ns+"/") {
				return false, fmt.Errorf("public IP %s of %s is left", deref(p.Name), owner)
			}
		}
		return true, nil
	})
}
