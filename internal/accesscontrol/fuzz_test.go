package accesscontrol

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// FuzzParse: any annotation and range values parse without panicking;
// invalid input never opens a Service to Internet, and every allowed range
// is a valid masked prefix of its family.
func FuzzParse(f *testing.F) {
	f.Add("10.0.0.0/8,2001:db8::/32", "AzureFrontDoor.Backend", "true", "10.0.0.1/24")
	f.Add("", "", "", "")
	f.Add(",,", "a..b", "TRUE", "::/0")
	f.Fuzz(func(t *testing.T, ipRanges, tags, deny, spec string) {
		s := svc(map[string]string{KeyAllowedIPRanges: ipRanges, KeyAllowedServiceTags: tags, KeyDenyAllExceptRanges: deny})
		if spec != "" {
			s = svc(map[string]string{KeyAllowedServiceTags: tags, KeyDenyAllExceptRanges: deny}, strings.Split(spec, ";")...)
		}
		a, err := Parse(s, false, true)
		if err != nil {
			return
		}
		invalid := a.Invalid()
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			for _, src := range a.Sources(fam) {
				for _, x := range src {
					if x == "Internet" && (invalid || a.RangesSet) {
						t.Fatalf("Internet allowed with ranges or invalid input: %+v", a)
					}
					if p, err := netip.ParsePrefix(x); err == nil && (p.Masked() != p || p.Addr().Is4() != (fam == v1.IPv4Protocol)) {
						t.Fatalf("range %s in family %s", x, fam)
					}
				}
			}
		}
		if invalid && !a.DenyAll {
			t.Fatalf("invalid input without deny-all: %+v", a)
		}
	})
}
