package emulator

import (
	"net/http"
	"regexp"
	"strings"
	"time"
)

var (
	vmSpec = &kindSpec{typ: typeVM, fullType: fullVM, render: renderVM, onDelete: func(wc *writeCtx, v *version) { onDeleteVM(wc, v, nil) }}
	vmKind = &computeKind{spec: vmSpec, typ: typeVM, full: fullVM, normalize: normalizeVM,
		etagEveryPut: true, noAsyncOnUpdate: true, etagAt: vmEtagAt}
	avSetSpec = &kindSpec{typ: typeAvSet, fullType: fullAvSet, render: renderAvSet}
	avSetKind = &computeKind{spec: avSetSpec, typ: typeAvSet, full: fullAvSet, normalize: normalizeAvSet, synchronous: true}
)

// vmEtagAt: a VM's etag moves once more when its creation completes (its
// OS disk gets its id), as recorded ("1" in the create response, "2" on
// the next GET).
func vmEtagAt(v *version, ph phase) string {
	if v.creating && ph != phaseUpdating && ph != phaseFailed {
		return computeEtag(etagNumber(v.etag) + 1)
	}
	return v.etag
}

func renderVM(v *version, ph phase) obj {
	out := renderCompute(v, ph)
	out["etag"] = vmEtagAt(v, ph)
	if v.creating && ph == phaseUpdating {
		// The managed OS disk has no id until the VM is created.
		p := propsOf(out)
		sp := shallowCopy(p["storageProfile"].(obj))
		d := shallowCopy(sp["osDisk"].(obj))
		md := shallowCopy(d["managedDisk"].(obj))
		delete(md, "id")
		d["managedDisk"], sp["osDisk"], p["storageProfile"] = md, d, sp
	}
	return out
}

// serveVM dispatches the virtual machine routes.
func (e *Emulator) serveVM(c *reqCtx) {
	rt := c.rt
	m := c.r.Method
	switch rt.kind {
	case routeTypeList, routeSubTypeList:
		if m != http.MethodGet {
			methodNotAllowed(c)
			return
		}
		keep, ae := vmListFilter(c.r.URL.Query().Get("$filter"))
		if ae != nil {
			writeARMError(c.w, ae)
			return
		}
		e.listCompute(c, vmKind, "virtualmachines/", nil, keep, expandInstanceView(c))
	case routeResource:
		key := resourceKey(typeVM, rt.name)
		switch m {
		case http.MethodGet:
			e.getCompute(c, vmKind, key, rt.name, expandInstanceView(c))
		case http.MethodPut:
			e.putCompute(c, vmKind, key, rt.name, true, nil)
		case http.MethodDelete:
			e.deleteCompute(c, vmKind, key, nil, onDeleteVM)
		default:
			methodNotAllowed(c)
		}
	case routeChildList:
		key := resourceKey(typeVM, rt.name)
		switch {
		case strings.EqualFold(rt.childType, "instanceView") && m == http.MethodGet:
			e.getInstanceView(c, vmKind, key, rt.name, false)
		case canonicalAction(rt.childType) != "" && m == http.MethodPost:
			e.powerAction(c, vmKind, key, canonicalAction(rt.childType))
		default:
			writeARMError(c.w, errBadPath(c.r.URL.Path))
		}
	default:
		writeARMError(c.w, errBadPath(c.r.URL.Path))
	}
}

// vmssFilter is the one $filter the VM list understands (as the Azure
// cloud provider uses it).
var vmssFilter = regexp.MustCompile(`(?i)^\s*'virtualMachineScaleSet/id'\s+eq\s+'([^']*)'\s*$`)

func vmListFilter(f string) (func(*version) bool, *armError) {
	if f == "" {
		return nil, nil
	}
	m := vmssFilter.FindStringSubmatch(f)
	if m == nil {
		return nil, errInvalidParameter("$filter", "The $filter '%s' is not supported; only 'virtualMachineScaleSet/id' eq '<id>' is.", f)
	}
	return func(v *version) bool {
		r, _ := propsOf(v.doc)["virtualMachineScaleSet"].(obj)
		return strings.EqualFold(stringOf(r["id"]), m[1])
	}, nil
}

// normalizeVM validates a VM PUT (merged into the current VM).
func normalizeVM(wc *writeCtx, in obj, name string, cur *version) (obj, any, *armError) {
	doc, props, ae := computeBase(wc, in, typeVM, fullVM, name, cur)
	if ae != nil {
		return nil, nil, ae
	}
	id := stringOf(doc["id"])
	loc := stringOf(doc["location"])
	if idn, err := getObj(in, "identity", ""); err != nil {
		return nil, nil, errInvalidParameter("identity", "%v", err)
	} else if idn != nil && !strings.EqualFold(stringOf(idn["type"]), "None") {
		doc["identity"] = deepCopy(idn)
	}
	hp, err := getObj(props, "hardwareProfile", "properties")
	if err != nil || hp == nil || stringOf(hp["vmSize"]) == "" {
		return nil, nil, errInvalidParameter("properties.hardwareProfile.vmSize", "The VM needs properties.hardwareProfile.vmSize.")
	}
	sp, windows, ae := normStorageProfile(props, "properties", true)
	if ae != nil {
		return nil, nil, ae
	}
	img := sp["imageReference"].(obj)
	img["exactVersion"] = exactVersion(windows)
	disk := sp["osDisk"].(obj)
	if stringOf(disk["name"]) == "" {
		disk["name"] = name + "_OsDisk_1_" + strings.ReplaceAll(wc.e.ids.uuid(), "-", "")
	}
	md := disk["managedDisk"].(obj)
	md["id"] = "/subscriptions/" + wc.s.id + "/resourceGroups/" + wc.g.name + "/providers/Microsoft.Compute/disks/" + stringOf(disk["name"])
	setDefault(sp, "dataDisks", []any{})
	props["storageProfile"] = sp
	osp, ae := normOSProfile(props, "properties", windows, true)
	if ae != nil {
		return nil, nil, ae
	}
	if stringOf(osp["computerName"]) == "" {
		osp["computerName"] = name
	}
	props["osProfile"] = osp

	nics, ae := wc.normVMNICs(props, id, loc, cur)
	if ae != nil {
		return nil, nil, ae
	}
	props["networkProfile"] = obj{"networkInterfaces": nics}
	for _, rr := range []struct{ key, typ string }{{"availabilitySet", typeAvSet}, {"virtualMachineScaleSet", typeVMSS}} {
		rid, has, err := getRef(props, rr.key, "properties")
		if err != nil {
			return nil, nil, errInvalidParameter("properties."+rr.key, "%v", err)
		}
		var old string
		if cur != nil {
			if r, ok := propsOf(cur.doc)[rr.key].(obj); ok {
				old = stringOf(r["id"])
			}
		}
		if !has {
			if old != "" {
				props[rr.key] = ref(old)
			}
			continue
		}
		_, v := wc.lookupKind(rid, rr.typ)
		if v == nil || stringOf(v.doc["location"]) != loc {
			return nil, nil, errInvalidReference(rid, id)
		}
		canon := stringOf(v.doc["id"])
		if cur != nil && !strings.EqualFold(old, canon) {
			return nil, nil, crpError(http.StatusBadRequest, "OperationNotAllowed",
				"Changing property '%s.id' of VM %s is not allowed.", rr.key, id)
		}
		if rr.typ == typeVMSS && stringOf(propsOf(v.doc)["orchestrationMode"]) != "Flexible" {
			return nil, nil, errInvalidParameter("properties.virtualMachineScaleSet",
				"Scale set %s is not Flexible; only Flexible scale sets take standalone VMs.", canon)
		}
		props[rr.key] = ref(canon)
	}
	if cur != nil {
		props["vmId"] = propsOf(cur.doc)["vmId"]
		props["timeCreated"] = propsOf(cur.doc)["timeCreated"]
	} else {
		props["vmId"] = wc.e.ids.uuid()
		props["timeCreated"] = timeString(wc.now)
	}
	doc["properties"] = props
	st := &vmState{power: "running"}
	if cur != nil {
		if s, ok := cur.ext.(*vmState); ok {
			st = s
		}
	}
	var oldNICs []string
	if cur != nil {
		oldNICs = vmNICIDs(cur.doc)
	}
	newNICs := vmNICIDs(doc)
	wc.after(func() {
		for _, n := range oldNICs {
			if !containsFold(newNICs, n) {
				wc.setNICVM(n, "")
			}
		}
		for _, n := range newNICs {
			wc.setNICVM(n, id)
		}
	})
	return doc, st, nil
}

// normVMNICs validates networkProfile.networkInterfaces: existing NICs in
// the VM's location, attached to no other VM, exactly one primary when
// there are several.
func (wc *writeCtx) normVMNICs(props obj, id, loc string, cur *version) ([]any, *armError) {
	np, err := getObj(props, "networkProfile", "properties")
	if err != nil || np == nil {
		return nil, errInvalidParameter("properties.networkProfile", "The VM needs properties.networkProfile.networkInterfaces.")
	}
	arr, _, err := getArr(np, "networkInterfaces", "properties.networkProfile")
	if err != nil || len(arr) == 0 {
		return nil, errInvalidParameter("properties.networkProfile.networkInterfaces", "The VM needs at least one network interface.")
	}
	out := make([]any, 0, len(arr))
	primaries := 0
	for i, el := range arr {
		p := indexPath("properties.networkProfile.networkInterfaces", i)
		n, ok := el.(map[string]any)
		if !ok {
			return nil, errInvalidParameter(p, "%s must be an object.", p)
		}
		nid, _, err := getStr(n, "id", p)
		if err != nil || nid == "" {
			return nil, errInvalidParameter(p+".id", "A network interface reference needs an id.")
		}
		_, v := wc.lookupKind(nid, "networkInterfaces")
		if v == nil || stringOf(v.doc["location"]) != loc {
			return nil, errInvalidReference(nid, id)
		}
		canon := stringOf(v.doc["id"])
		if r, ok := propsOf(v.doc)["virtualMachine"].(obj); ok && !strings.EqualFold(stringOf(r["id"]), id) {
			return nil, nrpError(http.StatusBadRequest, "NicInUse",
				"Network interface %s is used by existing resource %s and cannot be attached to %s.", canon, stringOf(r["id"]), id)
		}
		item := obj{"id": canon}
		if np, err := getObj(n, "properties", p); err != nil {
			return nil, errInvalidParameter(p+".properties", "%v", err)
		} else if np != nil {
			if prim, _, err := getBool(np, "primary", p+".properties"); err != nil {
				return nil, errInvalidParameter(p+".properties.primary", "%v", err)
			} else if prim {
				primaries++
			}
			item["properties"] = deepCopy(np)
		}
		out = append(out, item)
	}
	if len(out) > 1 && primaries != 1 {
		return nil, errInvalidParameter("properties.networkProfile.networkInterfaces", "Exactly one network interface must be primary when a VM has %d.", len(out))
	}
	return out, nil
}

// vmNICIDs lists the NIC ids a VM document names.
func vmNICIDs(doc obj) []string {
	np, _ := propsOf(doc)["networkProfile"].(obj)
	var out []string
	for _, n := range asList(np["networkInterfaces"]) {
		out = append(out, stringOf(n.(obj)["id"]))
	}
	return out
}

// nicState is what a NIC remembers besides its document.
type nicState struct {
	// attachedOnce: a VM used the NIC at some point (its DELETE then
	// answers 202, as recorded after the VM was deleted).
	attachedOnce bool
}

// setNICVM sets (vmID != "") or clears a NIC's virtualMachine
// back-reference.
func (wc *writeCtx) setNICVM(nicID, vmID string) {
	en, v := wc.lookupKind(nicID, "networkInterfaces")
	if v == nil {
		return
	}
	p := propsOf(v.doc)
	cur := ""
	if r, ok := p["virtualMachine"].(obj); ok {
		cur = stringOf(r["id"])
	}
	if strings.EqualFold(cur, vmID) {
		return
	}
	np := shallowCopy(p)
	if vmID == "" {
		delete(np, "virtualMachine")
	} else {
		np["virtualMachine"] = ref(vmID)
	}
	doc := shallowCopy(v.doc)
	doc["properties"] = np
	wc.replace(en, doc)
	en.cur.ext = &nicState{attachedOnce: true}
}

// onDeleteVM detaches the VM's NICs (they stay, with their pool
// memberships).
func onDeleteVM(wc *writeCtx, v *version, _ *operation) {
	for _, n := range vmNICIDs(v.doc) {
		wc.setNICVM(n, "")
	}
}

func renderAvSet(v *version, _ phase) obj { return shallowCopy(v.doc) }

// serveAvSet dispatches the availability set routes.
func (e *Emulator) serveAvSet(c *reqCtx) {
	rt := c.rt
	m := c.r.Method
	members := func(tree obj, v *version, now time.Time) {
		p := shallowCopy(propsOf(tree))
		p["virtualMachines"] = e.avSetMembers(stringOf(v.doc["id"]), now)
		tree["properties"] = p
	}
	switch rt.kind {
	case routeTypeList, routeSubTypeList:
		if m != http.MethodGet {
			methodNotAllowed(c)
			return
		}
		e.listCompute(c, avSetKind, "availabilitysets/", nil, nil, members)
	case routeResource:
		key := resourceKey(typeAvSet, rt.name)
		switch m {
		case http.MethodGet:
			e.getCompute(c, avSetKind, key, rt.name, members)
		case http.MethodPut:
			e.putCompute(c, avSetKind, key, rt.name, true, nil)
		case http.MethodDelete:
			e.deleteCompute(c, avSetKind, key, func(wc *writeCtx, v *version) *armError {
				if vms := e.avSetMembers(stringOf(v.doc["id"]), wc.now); len(vms) > 0 {
					return crpError(http.StatusConflict, "OperationNotAllowed",
						"Availability set %s still holds virtual machine %s.", stringOf(v.doc["id"]), stringOf(vms[0].(obj)["id"]))
				}
				return nil
			}, nil)
		default:
			methodNotAllowed(c)
		}
	default:
		writeARMError(c.w, errBadPath(c.r.URL.Path))
	}
}

// avSetMembers lists the VMs in an availability set. Caller holds e.mu.
func (e *Emulator) avSetMembers(id string, now time.Time) []any {
	out := []any{}
	for _, s := range e.subs {
		for _, g := range s.groups {
			for key, en := range g.resources {
				if !strings.HasPrefix(key, "virtualmachines/") || en.cur == nil || en.cur.phaseAt(now) == phaseGone || en.cur.deleting {
					continue
				}
				if r, ok := propsOf(en.cur.doc)["availabilitySet"].(obj); ok && strings.EqualFold(stringOf(r["id"]), id) {
					out = append(out, ref(stringOf(en.cur.doc["id"])))
				}
			}
		}
	}
	return out
}

// normalizeAvSet validates an availability set PUT. An availability set
// is created synchronously (200, no etag), as recorded.
func normalizeAvSet(wc *writeCtx, in obj, name string, cur *version) (obj, any, *armError) {
	doc, props, ae := computeBase(wc, in, typeAvSet, fullAvSet, name, cur)
	if ae != nil {
		return nil, nil, ae
	}
	delete(props, "virtualMachines")
	delete(props, "statuses")
	for k, def := range map[string]int{"platformUpdateDomainCount": 5, "platformFaultDomainCount": 2} {
		n, has, err := getInt(props, k, "properties")
		if err != nil || has && n < 1 {
			return nil, nil, errInvalidParameter("properties."+k, "%s must be a positive integer.", k)
		}
		if !has {
			props[k] = def
		}
	}
	props["virtualMachineScaleSetMigrationInfo"] = obj{"defaultVirtualMachineScaleSetInfo": obj{
		"constrainedMaximumCapacity":    true,
		"defaultVirtualMachineScaleSet": ref(computeID(wc.s.id, wc.g.name, typeVMSS, stringOf(doc["name"]))),
	}}
	doc["properties"] = props
	sku, err := getObj(in, "sku", "")
	if err != nil {
		return nil, nil, errInvalidParameter("sku", "%v", err)
	}
	name2 := "Classic"
	if sku != nil && stringOf(sku["name"]) != "" {
		if name2, ae = enumValueOr(stringOf(sku["name"]), "Classic", "Aligned"); ae != nil {
			return nil, nil, ae
		}
	}
	doc["sku"] = obj{"name": name2}
	return doc, nil, nil
}

func enumValueOr(v string, allowed ...string) (string, *armError) {
	if c, ok := enumValue(v, allowed...); ok {
		return c, nil
	}
	return "", errInvalidParameter("sku.name", "sku.name must be one of %s.", strings.Join(allowed, ", "))
}
