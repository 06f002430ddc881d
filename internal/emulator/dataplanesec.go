package emulator

import (
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// hostVIP is Azure's virtual public address 168.63.129.16: the source of
// health probes (the AzureLoadBalancer tag), and part of the
// VirtualNetwork tag.
var hostVIP = netip.PrefixFrom(dataplane.ProbeSource.Addr(), 32)

// probeIPv6 and probeIPv6NoVnet stand for the link-local source of
// Azure's IPv6 health probes (dataplane.ProbeSourcesIPv6): both are in the
// AzureLoadBalancer tag; only the first is in VirtualNetwork, as hostVIP
// is, since Azure does not say whether its address is. Probes must pass
// from both.
var (
	probeIPv6       = netip.PrefixFrom(dataplane.ProbeSourcesIPv6[0].Addr(), 128)
	probeIPv6NoVnet = netip.PrefixFrom(dataplane.ProbeSourcesIPv6[1].Addr(), 128)
)

var anyPrefixes = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

// secIndex is what the data plane needs to know about network security,
// gathered once per configuration build (state lock held): virtual
// networks with their subnets, network interfaces by private address,
// and network security groups compiled for the data plane.
type secIndex struct {
	e   *Emulator
	now time.Time

	vnets     map[string][]subnetInfo // lower(vnet id) -> subnets
	vnetSpace []netip.Prefix          // every virtual network's address space
	nics      map[netip.Addr][]nicInfo
	internet  []netip.Prefix // Options.InternetPrefixes minus vnetSpace

	groups  map[string]*dataplane.SecurityGroup // lower(NSG id) -> compiled; nil: does not exist
	members map[memberKey]*dataplane.Security
}

type subnetInfo struct {
	id       string
	prefixes []netip.Prefix
	nsg      string
}

type nicInfo struct {
	id   string // the ip configuration's id
	vnet string // lower-cased
	nsg  string
}

type memberKey struct {
	vnet, subnet string
	addr         netip.Addr
	open         bool
}

// securityIndex gathers the virtual networks and network interfaces of
// every subscription (state lock held).
func (e *Emulator) securityIndex(now time.Time) *secIndex {
	ix := &secIndex{e: e, now: now, vnets: map[string][]subnetInfo{}, nics: map[netip.Addr][]nicInfo{},
		groups: map[string]*dataplane.SecurityGroup{}, members: map[memberKey]*dataplane.Security{}}
	for _, s := range e.subs {
		for _, g := range s.groups {
			if g.goneAt(now) {
				continue
			}
			for key, en := range g.resources {
				if en.cur == nil || en.cur.phaseAt(now) == phaseGone {
					continue
				}
				switch {
				case strings.HasPrefix(key, "virtualnetworks/"):
					ix.addVNet(en.cur.doc)
				case strings.HasPrefix(key, "networkinterfaces/"):
					ix.addNIC(en.cur.doc)
				case strings.HasPrefix(key, "vmssvm/"):
					ix.addInstance(en.cur)
				}
			}
		}
	}
	for _, list := range ix.nics {
		sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	}
	ix.internet = subtractPrefixes(e.opts.InternetPrefixes, ix.vnetSpace)
	return ix
}

func (ix *secIndex) addVNet(doc obj) {
	props := propsOf(doc)
	ix.vnetSpace = append(ix.vnetSpace, vnetPrefixes(props)...)
	var subnets []subnetInfo
	for _, sn := range children(props, "subnets") {
		cp := propsOf(sn)
		si := subnetInfo{id: stringOf(sn["id"]), nsg: refID(cp["networkSecurityGroup"])}
		list := []any{cp["addressPrefix"]}
		list = append(list, asList(cp["addressPrefixes"])...)
		for _, v := range list {
			if p, err := netip.ParsePrefix(stringOf(v)); err == nil {
				si.prefixes = append(si.prefixes, p.Masked())
			}
		}
		subnets = append(subnets, si)
	}
	ix.vnets[strings.ToLower(stringOf(doc["id"]))] = subnets
}

// vnetOfSubnet is the (lower-cased) virtual network id of a subnet id.
func vnetOfSubnet(subnetID string) string {
	v, _, _ := strings.Cut(strings.ToLower(subnetID), "/subnets/")
	return v
}

func (ix *secIndex) addNIC(doc obj) {
	props := propsOf(doc)
	nsg := refID(props["networkSecurityGroup"])
	for _, c := range children(props, "ipConfigurations") {
		cp := propsOf(c)
		if a, err := netip.ParseAddr(stringOf(cp["privateIPAddress"])); err == nil {
			ix.nics[a] = append(ix.nics[a], nicInfo{id: stringOf(c["id"]), vnet: vnetOfSubnet(refID(cp["subnet"])), nsg: nsg})
		}
	}
}

// addInstance indexes the network interfaces of a scale set VM: their
// network security group comes from the network interface configuration.
func (ix *secIndex) addInstance(v *version) {
	nsgs := map[string]string{} // lower(nic id) -> NSG
	vmID := stringOf(v.doc["id"])
	for _, c := range instanceNICConfigs(v.doc) {
		co := c.(obj)
		nsgs[strings.ToLower(vmID+"/networkInterfaces/"+stringOf(co["name"]))] = refID(propsOf(co)["networkSecurityGroup"])
	}
	for _, ic := range instanceIPConfigs(v) {
		cp := propsOf(ic)
		a, err := netip.ParseAddr(stringOf(cp["privateIPAddress"]))
		if err != nil {
			continue
		}
		id := stringOf(ic["id"])
		nic, _, _ := strings.Cut(strings.ToLower(id), "/ipconfigurations/")
		ix.nics[a] = append(ix.nics[a], nicInfo{id: id, vnet: vnetOfSubnet(refID(cp["subnet"])), nsg: nsgs[nic]})
	}
}

// memberSecurity is what guards a pool member with address addr in
// virtual network vnet (subnet: the subnet the entry names, if any): the
// NSG of the subnet whose prefix holds the address, and the NSG of the
// network interface whose ip configuration holds it. open lets traffic
// through when there is neither (Basic SKU); otherwise nil is returned:
// nothing gets through.
func (ix *secIndex) memberSecurity(vnet, subnet string, addr netip.Addr, open bool) *dataplane.Security {
	k := memberKey{strings.ToLower(vnet), strings.ToLower(subnet), addr, open}
	if sec, ok := ix.members[k]; ok {
		return sec
	}
	sec := &dataplane.Security{Open: open}
	var subnetNSG string
	found := false
	for _, sn := range ix.vnets[k.vnet] {
		for _, p := range sn.prefixes {
			if p.Contains(addr) {
				subnetNSG, found = sn.nsg, true
				break
			}
		}
		if found {
			break
		}
	}
	if !found && k.subnet != "" {
		for _, sn := range ix.vnets[vnetOfSubnet(k.subnet)] {
			if strings.EqualFold(sn.id, k.subnet) {
				subnetNSG = sn.nsg
			}
		}
	}
	sec.Subnet = ix.group(subnetNSG)
	for _, n := range ix.nics[addr] {
		if k.vnet == "" || n.vnet == k.vnet {
			sec.NIC = ix.group(n.nsg)
			break
		}
	}
	if sec.Subnet == nil && sec.NIC == nil && !open {
		sec = nil
	}
	ix.members[k] = sec
	return sec
}

// group compiles a network security group for the data plane; nil when
// id is empty or names no live NSG.
func (ix *secIndex) group(id string) *dataplane.SecurityGroup {
	if id == "" {
		return nil
	}
	k := strings.ToLower(id)
	if g, ok := ix.groups[k]; ok {
		return g
	}
	var g *dataplane.SecurityGroup
	if doc := ix.e.liveDoc(id, ix.now); doc != nil && strings.EqualFold(stringOf(doc["type"]), "Microsoft.Network/networkSecurityGroups") {
		props := propsOf(doc)
		g = &dataplane.SecurityGroup{ID: stringOf(doc["id"])}
		for _, key := range []string{"securityRules", "defaultSecurityRules"} {
			for _, r := range children(props, key) {
				cp := propsOf(r)
				if !strings.EqualFold(stringOf(cp["direction"]), "Inbound") {
					continue
				}
				g.Rules = append(g.Rules, dataplane.SecurityRule{
					Name: stringOf(r["name"]), Priority: int(intOf(cp["priority"])),
					Access: dataplane.Access(stringOf(cp["access"])), Protocol: stringOf(cp["protocol"]),
					Sources:          ix.addresses(cp["sourceAddressPrefix"], cp["sourceAddressPrefixes"]),
					SourcePorts:      rulePorts(cp["sourcePortRange"], cp["sourcePortRanges"]),
					Destinations:     ix.addresses(cp["destinationAddressPrefix"], cp["destinationAddressPrefixes"]),
					DestinationPorts: rulePorts(cp["destinationPortRange"], cp["destinationPortRanges"]),
				})
			}
		}
	}
	ix.groups[k] = g
	return g
}

// addresses resolves a rule side's prefix(es) to prefixes: "*" is every
// address, Internet the configured Internet prefixes outside every
// virtual network, VirtualNetwork every virtual network's address space,
// 168.63.129.16 and the first of dataplane.ProbeSourcesIPv6,
// AzureLoadBalancer the probes' sources (168.63.129.16 and both
// dataplane.ProbeSourcesIPv6; probes only),
// other service tags their configured prefixes (none when not
// configured). Application security groups are not resolved (they match
// nothing).
func (ix *secIndex) addresses(single, plural any) []netip.Prefix {
	values := asList(plural)
	if s := stringOf(single); s != "" {
		values = []any{s}
	}
	var out []netip.Prefix
	for _, v := range values {
		s := stringOf(v)
		if p, ok := parseNSGPrefix(s); ok {
			out = append(out, p)
			continue
		}
		if s == "*" {
			out = append(out, anyPrefixes...)
			continue
		}
		switch addressTagAliases[strings.ToLower(s)] {
		case tagInternet:
			out = append(out, ix.internet...)
		case tagVirtualNetwork:
			out = append(out, ix.vnetSpace...)
			out = append(out, hostVIP, probeIPv6)
		case tagLoadBalancer:
			out = append(out, hostVIP, probeIPv6, probeIPv6NoVnet)
		default:
			ps, _ := ix.e.tagPrefixes(s)
			out = append(out, ps...)
		}
	}
	return out
}

// rulePorts parses a rule side's port range(s).
func rulePorts(single, plural any) []dataplane.PortRange {
	values := asList(plural)
	if s := stringOf(single); s != "" {
		values = []any{s}
	}
	var out []dataplane.PortRange
	for _, v := range values {
		if r, ok := parsePortRange(stringOf(v)); ok {
			out = append(out, r)
		}
	}
	return out
}
