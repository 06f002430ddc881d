package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/azlb/azlb/internal/emulator"
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
