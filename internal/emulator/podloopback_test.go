package emulator

import (
	"net/netip"
	"strings"
	"testing"
)

// PodLoopback maps a pod network onto loopback offset for offset, and a
// map that is not an IPv4 prefix onto a loopback one of the same size is
// refused.
func TestPodLoopback(t *testing.T) {
	m := PrefixMap{From: netip.MustParsePrefix("10.244.77.0/24"), To: netip.MustParsePrefix("127.150.3.0/24")}
	for in, want := range map[string]string{"10.244.77.1": "127.150.3.1", "10.244.77.254": "127.150.3.254"} {
		if got, ok := m.Map(netip.MustParseAddr(in)); !ok || got.String() != want {
			t.Errorf("Map(%s) = %v %v, want %s", in, got, ok, want)
		}
	}
	if got, ok := m.Map(netip.MustParseAddr("10.244.78.1")); ok {
		t.Errorf("Map of an address outside From = %v, want none", got)
	}
	if _, ok := (PrefixMap{}).Map(netip.MustParseAddr("10.244.77.1")); ok {
		t.Error("the zero map mapped an address")
	}
	if err := (Options{PodLoopback: m}).withDefaults().validate(); err != nil {
		t.Errorf("valid map refused: %v", err)
	}
	for name, bad := range map[string]PrefixMap{
		"not loopback":   {From: m.From, To: netip.MustParsePrefix("10.0.0.0/24")},
		"different size": {From: m.From, To: netip.MustParsePrefix("127.150.0.0/16")},
		"no To":          {From: m.From},
		"IPv6":           {From: netip.MustParsePrefix("fd00::/120"), To: netip.MustParsePrefix("127.150.3.0/24")},
	} {
		err := (Options{PodLoopback: bad}).withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), "PodLoopback") {
			t.Errorf("%s: %v, want an error naming PodLoopback", name, err)
		}
	}
}

// A map of two families maps nothing, and New drops an invalid map.
func TestPodLoopbackMixedFamilies(t *testing.T) {
	m := PrefixMap{From: netip.MustParsePrefix("fd00::/120"), To: netip.MustParsePrefix("127.150.3.0/24")}
	if got, ok := m.Map(netip.MustParseAddr("fd00::1")); ok {
		t.Errorf("Map across families = %v", got)
	}
	if e := New(Options{PodLoopback: m}); e.configErr == nil || e.opts.PodLoopback != (PrefixMap{}) {
		t.Errorf("New kept an invalid PodLoopback (%v, %v)", e.configErr, e.opts.PodLoopback)
	}
}
