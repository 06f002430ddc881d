package annotations

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// azure-additional-public-ips: items trimmed, blank items skipped,
// duplicates once, both families; an item that is not an address refuses
// the Service with an error naming the key, the value and the item.
func TestAdditionalPublicIPs(t *testing.T) {
	for _, tc := range []struct {
		value   string
		want    string // addresses joined by " "
		wantErr string
	}{
		{value: "", want: ""},
		{value: " , ", want: ""},
		{value: "203.0.113.20", want: "203.0.113.20"},
		{value: " 1.2.3.4, 2.3.4.5 ,,", want: "1.2.3.4 2.3.4.5"},
		{value: "10.20.0.1,192.168.0.1,2c0f:fe40:8000::1,2c0f:feb0::4", want: "10.20.0.1 192.168.0.1 2c0f:fe40:8000::1 2c0f:feb0::4"},
		{value: "1.2.3.4,1.2.3.4, 2001:DB8::1,2001:db8::1", want: "1.2.3.4 2001:db8::1"},
		{value: "invalid", wantErr: `lists "invalid", which is not an IP address`},
		{value: "1.2.3.4, 10.0.0.0/8", wantErr: `lists "10.0.0.0/8", which is not an IP address`},
		{value: "1.2.3.4;5.6.7.8", wantErr: `lists "1.2.3.4;5.6.7.8", which is not an IP address`},
		{value: "fe80::1%eth0", wantErr: "carries an IPv6 zone"},
		{value: "::ffff:1.2.3.4", wantErr: "IPv4-mapped"},
		{value: "0.0.0.0", wantErr: "unspecified"},
	} {
		ann := map[string]string{KeyAdditionalPublicIPs: tc.value}
		spec, err := Parse(newService(ann))
		if tc.wantErr != "" {
			leaves := checkLeaves(t, err, ann)
			if len(leaves) != 1 || leaves[0].Key != KeyAdditionalPublicIPs || leaves[0].Value != tc.value || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one naming %s and %q", tc.value, err, KeyAdditionalPublicIPs, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.value, err)
			continue
		}
		var got []string
		for _, a := range spec.AdditionalPublicIPs {
			got = append(got, a.String())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%q: AdditionalPublicIPs %v, want %s", tc.value, got, tc.want)
		}
		if len(spec.Unsupported) != 0 {
			t.Errorf("%q: Unsupported %v", tc.value, spec.Unsupported)
		}
	}
	// What a refused Service still lists validly.
	if got := ListedAdditionalIPs(newService(map[string]string{KeyAdditionalPublicIPs: "1.2.3.4, nope,2001:db8::1,1.2.3.4,fe80::1%eth0"})); len(got) != 2 ||
		got[0].String() != "1.2.3.4" || got[1].String() != "2001:db8::1" {
		t.Errorf("ListedAdditionalIPs = %v", got)
	}
	spec, err := Parse(newService(map[string]string{KeyAdditionalPublicIPs: "2001:db8::1,1.2.3.4,5.6.7.8"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(spec.AdditionalIPsOf(v1.IPv4Protocol), " "); got != "1.2.3.4 5.6.7.8" {
		t.Errorf("IPv4: %s", got)
	}
	if got := strings.Join(spec.AdditionalIPsOf(v1.IPv6Protocol), " "); got != "2001:db8::1" {
		t.Errorf("IPv6: %s", got)
	}
}

// checkAdditionalIPs is the fuzz invariant: every address is a plain,
// specified address, listed once.
func checkAdditionalIPs(t *testing.T, ips []netip.Addr) {
	t.Helper()
	seen := map[netip.Addr]bool{}
	for _, a := range ips {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() || seen[a] {
			t.Fatalf("azure-additional-public-ips gave %v", ips)
		}
		seen[a] = true
	}
}
