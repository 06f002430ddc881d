package names

import (
	"strings"
	"testing"
)

func TestParseProviderID(t *testing.T) {
	const sub = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute"
	cases := []struct {
		in   string
		want VMRef
		err  string
	}{
		{"azure://" + sub + "/virtualMachineScaleSets/pool1/virtualMachines/3",
			VMRef{Kind: ScaleSetVM, Subscription: "s", ResourceGroup: "rg", ScaleSet: "pool1", Instance: "3"}, ""},
		{"azure://" + sub + "/virtualMachines/vm-1", VMRef{Kind: StandaloneVM, Subscription: "s", ResourceGroup: "rg", Name: "vm-1"}, ""},
		{"AZURE:///subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm-1",
			VMRef{Kind: StandaloneVM, Subscription: "s", ResourceGroup: "rg", Name: "vm-1"}, ""},
		{"", VMRef{}, "no providerID"},
		{"kind://docker/n1", VMRef{}, "not an Azure VM"},
		{"azure://" + sub + "/disks/d1", VMRef{}, "neither"},
		{"azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualMachines/x", VMRef{}, "expected"},
		{"azure://" + sub + "/virtualMachineScaleSets//virtualMachines/3", VMRef{}, "empty segment"},
	}
	for _, tc := range cases {
		got, err := ParseProviderID(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.in, got, err, tc.want)
		}
		if err == nil && !strings.EqualFold(got.ProviderID(), tc.in) {
			t.Errorf("%q does not round-trip: %s", tc.in, got.ProviderID())
		}
	}
}

func TestIPConfigOwner(t *testing.T) {
	vm := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/v/virtualMachines/0"
	nic := "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/n"
	for in, want := range map[string]string{
		vm + "/networkInterfaces/nic/ipConfigurations/ipconfig1": strings.ToLower(vm),
		nic + "/ipConfigurations/ipconfig1":                      strings.ToLower(nic),
		nic:                                                      "",
		"/subscriptions/s/x/ipConfigurations/c":                  "",
	} {
		if got := IPConfigOwner(in); got != want {
			t.Errorf("IPConfigOwner(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseProviderID(f *testing.F) {
	f.Add("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/v/virtualMachines/0")
	f.Add("azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm")
	f.Add("azure://")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseProviderID(s)
		if err != nil {
			return
		}
		again, err := ParseProviderID(r.ProviderID())
		if err != nil || again != r {
			t.Fatalf("%q parsed to %+v, whose providerID %q parses to %+v (%v)", s, r, r.ProviderID(), again, err)
		}
		_ = IPConfigOwner(s)
	})
}
