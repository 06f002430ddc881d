package nicpool

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// The ip configuration that joins a pool: for IPv4 the only one or the one
// marked primary, for IPv6 the IPv6 one; one without properties is
// skipped. The same rule for network interfaces and scale set models.
func TestIPConfigChoice(t *testing.T) {
	type ipc struct {
		name          string
		props, v6, pr bool
	}
	tests := []struct {
		name   string
		cfgs   []ipc
		family v1.IPFamily
		want   string
	}{
		{"the only one, not marked primary", []ipc{{"a", true, false, false}}, v1.IPv4Protocol, "a"},
		{"the primary of two", []ipc{{"a", true, false, false}, {"b", true, false, true}}, v1.IPv4Protocol, "b"},
		{"two, none primary", []ipc{{"a", true, false, false}, {"b", true, false, false}}, v1.IPv4Protocol, ""},
		{"IPv6: the IPv6 one", []ipc{{"a", true, false, true}, {"b", true, true, false}}, v1.IPv6Protocol, "b"},
		{"IPv6: none", []ipc{{"a", true, false, true}}, v1.IPv6Protocol, ""},
		{"IPv4 never takes an IPv6 primary", []ipc{{"a", true, true, true}, {"b", true, false, false}}, v1.IPv4Protocol, ""},
		{"no properties", []ipc{{"a", false, false, false}, {"b", true, false, true}}, v1.IPv4Protocol, "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nic := &armnetwork.Interface{Properties: &armnetwork.InterfacePropertiesFormat{}}
			var ss []*armcompute.VirtualMachineScaleSetIPConfiguration
			for _, c := range tc.cfgs {
				n := &armnetwork.InterfaceIPConfiguration{Name: ptr.To(c.name)}
				s := &armcompute.VirtualMachineScaleSetIPConfiguration{Name: ptr.To(c.name)}
				if c.props {
					n.Properties = &armnetwork.InterfaceIPConfigurationPropertiesFormat{Primary: ptr.To(c.pr)}
					s.Properties = &armcompute.VirtualMachineScaleSetIPConfigurationProperties{Primary: ptr.To(c.pr)}
					if c.v6 {
						n.Properties.PrivateIPAddressVersion = ptr.To(armnetwork.IPVersionIPv6)
						s.Properties.PrivateIPAddressVersion = ptr.To(armcompute.IPVersionIPv6)
					}
				}
				nic.Properties.IPConfigurations = append(nic.Properties.IPConfigurations, n)
				ss = append(ss, s)
			}
			got := ""
			if ic := nicIPConfig(nic, tc.family); ic != nil {
				got = *ic.Name
			}
			if got != tc.want {
				t.Errorf("network interface: %q, want %q", got, tc.want)
			}
			got = ""
			cfgs := []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{IPConfigurations: ss}}}
			if ic := scaleSetIPConfig(cfgs, tc.family); ic != nil {
				got = *ic.Name
			}
			if got != tc.want {
				t.Errorf("scale set: %q, want %q", got, tc.want)
			}
		})
	}
}
