package emulator

import (
	"net/http"
	"strings"
	"testing"
)

// A scale set model whose network interface or ip configurations are not
// a list of uniquely named objects is refused with 400 InvalidParameter
// naming the element, and nothing is created.
func TestScaleSetNetworkConfigurationsNeedUniqueNames(t *testing.T) {
	subnet := netID("rg", "virtualNetworks", "vnet") + "/subnets/nodes"
	ipc := func(name string) string {
		return `{"name":"` + name + `","properties":{"primary":true,"subnet":{"id":"` + subnet + `"}}}`
	}
	nic := func(name, ipcs string) string {
		return `{"name":"` + name + `","properties":{"primary":true,"ipConfigurations":[` + ipcs + `]}}`
	}
	vmss := func(nics string) string {
		return `{"location":"eastus","sku":{"name":"Standard_D2s_v3","capacity":1},"properties":{"upgradePolicy":{"mode":"Manual"},` +
			`"virtualMachineProfile":{"osProfile":{"computerNamePrefix":"ss"},"networkProfile":{"networkInterfaceConfigurations":[` + nics + `]}}}}`
	}
	for _, tc := range []struct{ name, body, message string }{
		{"nic twice", vmss(nic("nic", ipc("a")) + "," + nic("NIC", ipc("b"))), "Network interface configuration name 'NIC' is used twice."},
		{"nic unnamed", vmss(nic("", ipc("a"))), "Network interface configuration properties.virtualMachineProfile.networkProfile.networkInterfaceConfigurations[0] needs a name."},
		{"nic not an object", vmss(`7`), "must be an object, got number."},
		{"ip configuration twice", vmss(nic("nic", ipc("a")+","+ipc("A"))), "Ip configuration name 'A' is used twice."},
		{"ip configuration unnamed", vmss(nic("nic", ipc(""))), "ipConfigurations[0] needs a name."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := seedHandler(t)
			p := computePath("rg", "virtualMachineScaleSets/ss")
			rec := h.do(t, http.MethodPut, p, tc.body, nil)
			if rec.Code != http.StatusBadRequest || errCodeOf(rec) != "InvalidParameter" || !strings.Contains(rec.Body.String(), tc.message) {
				t.Fatalf("status %d, body %s; want 400 InvalidParameter with %q", rec.Code, rec.Body, tc.message)
			}
			h.mustDo(t, http.StatusNotFound, http.MethodGet, p, "")
		})
	}
}
