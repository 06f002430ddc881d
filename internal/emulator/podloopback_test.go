package emulator

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
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

// A pool's drainPeriodInSeconds reaches its rules when azlb fills the pool,
// and not when a service gateway does: whether Azure applies a drain period
// to a gateway-filled pool is not documented, so a pod address that leaves
// has its flows reset at once (docs/emulator.md, strictest reading).
func TestNoDrainPeriodOnAGatewayFilledPool(t *testing.T) {
	h, _ := secState(t, Options{})
	const pool = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/backendAddressPools/p"
	var doc obj
	if err := json.Unmarshal([]byte(`{"sku":{"name":"Service"},"properties":{
		"backendAddressPools":[{"id":"`+pool+`","properties":{"drainPeriodInSeconds":30}}],
		"loadBalancingRules":[{"id":"r","properties":{"protocol":"Tcp","frontendPort":80,"backendPort":80,"backendAddressPool":{"id":"`+pool+`"}}}]}}`), &doc); err != nil {
		t.Fatal(err)
	}
	pod := dataplane.Member{Pool: pool, Name: "10.244.0.7", Addr: netip.MustParseAddr("10.244.0.7")}
	h.emu.mu.RLock()
	now := h.emu.clock.Now()
	ix := h.emu.securityIndex(now)
	filled := h.emu.lbRules(doc, now, ix, nil)
	gateway := h.emu.lbRules(doc, now, ix, map[string][]dataplane.Member{strings.ToLower(pool): {pod}})
	h.emu.mu.RUnlock()
	if len(filled) != 1 || filled[0].DrainPeriod != 30*time.Second {
		t.Fatalf("a pool azlb fills: %+v, want one rule with a 30s drain period", filled)
	}
	if len(gateway) != 1 || gateway[0].DrainPeriod != 0 || len(gateway[0].Members) != 1 || gateway[0].Members[0].Addr != pod.Addr {
		t.Fatalf("a pool the gateway fills: %+v, want one rule with the pod and no drain period", gateway)
	}
}
