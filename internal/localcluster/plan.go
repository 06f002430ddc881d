package localcluster

import (
	"fmt"
	"net/netip"
)

// MaxSlots is how many clusters can run on one machine at once.
const MaxSlots = 4

// ProbeSource is the address the emulated load balancer's health probes
// come from, as Azure's (168.63.129.16): the nodes route it to the load
// balancer's namespace.
var ProbeSource = netip.MustParseAddr("168.63.129.16")

// Plan is the address plan of the cluster in one slot. Every range is
// private or reserved for documentation and benchmarking, and routed only
// between the cluster's namespaces and the host.
type Plan struct {
	Slot int
	// NodeNet is the nodes' network (the emulated virtual network's
	// subnet): the host is its first address, the load balancer's
	// namespace its second, nodes from the fourth (as Azure reserves the
	// first addresses of a subnet).
	NodeNet netip.Prefix
	// PodNet holds one /24 per node.
	PodNet netip.Prefix
	// Public is the range of the emulated public IPs (Services' frontends).
	Public netip.Prefix
	// ClientNet links the host to the load balancer's client side: the host
	// is ClientIP, the load balancer LBClientIP.
	ClientNet            netip.Prefix
	ClientIP, LBClientIP netip.Addr
	HostIP, LBNodeIP     netip.Addr
	Nodes                []NodePlan
	ServiceCIDR          netip.Prefix
	ClusterDNS           netip.Addr
	HostLink, ClientLink string // the host's two links
	fabric, lb           string
}

// NodePlan is one node's place in the plan.
type NodePlan struct {
	// Name is the node's (and its VM's) name.
	Name string
	IP   netip.Addr
	// PodCIDR is the range its pods get addresses from.
	PodCIDR netip.Prefix
	// NetNS is the name of its network namespace file under <dir>/netns.
	NetNS string
}

// NewPlan is the plan of slot with n nodes.
func NewPlan(slot, n int) (Plan, error) {
	if slot < 0 || slot >= MaxSlots {
		return Plan{}, fmt.Errorf("slot %d: want 0 to %d", slot, MaxSlots-1)
	}
	if n < 1 || n > 200 {
		return Plan{}, fmt.Errorf("%d nodes: want 1 to 200", n)
	}
	s := byte(slot)
	p := Plan{
		Slot:        slot,
		NodeNet:     netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 224 + s, 0, 0}), 16),
		PodNet:      netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244 + s, 0, 0}), 16),
		Public:      netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, s, 0}), 24),
		ClientNet:   netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, s, 0}), 24),
		ClientIP:    netip.AddrFrom4([4]byte{198, 19, s, 1}),
		LBClientIP:  netip.AddrFrom4([4]byte{198, 19, s, 254}),
		HostIP:      netip.AddrFrom4([4]byte{10, 224 + s, 0, 1}),
		LBNodeIP:    netip.AddrFrom4([4]byte{10, 224 + s, 0, 2}),
		ServiceCIDR: netip.MustParsePrefix("10.96.0.0/16"),
		HostLink:    fmt.Sprintf("azlb%dh", slot),
		ClientLink:  fmt.Sprintf("azlb%dc", slot),
		fabric:      "fabric",
		lb:          "lb",
	}
	p.ClusterDNS = p.HostIP
	for i := range n {
		p.Nodes = append(p.Nodes, NodePlan{
			Name:    fmt.Sprintf("aks-nodepool1-%d", i),
			IP:      netip.AddrFrom4([4]byte{10, 224 + s, byte((i + 4) / 256), byte((i + 4) % 256)}),
			PodCIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244 + s, byte(i + 1), 0}), 24),
			NetNS:   fmt.Sprintf("node%d", i),
		})
	}
	return p, nil
}

// Ranges are every range the plan routes from the host: none may overlap
// a route or address the machine already has.
func (p Plan) Ranges() []netip.Prefix {
	return []netip.Prefix{p.NodeNet, p.PodNet, p.Public, p.ClientNet}
}
