package emulator

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// The address tags every NSG understands (ARM and classic spellings),
// compared case-insensitively.
const (
	tagInternet       = "internet"
	tagVirtualNetwork = "virtualnetwork"
	tagLoadBalancer   = "azureloadbalancer"
)

// addressTagAliases maps the lower-cased spellings of the three built-in
// tags to their canonical (lower-cased) names.
var addressTagAliases = map[string]string{
	"internet": tagInternet, "virtualnetwork": tagVirtualNetwork, "azureloadbalancer": tagLoadBalancer,
	"virtual_network": tagVirtualNetwork, "azure_loadbalancer": tagLoadBalancer,
}

// isBuiltinAddressTag reports whether name is Internet, VirtualNetwork or
// AzureLoadBalancer in any spelling.
func isBuiltinAddressTag(name string) bool {
	_, ok := addressTagAliases[strings.ToLower(name)]
	return ok
}

// serviceTags lists the service tags the emulator accepts in security
// rules besides the built-in three and the configured ones. Those marked
// regional are also accepted with a region suffix ("Storage.EastUS").
var serviceTags = map[string]bool{ // lower-cased name -> regional
	"azurecloud": true, "storage": true, "sql": true, "azuremonitor": true, "eventhub": true, "servicebus": true,
	"appservice": true, "apimanagement": true, "azurecontainerregistry": true, "azurekeyvault": true,
	"azurecosmosdb": true, "azurebackup": true, "datafactory": true, "hdinsight": true, "batchnodemanagement": true, //nolint:misspell // the HDInsight service tag
	"azuremachinelearning": true, "microsoftcontainerregistry": true, "azureconnectors": true, "logicapps": true,
	"azurefrontdoor.backend": false, "azurefrontdoor.frontend": false, "azurefrontdoor.firstparty": false,
	"azuretrafficmanager": false, "gatewaymanager": false, "azureactivedirectory": false, "azureresourcemanager": false,
	"azureplatformdns": false, "azureplatformimds": false, "azureplatformlkm": false, "guestandhybridmanagement": false,
	"azureupdatedelivery": false, "azurebotservice": false, "azuredevops": false, "powerplatforminfra": false,
	"azurearcinfrastructure": false, "azuresiterecovery": false, "azuredatabricks": false, "azurecognitivesearch": false,
	"applicationinsightsavailability": false, "actiongroup": false, "windowsvirtualdesktop": false,
}

// validTagName reports whether s can name a configured service tag.
func validTagName(s string) bool {
	if s == "" || len(s) > 80 || !isLetter(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isLetter(c) && !isDigit(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// knownTag reports whether s names a service tag the emulator knows: a
// built-in one, a configured one, or one of serviceTags (with a region
// suffix for regional ones).
func (e *Emulator) knownTag(s string) bool {
	l := strings.ToLower(s)
	if _, ok := addressTagAliases[l]; ok {
		return true
	}
	if _, ok := e.tagPrefixes(s); ok {
		return true
	}
	if _, ok := serviceTags[l]; ok {
		return true
	}
	base, region, ok := strings.Cut(l, ".")
	if !ok || region == "" || !serviceTags[base] {
		return false
	}
	for i := 0; i < len(region); i++ {
		if !isLetter(region[i]) && !isDigit(region[i]) {
			return false
		}
	}
	return true
}

// tagPrefixes returns the configured prefixes of a service tag.
func (e *Emulator) tagPrefixes(name string) ([]netip.Prefix, bool) {
	for n, ps := range e.opts.ServiceTags {
		if strings.EqualFold(n, name) {
			return ps, true
		}
	}
	return nil, false
}

// parseNSGPrefix parses an address prefix of a security rule: an IP
// address or a CIDR in canonical form (no host bits set), without zone.
func parseNSGPrefix(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() || p.Masked() != p {
			return netip.Prefix{}, false
		}
		return p, true
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}

// parsePortRange parses a port range of a security rule: "*", a port
// "N" or a range "A-B" with A <= B, ports 0 to 65535, in decimal without
// sign, spaces or leading zeros beyond a single "0".
func parsePortRange(s string) (dataplane.PortRange, bool) {
	if s == "*" {
		return dataplane.AllPorts, true
	}
	a, b, isRange := strings.Cut(s, "-")
	from, ok := parsePort(a)
	if !ok {
		return dataplane.PortRange{}, false
	}
	if !isRange {
		return dataplane.PortRange{From: from, To: from}, true
	}
	to, ok := parsePort(b)
	if !ok || to < from {
		return dataplane.PortRange{}, false
	}
	return dataplane.PortRange{From: from, To: to}, true
}

func parsePort(s string) (uint16, bool) {
	if s == "" || len(s) > 5 || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > 65535 {
		return 0, false
	}
	return uint16(n), true
}

// subtractPrefixes returns the addresses of base that are in none of
// remove, as prefixes.
func subtractPrefixes(base, remove []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(base))
	for _, b := range base {
		out = append(out, b.Masked())
	}
	for _, r := range remove {
		r = r.Masked()
		next := out[:0:0]
		for _, b := range out {
			next = append(next, subtractPrefix(b, r)...)
		}
		out = next
	}
	return out
}

// subtractPrefix returns a minus r.
func subtractPrefix(a, r netip.Prefix) []netip.Prefix {
	if !a.Overlaps(r) {
		return []netip.Prefix{a}
	}
	if r.Bits() <= a.Bits() {
		return nil // r covers a
	}
	// r lies inside a: split a in halves, keep the one without r.
	lo, hi := halves(a)
	if lo.Contains(r.Addr()) {
		return append(subtractPrefix(lo, r), hi)
	}
	return append([]netip.Prefix{lo}, subtractPrefix(hi, r)...)
}

// halves splits a prefix into its two halves (a has fewer bits than its
// address length).
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits)
	b := p.Addr().AsSlice()
	b[p.Bits()/8] |= 0x80 >> (p.Bits() % 8)
	a, _ := netip.AddrFromSlice(b)
	return lo, netip.PrefixFrom(a, bits)
}
