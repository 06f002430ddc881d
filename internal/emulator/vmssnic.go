package emulator

import (
	"net/http"
	"sort"
	"strings"
)

// The network interfaces of scale set VMs are not top-level resources:
// Microsoft.Network serves read-only views of them under the Compute path
// at api-version 2018-10-01 (.../virtualMachineScaleSets/{v}/networkInterfaces,
// .../virtualMachines/{i}/networkInterfaces/{nic}[/ipConfigurations[/{c}]]).
// They show each ip configuration's private address, subnet and pools, and
// the VM as virtualMachine.

// instanceNICs renders the network interfaces of one scale set VM.
func instanceNICs(v *version) []obj {
	st, _ := v.ext.(*vmState)
	etag := ""
	if st != nil {
		etag = st.nicEtag
	}
	vmID := stringOf(v.doc["id"])
	cfgs := instanceNICConfigs(v.doc)
	ipcs := instanceIPConfigs(v)
	var out []obj
	for _, c := range cfgs {
		co := c.(obj)
		name := stringOf(co["name"])
		nicID := vmID + "/networkInterfaces/" + name
		var mine []any
		for _, ic := range ipcs {
			if strings.HasPrefix(strings.ToLower(stringOf(ic["id"])), strings.ToLower(nicID)+"/ipconfigurations/") {
				x := shallowCopy(ic)
				x["etag"] = etag
				p := shallowCopy(propsOf(ic))
				p["provisioningState"] = "Succeeded"
				x["properties"] = p
				mine = append(mine, x)
			}
		}
		cp := propsOf(co)
		primary, _ := cp["primary"].(bool)
		out = append(out, obj{
			"name": name, "id": nicID, "etag": etag, "type": "Microsoft.Network/networkInterfaces",
			"properties": obj{
				"provisioningState":           "Succeeded",
				"ipConfigurations":            mine,
				"dnsSettings":                 obj{"dnsServers": []any{}, "appliedDnsServers": []any{}},
				"enableAcceleratedNetworking": cp["enableAcceleratedNetworking"],
				"enableIPForwarding":          cp["enableIPForwarding"],
				"primary":                     primary || len(cfgs) == 1,
				"virtualMachine":              ref(vmID),
			},
		})
	}
	return out
}

// listScaleSetNICs answers the network interfaces of every VM of a scale
// set (instance "") or of one.
func (e *Emulator) listScaleSetNICs(c *reqCtx, instance string) {
	g, _, now, ok := e.readComputeEntry(c, resourceKey(typeVMSS, c.rt.name), fullVMSS, c.rt.name)
	if !ok {
		return
	}
	prefix := "vmssvm/" + strings.ToLower(c.rt.name) + "/"
	var keys []string
	for key, en := range g.resources {
		if strings.HasPrefix(key, prefix) && en.cur != nil && en.cur.phaseAt(now) != phaseGone &&
			(instance == "" || key == prefix+instance) {
			keys = append(keys, key)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return instanceLess(keys[i], keys[j]) })
	var vals []any
	for _, k := range keys {
		for _, n := range instanceNICs(g.resources[k].cur) {
			vals = append(vals, n)
		}
	}
	missing := instance != "" && len(keys) == 0
	rg := g.name
	body := mustMarshal(obj{"value": append([]any{}, vals...)})
	e.mu.RUnlock()
	if missing {
		writeARMError(c.w, errResourceNotFound(fullVMSS, c.rt.name+"/virtualMachines/"+instance, rg))
		return
	}
	writeJSON(c.w, http.StatusOK, body)
}

// serveInstanceNIC answers .../virtualMachines/{i}/networkInterfaces[/{nic}[/ipConfigurations[/{c}]]].
func (e *Emulator) serveInstanceNIC(c *reqCtx) {
	extra := c.rt.extra
	if len(extra) == 1 {
		e.listScaleSetNICs(c, c.rt.childName)
		return
	}
	if len(extra) > 4 || len(extra) >= 3 && !strings.EqualFold(extra[2], "ipConfigurations") {
		writeARMError(c.w, errBadPath(c.r.URL.Path))
		return
	}
	_, en, _, ok := e.readComputeEntry(c, vmssVMKey(c.rt.name, c.rt.childName), fullVMSS, c.rt.name+"/virtualMachines/"+c.rt.childName)
	if !ok {
		return
	}
	vmID := stringOf(en.cur.doc["id"])
	var nic obj
	for _, n := range instanceNICs(en.cur) {
		if strings.EqualFold(stringOf(n["name"]), extra[1]) {
			nic = n
		}
	}
	e.mu.RUnlock()
	if nic == nil {
		writeARMError(c.w, errChildNotFound(vmID+"/networkInterfaces/"+extra[1]))
		return
	}
	switch len(extra) {
	case 2:
		c.w.Header()["Etag"] = []string{stringOf(nic["etag"])}
		writeJSON(c.w, http.StatusOK, mustMarshal(nic))
	case 3:
		writeJSON(c.w, http.StatusOK, mustMarshal(obj{"value": propsOf(nic)["ipConfigurations"]}))
	default:
		for _, ic := range asList(propsOf(nic)["ipConfigurations"]) {
			if strings.EqualFold(stringOf(ic.(obj)["name"]), extra[3]) {
				writeJSON(c.w, http.StatusOK, mustMarshal(ic))
				return
			}
		}
		writeARMError(c.w, errChildNotFound(stringOf(nic["id"])+"/ipConfigurations/"+extra[3]))
	}
}
