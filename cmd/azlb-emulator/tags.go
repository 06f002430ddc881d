package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// securityFlags are the data plane's source classification: what the
// Internet service tag stands for, and the prefixes of configured service
// tags.
type securityFlags struct {
	internet string
	tags     map[string][]netip.Prefix
}

func (f *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.internet, "internet-prefixes", emulator.DefaultInternetPrefixes,
		"comma-separated prefixes whose addresses the data plane's security rules count as the Internet service tag, except those inside a virtual network (\"none\": no address)")
	fs.Func("service-tag", "NAME=CIDR[,CIDR...]: a service tag security rules may name, and the source addresses it stands for in the data plane (repeatable)", f.addTag)
}

// addTag parses one --service-tag value.
func (f *securityFlags) addTag(v string) error {
	name, list, ok := strings.Cut(v, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("want NAME=CIDR[,CIDR...], got %q", v)
	}
	ps, err := parsePrefixList(list)
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		return fmt.Errorf("service tag %s: no prefix", name)
	}
	if f.tags == nil {
		f.tags = map[string][]netip.Prefix{}
	}
	for n := range f.tags {
		if strings.EqualFold(n, name) {
			name = n
		}
	}
	f.tags[name] = append(f.tags[name], ps...)
	return nil
}

// internetPrefixes parses --internet-prefixes ("" or "none": none).
func (f *securityFlags) internetPrefixes() ([]netip.Prefix, error) {
	if s := strings.TrimSpace(f.internet); s == "" || strings.EqualFold(s, "none") {
		return []netip.Prefix{}, nil
	}
	ps, err := parsePrefixList(f.internet)
	if err != nil {
		return nil, fmt.Errorf("--internet-prefixes: %w", err)
	}
	return ps, nil
}

// parsePrefixList parses comma-separated CIDRs or addresses.
func parsePrefixList(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR nor an IP address", f)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// networkFlags name the network namespace of real nodes the data plane
// serves beside loopback (docs/data-plane.md, Real nodes).
type networkFlags struct {
	netns, prefixes, probeSource string
}

func (f *networkFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.netns, "data-plane-netns", "", "with --data-plane: a network namespace file (/run/netns/NAME) where frontends and members in --data-plane-prefixes are served as Azure serves VMs: clients' addresses kept, floating IP delivered to the frontend's address")
	fs.StringVar(&f.prefixes, "data-plane-prefixes", "", "comma-separated prefixes served in --data-plane-netns (the public IP range, the nodes' and pods' networks)")
	fs.StringVar(&f.probeSource, "data-plane-probe-source", "", "address health probes come from in --data-plane-netns (bound transparently; e.g. 168.63.129.16, which the nodes route back); default: the namespace's own")
}

// network is the data plane's Network, nil when --data-plane-netns is
// not given.
func (f *networkFlags) network(dataPlane bool) (*dataplane.Network, error) {
	if f.netns == "" {
		if f.prefixes != "" || f.probeSource != "" {
			return nil, fmt.Errorf("--data-plane-prefixes and --data-plane-probe-source need --data-plane-netns")
		}
		return nil, nil
	}
	if !dataPlane {
		return nil, fmt.Errorf("--data-plane-netns needs --data-plane")
	}
	ps, err := parsePrefixList(f.prefixes)
	if err != nil {
		return nil, fmt.Errorf("--data-plane-prefixes: %w", err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("--data-plane-netns needs --data-plane-prefixes")
	}
	n := &dataplane.Network{NetNS: f.netns, Prefixes: ps}
	if f.probeSource != "" {
		if n.ProbeSource, err = netip.ParseAddr(f.probeSource); err != nil {
			return nil, fmt.Errorf("--data-plane-probe-source: %w", err)
		}
	}
	return n, nil
}
