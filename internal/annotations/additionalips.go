package annotations

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// parseAdditionalIPs reads azure-additional-public-ips: a comma-separated
// list of IP addresses. Items are trimmed and blank ones skipped (as the
// Azure cloud provider has long done: "1.2.3.4, 5.6.7.8," is two
// addresses); an item that is not a plain IPv4 or IPv6 address is an
// Error quoting the whole value and naming the item. A blank value lists
// nothing.
func parseAdditionalIPs(key, value string) ([]netip.Addr, *Error) {
	out, bad, why := splitAdditionalIPs(value)
	if bad != "" {
		return nil, &Error{Key: key, Value: value, Rule: fmt.Sprintf("lists %s, which %s: list IPv4 or IPv6 addresses separated by commas", quoteValue(bad), why)}
	}
	return out, nil
}

// splitAdditionalIPs returns the valid addresses of the list, de-duplicated,
// and the first item that is not one, with why.
func splitAdditionalIPs(value string) (valid []netip.Addr, bad, why string) {
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		a, err := netip.ParseAddr(item)
		w := ""
		switch {
		case err != nil:
			w = "is not an IP address"
		case a.Zone() != "":
			w = "carries an IPv6 zone"
		case a.Is4In6():
			w = "is an IPv4-mapped IPv6 address (write the IPv4 address)"
		case a.IsUnspecified():
			w = "is the unspecified address"
		}
		if w != "" {
			if bad == "" {
				bad, why = item, w
			}
			continue
		}
		if !slices.Contains(valid, a) {
			valid = append(valid, a)
		}
	}
	return valid, bad, why
}

// ListedAdditionalIPs are the addresses the Service's
// azure-additional-public-ips lists validly, even when another item of it
// is invalid (and Parse refuses the Service): a refused Service keeps the
// extra destinations it still lists (the NSG collection and azlb verify
// read them so).
func ListedAdditionalIPs(svc *v1.Service) []netip.Addr {
	if svc == nil {
		return nil
	}
	v, ok := svc.Annotations[KeyAdditionalPublicIPs]
	if !ok {
		return nil
	}
	valid, _, _ := splitAdditionalIPs(v)
	return valid
}

// AdditionalIPsOf are the azure-additional-public-ips addresses of one
// family, as strings, in annotation order.
func (s *ServiceSpec) AdditionalIPsOf(fam v1.IPFamily) []string {
	var out []string
	for _, a := range s.AdditionalPublicIPs {
		if a.Is4() == (fam == v1.IPv4Protocol) {
			out = append(out, a.String())
		}
	}
	return out
}
