package verify

import (
	"crypto/md5" //nolint:gosec // the documented rule names are MD5 hashes
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The network security group of the fixture, written out as
// docs/security-groups.md describes it: web (public, port 80, 20.0.0.1)
// open to the Internet, plus two rules that are not azlb's.

// allowName is the documented allow rule name of a family and content
// string "<protocol>_<sources>_<ports>", spelled out by each test.
func allowName(fam, content string) string {
	sum := md5.Sum([]byte(content)) //nolint:gosec // a name
	return "k8s-azure-lb_allow_" + fam + "_" + hex.EncodeToString(sum[:])
}

// webInternet is md5("Tcp_Internet_80"), computed once by hand.
const webInternet = "k8s-azure-lb_allow_IPv4_d39272f7f57ed937951650d93992ad77"

func ptrs(l []string) []*string {
	out := make([]*string, len(l))
	for i := range l {
		out[i] = ptr.To(l[i])
	}
	return out
}

// secRule lays a rule out as the page says: one source or destination in
// the singular field, several in the plural one; allow rules always with
// destinationPortRanges.
func secRule(name string, prio int32, access, proto string, srcs, dsts, ports []string) *armnetwork.SecurityRule {
	p := &armnetwork.SecurityRulePropertiesFormat{Priority: ptr.To(prio), Access: ptr.To(armnetwork.SecurityRuleAccess(access)),
		Direction: ptr.To(armnetwork.SecurityRuleDirectionInbound), Protocol: ptr.To(armnetwork.SecurityRuleProtocol(proto)),
		SourcePortRange: ptr.To("*")}
	if len(srcs) == 1 {
		p.SourceAddressPrefix = ptr.To(srcs[0])
	} else {
		p.SourceAddressPrefixes = ptrs(srcs)
	}
	if len(dsts) == 1 {
		p.DestinationAddressPrefix = ptr.To(dsts[0])
	} else {
		p.DestinationAddressPrefixes = ptrs(dsts)
	}
	if access == "Deny" {
		p.DestinationPortRange = ptr.To(ports[0])
	} else {
		p.DestinationPortRanges = ptrs(ports)
	}
	return &armnetwork.SecurityRule{Name: ptr.To(name), Properties: p}
}

func allow(name string, prio int32, srcs, dsts, ports []string) *armnetwork.SecurityRule {
	return secRule(name, prio, "Allow", "Tcp", srcs, dsts, ports)
}

func denyAll(fam string, prio int32, dsts ...string) *armnetwork.SecurityRule {
	return secRule("k8s-azure-lb_deny-all_"+fam, prio, "Deny", "*", []string{"*"}, dsts, []string{"*"})
}

func l(s ...string) []string { return s }

// foreignRules are not azlb's: another name, or azlb's prefix outside the
// priorities 500-4096. They are never judged.
func foreignRules() []*armnetwork.SecurityRule {
	return []*armnetwork.SecurityRule{
		secRule("allow-ssh", 100, "Allow", "Tcp", l("*"), l("*"), l("22")),
		secRule("k8s-azure-lb_custom", 4097, "Deny", "*", l("*"), l("20.0.0.1"), l("*")),
	}
}

func nsgFixture() *Snapshot {
	s := fixture()
	s.Config.SecurityGroupName = "nsg"
	s.SecurityGroup = &armnetwork.SecurityGroup{Name: ptr.To("nsg"), Properties: &armnetwork.SecurityGroupPropertiesFormat{}}
	setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")))
	return s
}

// setRules replaces azlb's rules, keeping the foreign ones.
func setRules(s *Snapshot, rules ...*armnetwork.SecurityRule) {
	s.SecurityGroup.Properties.SecurityRules = append(foreignRules(), rules...)
}

func annotate(s *Snapshot, kv ...string) {
	if s.Services[0].Annotations == nil {
		s.Services[0].Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Services[0].Annotations[kv[i]] = kv[i+1]
	}
}

// floatingOff turns floating IP off for web and adapts its load balancer
// rule (backend port: the node port).
func floatingOff(s *Snapshot) {
	annotate(s, "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip", "true")
	rp := lbOf(s).LoadBalancingRules[0].Properties
	rp.BackendPort, rp.EnableFloatingIP = ptr.To[int32](30080), ptr.To(false)
}

// internal turns web into an internal Service at 10.0.0.10 on
// kubernetes-internal.
func internal(s *Snapshot) {
	annotate(s, "service.beta.kubernetes.io/azure-load-balancer-internal", "true")
	lb := s.LoadBalancers[0]
	internalID := lbID + "-internal"
	lb.Name, lb.ID = ptr.To("kubernetes-internal"), ptr.To(internalID)
	lb.Properties.FrontendIPConfigurations[0].Properties = &armnetwork.FrontendIPConfigurationPropertiesFormat{
		PrivateIPAddress: ptr.To("10.0.0.10"), PrivateIPAllocationMethod: ptr.To(armnetwork.IPAllocationMethodDynamic),
		Subnet: &armnetwork.Subnet{ID: ptr.To(vnetID + "/subnets/subnet")}}
	rp := lb.Properties.LoadBalancingRules[0].Properties
	for _, ref := range []*armnetwork.SubResource{rp.FrontendIPConfiguration, rp.BackendAddressPool, rp.Probe} {
		ref.ID = ptr.To(strings.Replace(*ref.ID, lbID, internalID, 1))
	}
	s.PublicIPs = nil
	s.Services[0].Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.0.0.10"}}
}

const (
	svcWeb = "service default/web: security group nsg: "
	nsgObj = "security group nsg: "
	who    = " [docs/security-groups.md#who-may-connect]"
	layout = " [docs/security-groups.md#the-rules-azlb-writes]"

	keyRanges   = "service.beta.kubernetes.io/azure-allowed-ip-ranges"
	keyDeny     = "service.beta.kubernetes.io/azure-deny-all-except-load-balancer-source-ranges"
	keyTags     = "service.beta.kubernetes.io/azure-allowed-service-tags"
	keyDisabled = "service.beta.kubernetes.io/azure-disable-load-balancer-nsg-rule"
	keyExtra    = "service.beta.kubernetes.io/azure-additional-public-ips"
)

func TestNSGFixtureIsClean(t *testing.T) {
	if r := Check(nsgFixture()); !r.Clean() {
		t.Fatalf("the documented NSG has findings:\n%s", findings(r))
	}
}

// Each case changes the fixture and lists the exact findings, sorted.
func TestNSGFindings(t *testing.T) {
	tcpRanges80 := allowName("IPv4", "Tcp_10.0.0.0/24_80")
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   []string
	}{
		// Missing and extra allows.
		{"no allow rule yet", func(s *Snapshot) { setRules(s) }, l(
			svcWeb + "no azlb allow rule lets Internet reach 20.0.0.1 on Tcp port 80 (want it in rule " + webInternet + ")" + who)},
		{"source ranges: the Internet rule is wider than the spec", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
		}, l(
			svcWeb+"no azlb allow rule lets 10.0.0.0/24 reach 20.0.0.1 on Tcp port 80 (want it in rule "+tcpRanges80+")"+who,
			svcWeb+"rule "+webInternet+" lets Internet reach 20.0.0.1 on Tcp port 80, which the Service does not call for: its spec allows only 10.0.0.0/24"+who)},
		{"source ranges match exactly", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			setRules(s, allow(tcpRanges80, 500, l("10.0.0.0/24"), l("20.0.0.1"), l("80")))
		}, nil},
		{"annotation ranges are trimmed and merged, the legacy one joins them", func(s *Snapshot) {
			annotate(s, keyRanges, " 10.0.0.0/25, 10.0.0.128/25", "service.beta.kubernetes.io/load-balancer-source-ranges", "192.168.0.0/16")
			setRules(s, allow(allowName("IPv4", "Tcp_10.0.0.0/24,192.168.0.0/16_80"), 500, l("10.0.0.0/24", "192.168.0.0/16"), l("20.0.0.1"), l("80")))
		}, nil},
		{"a port the Service does not have", func(s *Snapshot) {
			setRules(s, allow(allowName("IPv4", "Tcp_Internet_80,8080"), 500, l("Internet"), l("20.0.0.1"), l("80", "8080")))
		}, l(svcWeb + "rule " + allowName("IPv4", "Tcp_Internet_80,8080") + " lets Internet reach 20.0.0.1 on Tcp port 8080, which the Service does not call for: Tcp 8080 is not one of its ports" + who)},
		{"disable-nsg-rule: the rule it had is extra", func(s *Snapshot) { annotate(s, keyDisabled, "true") }, l(
			svcWeb + "rule " + webInternet + " lets Internet reach 20.0.0.1 on Tcp port 80, which the Service does not call for: " + keyDisabled + " is true: azlb writes no rule for it and removes those it had" + who)},
		{"disable-nsg-rule without rules", func(s *Snapshot) { annotate(s, keyDisabled, "TRUE"); setRules(s) }, nil},
		{"an outbound rule allows nothing inbound", func(s *Snapshot) {
			s.SecurityGroup.Properties.SecurityRules[2].Properties.Direction = ptr.To(armnetwork.SecurityRuleDirectionOutbound)
		}, l(
			nsgObj+"allow rule "+webInternet+" is Outbound from source ports [*], want Inbound from source port *"+layout,
			svcWeb+"no azlb allow rule lets Internet reach 20.0.0.1 on Tcp port 80 (want it in rule "+webInternet+")"+who)},

		// Tags, deny-all and failing closed.
		{"ranges, a tag and deny-all as the takeover layout has them", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, keyTags, "AzureFrontDoor.Backend", keyDeny, "true")
			setRules(s, allow(tcpRanges80, 500, l("10.0.0.0/24"), l("20.0.0.1"), l("80")),
				allow(allowName("IPv4", "Tcp_AzureFrontDoor.Backend_80"), 501, l("AzureFrontDoor.Backend"), l("20.0.0.1"), l("80")),
				denyAll("IPv4", 4095, "20.0.0.1"))
		}, nil},
		{"deny-all missing", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, keyDeny, "true")
			setRules(s, allow(tcpRanges80, 500, l("10.0.0.0/24"), l("20.0.0.1"), l("80")))
		}, l(svcWeb + "rule k8s-azure-lb_deny-all_IPv4 does not hold its address 20.0.0.1, want it denied: " + keyDeny + " is true" + who)},
		{"a deny-all nothing calls for", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")), denyAll("IPv4", 4095, "20.0.0.1"))
		}, l(svcWeb + "rule k8s-azure-lb_deny-all_IPv4 holds its address 20.0.0.1, but nothing in its spec calls for one" + who)},
		{"an invalid range fails closed: the valid one, a deny-all, no Internet", func(s *Snapshot) {
			annotate(s, keyRanges, "10.0.0.0/24,10.0.0.1/24")
			setRules(s, allow(tcpRanges80, 500, l("10.0.0.0/24"), l("20.0.0.1"), l("80")), denyAll("IPv4", 4095, "20.0.0.1"))
		}, nil},
		{"an invalid range with the Internet rule still there", func(s *Snapshot) {
			annotate(s, keyRanges, "10.0.0.1/24")
		}, l(
			svcWeb+"rule "+webInternet+" lets Internet reach 20.0.0.1 on Tcp port 80, which the Service does not call for: its spec allows no source of IPv4"+who,
			svcWeb+`rule k8s-azure-lb_deny-all_IPv4 does not hold its address 20.0.0.1, want it denied: invalid range "10.0.0.1/24" fails closed`+who)},
		{"an invalid service tag fails closed too", func(s *Snapshot) {
			annotate(s, keyTags, "Storage.WestEurope,Not-A-Tag")
			setRules(s, allow(allowName("IPv4", "Tcp_Storage.WestEurope_80"), 500, l("Storage.WestEurope"), l("20.0.0.1"), l("80")),
				denyAll("IPv4", 4095, "20.0.0.1"))
		}, nil},
		{"the deny-all comes before the allows", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, keyDeny, "true")
			setRules(s, denyAll("IPv4", 500, "20.0.0.1"), allow(tcpRanges80, 501, l("10.0.0.0/24"), l("20.0.0.1"), l("80")))
		}, l(nsgObj + "deny rule k8s-azure-lb_deny-all_IPv4 (priority 500) comes before allow rule " + tcpRanges80 + " (priority 501) for destination 20.0.0.1: the allow has no effect" + layout)},
		{"a deny rule of another shape", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, keyDeny, "true")
			d := denyAll("IPv4", 4095, "20.0.0.1")
			d.Properties.DestinationPortRange = ptr.To("80")
			setRules(s, allow(tcpRanges80, 500, l("10.0.0.0/24"), l("20.0.0.1"), l("80")), d)
		}, l(nsgObj + "deny rule k8s-azure-lb_deny-all_IPv4 is Inbound, protocol *, from [*] to ports [80]; want Inbound, protocol *, from * to ports *" + layout)},

		// Names, leftovers, rules not azlb's.
		{"a rule not named after its content", func(s *Snapshot) {
			setRules(s, allow(allowName("IPv4", "Tcp_Internet_8080"), 500, l("Internet"), l("20.0.0.1"), l("80")))
		}, l(nsgObj + "allow rule " + allowName("IPv4", "Tcp_Internet_8080") + " (Tcp from Internet to ports 80) is not named after its content: want " + webInternet + layout)},
		{"a destination of nobody", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "20.0.0.9"), l("80")))
		}, l(nsgObj + "rule " + webInternet + " holds destination 20.0.0.9, which is the address of no LoadBalancer Service's frontend nor of a node: it should have left the rule" + layout)},
		{"a node's address on a node port of nobody", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")),
				allow(allowName("IPv4", "Tcp_Internet_30080"), 501, l("Internet"), l("10.0.0.1"), l("30080")))
		}, l(nsgObj + "rule " + allowName("IPv4", "Tcp_Internet_30080") + " grants node address 10.0.0.1 port 30080, which is the node port of no LoadBalancer Service with floating IP off: it should have left the rule" + layout)},
		{"the Service is deleted", func(s *Snapshot) { s.Services = nil }, l(
			"load balancer kubernetes: frontend "+webBase+" belongs to no LoadBalancer Service (a deleted Service's?): it should have been removed [docs/load-balancers.md#how-a-reconcile-works]",
			"load balancer kubernetes: probe "+webBase+"-TCP-80 belongs to no LoadBalancer Service: it should have been removed [docs/load-balancers.md#how-a-reconcile-works]",
			"load balancer kubernetes: rule "+webBase+"-TCP-80 belongs to no LoadBalancer Service: it should have been removed [docs/load-balancers.md#how-a-reconcile-works]",
			"public IP kubernetes-"+webBase+": azlb owns it (k8s-azure-service=default/web) but no frontend of that Service uses it: it should have been deleted [docs/load-balancers.md#public-ips-owned-and-user-owned]",
			nsgObj+"rule "+webInternet+" holds destination 20.0.0.1, which is the address of no LoadBalancer Service's frontend nor of a node: it should have left the rule"+layout)},
		{"rules not azlb's are left alone", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1"), l("80")),
				allow("k8s-azure-lb_allow_IPv4_mine", 200, l("*"), l("20.0.0.1"), l("443")),
				allow("team-rule", 600, l("*"), l("20.0.0.1"), l("443")))
		}, nil},

		// Extra destinations (azure-additional-public-ips, issue 40 item 9).
		{"additional public IPs next to the frontend, per family", func(s *Snapshot) {
			annotate(s, keyExtra, " 203.0.113.20, 2001:db8::20,,")
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "203.0.113.20"), l("80")),
				allow(allowName("IPv6", "Tcp_Internet_80"), 501, l("Internet"), l("2001:db8::20"), l("80")))
		}, nil},
		{"an additional public IP missing", func(s *Snapshot) { annotate(s, keyExtra, "203.0.113.20") }, l(
			svcWeb + "no azlb allow rule lets Internet reach 203.0.113.20 on Tcp port 80 (want it in rule " + webInternet + ")" + who)},
		{"an additional public IP dropped but left in the rule", func(s *Snapshot) {
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "203.0.113.20"), l("80")))
		}, l(nsgObj + "rule " + webInternet + " holds destination 203.0.113.20, which is the address of no LoadBalancer Service's frontend nor of a node: it should have left the rule" + layout)},
		{"additional public IPs with deny-all: denied too", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, keyDeny, "true", keyExtra, "203.0.113.20")
			setRules(s, allow(tcpRanges80, 500, l("10.0.0.0/24"), l("20.0.0.1", "203.0.113.20"), l("80")), denyAll("IPv4", 4095, "20.0.0.1"))
		}, l(svcWeb + "rule k8s-azure-lb_deny-all_IPv4 does not hold its address 203.0.113.20, want it denied: " + keyDeny + " is true" + who)},
		{"an invalid additional public IP: skipped, its rules left alone", func(s *Snapshot) {
			annotate(s, keyExtra, "203.0.113.20,nope")
			setRules(s, allow(webInternet, 500, l("Internet"), l("20.0.0.1", "203.0.113.20"), l("80")))
		}, nil},

		// Destinations with floating IP off.
		{"floating IP off: the pool's nodes and the node ports", func(s *Snapshot) {
			floatingOff(s)
			setRules(s, allow(allowName("IPv4", "Tcp_Internet_30080"), 500, l("Internet"), l("10.0.0.1", "10.0.0.2"), l("30080")))
		}, nil},
		{"floating IP off with the frontend's rule left", func(s *Snapshot) { floatingOff(s) }, l(
			svcWeb+"no azlb allow rule lets Internet reach 10.0.0.1 on Tcp port 30080 (want it in rule "+allowName("IPv4", "Tcp_Internet_30080")+")"+who,
			svcWeb+"no azlb allow rule lets Internet reach 10.0.0.2 on Tcp port 30080 (want it in rule "+allowName("IPv4", "Tcp_Internet_30080")+")"+who,
			svcWeb+"rule "+webInternet+" lets Internet reach 20.0.0.1 on Tcp port 80, which the Service does not call for: 20.0.0.1 is not one of its destinations (the nodes of its backend pool (floating IP off): 10.0.0.1, 10.0.0.2)"+who)},

		// Internal Services.
		{"internal without ranges: nothing", func(s *Snapshot) { internal(s); setRules(s) }, nil},
		{"internal with ranges: those ranges", func(s *Snapshot) {
			internal(s)
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.1.0.0/16")
			setRules(s, allow(allowName("IPv4", "Tcp_10.1.0.0/16_80"), 500, l("10.1.0.0/16"), l("10.0.0.10"), l("80")))
		}, nil},
		{"internal with the Internet allowed", func(s *Snapshot) {
			internal(s)
			setRules(s, allow(webInternet, 500, l("Internet"), l("10.0.0.10"), l("80")))
		}, l(svcWeb + "rule " + webInternet + " lets Internet reach 10.0.0.10 on Tcp port 80, which the Service does not call for: its spec allows no source of IPv4 beyond the virtual network" + who)},

		// Services azlb writes nothing for are skipped, their rules left alone.
		{"invalid annotations", func(s *Snapshot) {
			annotate(s, "service.beta.kubernetes.io/azure-load-balancer-internal", "maybe")
			setRules(s, allow(allowName("IPv4", "Tcp_*_80"), 500, l("*"), l("20.0.0.1"), l("80")))
		}, nil},
		{"ranges in both the spec and an annotation", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, keyRanges, "10.1.0.0/16")
		}, nil},
		{"deny-all with floating IP off", func(s *Snapshot) {
			floatingOff(s)
			annotate(s, keyDeny, "true")
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
		}, nil},
		{"an access annotation that is not a boolean", func(s *Snapshot) { annotate(s, keyDeny, "yes") }, nil},
		{"restricted without a security group", func(s *Snapshot) {
			s.Config.SecurityGroupName, s.SecurityGroup = "", nil
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			// Nothing written: not even a frontend.
			s.LoadBalancers, s.PublicIPs, s.Services[0].Status.LoadBalancer.Ingress = nil, nil, nil
		}, nil},

		// Configuration.
		{"no security group configured: no NSG findings", func(s *Snapshot) {
			s.Config.SecurityGroupName, s.SecurityGroup = "", nil
		}, nil},
		{"the configured security group does not exist", func(s *Snapshot) { s.SecurityGroup, s.SecurityGroupNotFound = nil, true }, l(
			"security group nsg: does not exist in resource group rg: azlb never creates it, and cannot write the rules of any Service until it exists [docs/security-groups.md#setting-it-up]")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := nsgFixture()
			tc.change(s)
			r := Check(s)
			var got []string
			for _, f := range r.Findings {
				got = append(got, f.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A Service azlb writes nothing for is listed as skipped, with the reason.
func TestNSGSkips(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Snapshot)
		want   string
	}{
		{"conflict", func(s *Snapshot) {
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
			annotate(s, "service.beta.kubernetes.io/load-balancer-source-ranges", "10.1.0.0/16")
		}, "service default/web: refused (ConflictingAccessConfiguration): source ranges both in spec.loadBalancerSourceRanges and in service.beta.kubernetes.io/load-balancer-source-ranges: azlb writes nothing for it until one is removed"},
		{"deny-all, floating IP off", func(s *Snapshot) {
			floatingOff(s)
			annotate(s, keyDeny, "true")
			s.Services[0].Spec.LoadBalancerSourceRanges = l("10.0.0.0/24")
		}, "service default/web: refused (ConflictingAccessConfiguration): " + keyDeny + " with floating IP off (service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip): azlb writes nothing for it"},
		{"no security group", func(s *Snapshot) {
			s.Config.SecurityGroupName, s.SecurityGroup = "", nil
			annotate(s, keyTags, "AzureFrontDoor.Backend")
		}, "service default/web: refused (SecurityGroupNotConfigured): restricts its sources but azure.json names no securityGroupName: azlb writes nothing for it"},
		{"not a boolean", func(s *Snapshot) { annotate(s, keyDisabled, "1") },
			`service default/web: refused (InvalidLoadBalancerAnnotation): ` + keyDisabled + `: "1" is not a boolean: azlb writes nothing for it`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := nsgFixture()
			tc.change(s)
			r := Check(s)
			if len(r.Skipped) != 1 || r.Skipped[0].String() != tc.want {
				t.Fatalf("skipped %v, want %q", r.Skipped, tc.want)
			}
		})
	}
	// Disabled rules need no security group: the Service is judged.
	s := nsgFixture()
	s.Config.SecurityGroupName, s.SecurityGroup = "", nil
	annotate(s, keyDisabled, "true", keyRanges, "10.0.0.0/24")
	if r := Check(s); !r.Clean() || len(r.Skipped) != 0 {
		t.Fatalf("disabled without a security group: %s %v", findings(r), r.Skipped)
	}
}

func TestNSGSummary(t *testing.T) {
	if got := Check(nsgFixture()).Summary(); !strings.HasSuffix(got, "1 public IPs, security group nsg (1 azlb rules)") {
		t.Errorf("summary %q", got)
	}
	s := fixture()
	if got := Check(s).Summary(); !strings.HasSuffix(got, "1 public IPs, no security group (none configured)") {
		t.Errorf("summary %q", got)
	}
}

// What a Service's spec allows, per family (security-groups.md, Who may
// connect; Details).
func TestAccessSources(t *testing.T) {
	tests := []struct {
		name     string
		ranges   []string
		ann      map[string]string
		internal bool
		v4, v6   string // source sets joined: sets by " | ", sources by ","
		invalid  string
	}{
		{name: "public, nothing else", v4: "Internet", v6: "Internet"},
		{name: "internal, nothing else", internal: true},
		{name: "IPv4 ranges only close IPv6", ranges: l("10.0.0.0/24"), v4: "10.0.0.0/24"},
		{name: "merged and sorted as strings", ranges: l("10.0.0.128/25", "10.0.0.0/25", "192.168.0.0/24", "10.0.1.0/24", "10.0.2.0/23", "9.0.0.0/8"),
			v4: "10.0.0.0/22,192.168.0.0/24,9.0.0.0/8"},
		{name: "a range inside another", ranges: l("10.1.0.0/16", "10.0.0.0/8"), v4: "10.0.0.0/8"},
		{name: "every address of the family", ranges: l("0.0.0.0/0", "10.0.0.0/8", "::/0"), v4: "0.0.0.0/0", v6: "::/0"},
		{name: "IPv6 halves", ranges: l("2001:db8:8000::/33", "2001:db8::/33"), v6: "2001:db8::/32"},
		{name: "host bits, bare address, empty entry", ann: map[string]string{keyRanges: "10.0.0.1/24, 10.0.0.1,,10.2.0.0/16"},
			v4: "10.2.0.0/16", invalid: `range "10.0.0.1/24"; range " 10.0.0.1"; range ""`},
		{name: "tags and ranges", ranges: l("10.0.0.0/24"), ann: map[string]string{keyTags: "Storage.WestEurope, AzureFrontDoor.Backend,Storage.WestEurope"},
			v4: "10.0.0.0/24 | AzureFrontDoor.Backend | Storage.WestEurope", v6: "AzureFrontDoor.Backend | Storage.WestEurope"},
		{name: "tag spelling", ann: map[string]string{keyTags: "Sql.EastUS2,1Bad,Bad-Tag,Bad..Tag"}, v4: "Sql.EastUS2", v6: "Sql.EastUS2",
			invalid: `service tag "1Bad"; service tag "Bad-Tag"; service tag "Bad..Tag"`},
		{name: "only invalid: nothing allowed", ann: map[string]string{keyRanges: "bogus"}, invalid: `range "bogus"`},
	}
	join := func(sets [][]string) string {
		var out []string
		for _, s := range sets {
			out = append(out, strings.Join(s, ","))
		}
		return strings.Join(out, " | ")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			svc := webService()
			svc.Spec.LoadBalancerSourceRanges, svc.Annotations = tc.ranges, tc.ann
			a, why := parseAccess(svc)
			if why != "" {
				t.Fatal(why)
			}
			if got := join(a.sourceSets(v1.IPv4Protocol, tc.internal)); got != tc.v4 {
				t.Errorf("IPv4 %q, want %q", got, tc.v4)
			}
			if got := join(a.sourceSets(v1.IPv6Protocol, tc.internal)); got != tc.v6 {
				t.Errorf("IPv6 %q, want %q", got, tc.v6)
			}
			if got := strings.Join(a.invalid, "; "); got != tc.invalid {
				t.Errorf("invalid %q, want %q", got, tc.invalid)
			}
		})
	}
}

// Ignored azure.json fields are printed as warnings; they do not make the
// report unclean.
func TestWarningsArePrintedAndKeepTheReportClean(t *testing.T) {
	rep := Check(fixture())
	rep.Warnings = []string{"enableLoadBalancerAdminStat: not a field azlb reads, ignored; did you mean enableLoadBalancerAdminState?"}
	if !rep.Clean() {
		t.Fatal("a warning made the report unclean")
	}
	var b strings.Builder
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "WARN  azure.json: enableLoadBalancerAdminStat: not a field azlb reads, ignored; did you mean enableLoadBalancerAdminState?\n") ||
		!strings.Contains(b.String(), "; 1 warning(s)") {
		t.Errorf("report:\n%s", b.String())
	}
}
