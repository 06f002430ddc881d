package adminstate

import (
	"slices"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/azlb/azlb/internal/backendpool"
)

func TestSetAdminState(t *testing.T) {
	down, none, up := armnetwork.LoadBalancerBackendAddressAdminStateDown, armnetwork.LoadBalancerBackendAddressAdminStateNone, armnetwork.LoadBalancerBackendAddressAdminStateUp
	tests := []struct {
		name        string
		entries     []addr
		desired     map[string]State
		wantChanged []string
		wantFound   []string
		wantStates  []State // per entry, after
	}{
		{"down on matching entry only", []addr{{"a", "10.0.0.4", ""}, {"b", "10.0.0.5", ""}},
			map[string]State{"10.0.0.4": down}, []string{"10.0.0.4"}, []string{"10.0.0.4"}, []State{down, none}},
		{"unset counts as None", []addr{{"a", "10.0.0.4", ""}},
			map[string]State{"10.0.0.4": none}, nil, []string{"10.0.0.4"}, []State{none}},
		{"restore None", []addr{{"a", "10.0.0.4", down}, {"b", "10.0.0.5", down}},
			map[string]State{"10.0.0.4": none}, []string{"10.0.0.4"}, []string{"10.0.0.4"}, []State{none, down}},
		{"already down, case folded", []addr{{"a", "10.0.0.4", "down"}},
			map[string]State{"10.0.0.4": down}, nil, []string{"10.0.0.4"}, []State{"down"}},
		{"IPv6 compared canonically", []addr{{"a", "fd00:0::0004", ""}},
			map[string]State{"fd00::4": down}, []string{"fd00::4"}, []string{"fd00::4"}, []State{down}},
		{"Up is replaced", []addr{{"a", "10.0.0.4", up}},
			map[string]State{"10.0.0.4": none}, []string{"10.0.0.4"}, []string{"10.0.0.4"}, []State{none}},
		{"no match", []addr{{"a", "10.0.0.4", ""}},
			map[string]State{"10.0.0.9": down}, nil, nil, []State{none}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := &armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
			for _, a := range tc.entries {
				e := &armnetwork.LoadBalancerBackendAddress{Name: to.Ptr(a.name),
					Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(a.ip)}}
				if a.state != "" {
					e.Properties.AdminState = to.Ptr(a.state)
				}
				pool.Properties.LoadBalancerBackendAddresses = append(pool.Properties.LoadBalancerBackendAddresses, e)
			}
			changed, found := setAdminState(pool, tc.desired)
			if !slices.Equal(changed, tc.wantChanged) || !slices.Equal(found, tc.wantFound) {
				t.Fatalf("changed=%v found=%v, want %v %v", changed, found, tc.wantChanged, tc.wantFound)
			}
			for i, e := range pool.Properties.LoadBalancerBackendAddresses {
				if got := backendpool.AdminStateOf(e); got != tc.wantStates[i] {
					t.Errorf("entry %d state %q, want %q", i, got, tc.wantStates[i])
				}
			}
		})
	}
}

func TestSetAdminStateToleratesEmptyPools(t *testing.T) {
	want := map[string]State{"10.0.0.4": armnetwork.LoadBalancerBackendAddressAdminStateDown}
	for _, p := range []*armnetwork.BackendAddressPool{nil, {}, {Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
		LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{nil, {}, {Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{}}},
	}}} {
		if c, f := setAdminState(p, want); len(c) != 0 || len(f) != 0 {
			t.Errorf("setAdminState(%v) = %v, %v; want nothing", p, c, f)
		}
	}
}

// FuzzSetAdminState: arbitrary addresses and states never panic, only
// entries whose address is desired change, and they end in the desired
// state; an entry without an address is left alone.
func FuzzSetAdminState(f *testing.F) {
	f.Add("10.0.0.4", "10.0.0.4", "Down", "")
	f.Add("fd00::0004", "FD00::4", "None", "Down")
	f.Add("not-an-ip", "NOT-AN-IP", "Up", "down")
	f.Add("", "", "", "")
	f.Fuzz(func(t *testing.T, entryIP, wantIP, wantState, have string) {
		e := &armnetwork.LoadBalancerBackendAddress{Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr(entryIP)}}
		if have != "" {
			e.Properties.AdminState = to.Ptr(State(have))
		}
		other := &armnetwork.LoadBalancerBackendAddress{Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("192.0.2.1")}}
		pool := &armnetwork.BackendAddressPool{Properties: &armnetwork.BackendAddressPoolPropertiesFormat{
			LoadBalancerBackendAddresses: []*armnetwork.LoadBalancerBackendAddress{e, nil, other}}}
		want := map[string]State{backendpool.CanonicalIP(wantIP): State(wantState)}
		changed, found := setAdminState(pool, want)
		if len(changed) > len(found) {
			t.Fatalf("changed %v not within found %v", changed, found)
		}
		// An entry with no address (empty or blank) has no key and is never
		// matched, whatever is desired for the empty key.
		key := backendpool.EntryKey(e)
		matches := key != "" && key == backendpool.CanonicalIP(wantIP)
		unsetIsNone := wantState == "" && backendpool.AdminStateOf(e) == armnetwork.LoadBalancerBackendAddressAdminStateNone
		if matches && !sameState(backendpool.AdminStateOf(e), State(wantState)) && !unsetIsNone {
			t.Fatalf("entry state %q, want %q", backendpool.AdminStateOf(e), wantState)
		}
		if !matches && len(changed) > 0 && backendpool.CanonicalIP(wantIP) != "192.0.2.1" {
			t.Fatalf("changed %v without a matching entry", changed)
		}
		if backendpool.CanonicalIP(wantIP) != "192.0.2.1" && other.Properties.AdminState != nil {
			t.Fatal("untouched entry changed")
		}
	})
}
