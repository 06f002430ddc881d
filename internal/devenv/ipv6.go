package devenv

import "net/netip"

// LoopbackIPv6CIDR is the IPv6 counterpart of 127.0.0.0/8 for the
// emulator's data plane: hack/ipv6-loopback.sh (which `make test-e2e` and
// `make sandbox` run) routes it to the loopback device
// (`ip -6 route add local fd00:10::/32 dev lo table local`), so that
// internal IPv6 frontends and nodes' IPv6 addresses in it can carry
// traffic on this machine (dataplane.Loopback). It holds the IPv6 space of
// LoopbackNetwork (VnetCIDRv6) and of the tests' DualStackNodeNetwork.
// It is deliberately narrow: a whole fd00::/8 would take over unique local
// networks a machine may really be on.
const LoopbackIPv6CIDR = "fd00:10::/32"

// DualStackNodeNetwork is NodeNetwork with an IPv6 prefix of the test's
// own: a virtual network and subnet of exactly p4 and p6. With p6 inside
// LoopbackIPv6CIDR, internal IPv6 frontends (allocated from it) and the
// nodes' IPv6 addresses in it carry traffic through the data plane, and
// addresses of p6 are VirtualNetwork to the network security groups.
func DualStackNodeNetwork(p4, p6 netip.Prefix) Network {
	return Network{VnetPrefixes: []string{p4.String(), p6.String()}, SubnetPrefixes: []string{p4.String(), p6.String()}}
}
