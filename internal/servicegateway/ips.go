package servicegateway

import (
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/azlb/azlb/internal/names"
)

// canonicalIP parses an IP address (IPv4, IPv6 in any case or spelling,
// IPv4-mapped IPv6 as IPv4); zones and anything else fail.
func canonicalIP(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSpace(s))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func isUID(s string) bool { return names.IsUID(s) }

// uidKey is the engine's key of a Service: its lower-cased UID.
func uidKey(u types.UID) string { return names.ServiceUID(u) }
