package emulator

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

var (
	vmssSpec   = &kindSpec{typ: typeVMSS, fullType: fullVMSS, render: renderCompute}
	vmssVMSpec = &kindSpec{typ: typeVM, fullType: fullVMSSVM, render: renderCompute, onDelete: onDeleteInstance}
	vmssKind   = &computeKind{spec: vmssSpec, typ: typeVMSS, full: fullVMSS, normalize: normalizeVMSS}
	vmssVMKind = &computeKind{spec: vmssVMSpec, typ: typeVM, full: fullVMSSVM, normalize: normalizeVMSSVM}
)

// vmssState is what a scale set remembers besides its document.
type vmssState struct {
	nextInstance int // the id the next new instance gets
}

// renderCompute renders a Compute document: its etag and provisioningState.
func renderCompute(v *version, ph phase) obj {
	out := shallowCopy(v.doc)
	out["etag"] = v.etag
	p := shallowCopy(propsOf(v.doc))
	p["provisioningState"] = computeState(v, ph)
	out["properties"] = p
	return out
}

// serveVMSS dispatches the scale set routes.
func (e *Emulator) serveVMSS(c *reqCtx) {
	rt := c.rt
	m := c.r.Method
	switch rt.kind {
	case routeTypeList, routeSubTypeList:
		if m != http.MethodGet {
			methodNotAllowed(c)
			return
		}
		e.listCompute(c, vmssKind, "virtualmachinescalesets/", nil, nil, nil)
	case routeResource:
		key := resourceKey(typeVMSS, rt.name)
		switch m {
		case http.MethodGet:
			e.getCompute(c, vmssKind, key, rt.name, nil)
		case http.MethodPut:
			e.putCompute(c, vmssKind, key, rt.name, true, nil)
		case http.MethodDelete:
			e.deleteCompute(c, vmssKind, key, checkDeleteVMSS, onDeleteVMSS)
		default:
			methodNotAllowed(c)
		}
	case routeChildList:
		switch {
		case strings.EqualFold(rt.childType, "virtualMachines") && m == http.MethodGet:
			e.listInstances(c)
		case strings.EqualFold(rt.childType, "networkInterfaces") && m == http.MethodGet:
			e.listScaleSetNICs(c, "")
		case canonicalAction(rt.childType) != "" && m == http.MethodPost:
			e.scaleSetAction(c, canonicalAction(rt.childType))
		default:
			writeARMError(c.w, errBadPath(c.r.URL.Path))
		}
	case routeChild:
		if !strings.EqualFold(rt.childType, "virtualMachines") {
			writeARMError(c.w, errBadPath(c.r.URL.Path))
			return
		}
		if _, err := strconv.Atoi(rt.childName); err != nil || strings.HasPrefix(rt.childName, "-") {
			writeARMError(c.w, errInvalidParameter("instanceId", "Virtual Machine Scale Set VM instanceId must be a number."))
			return
		}
		e.serveInstance(c)
	default:
		writeARMError(c.w, errBadPath(c.r.URL.Path))
	}
}

// serveInstance dispatches the routes of one scale set VM.
func (e *Emulator) serveInstance(c *reqCtx) {
	rt := c.rt
	m := c.r.Method
	key := vmssVMKey(rt.name, rt.childName)
	if len(rt.extra) == 0 {
		switch m {
		case http.MethodGet:
			e.getCompute(c, vmssVMKind, key, rt.name+"/virtualMachines/"+rt.childName, expandInstanceView(c))
		case http.MethodPut:
			e.putCompute(c, vmssVMKind, key, rt.name+"/virtualMachines/"+rt.childName, false, e.needScaleSet(rt.name))
		case http.MethodDelete:
			e.deleteCompute(c, vmssVMKind, key, nil, onDeleteInstanceByAPI)
		default:
			methodNotAllowed(c)
		}
		return
	}
	switch {
	case len(rt.extra) == 1 && strings.EqualFold(rt.extra[0], "instanceView") && m == http.MethodGet:
		e.getInstanceView(c, vmssVMKind, key, rt.name+"/virtualMachines/"+rt.childName, true)
	case len(rt.extra) == 1 && canonicalAction(rt.extra[0]) != "" && m == http.MethodPost:
		e.powerAction(c, vmssVMKind, key, canonicalAction(rt.extra[0]))
	case strings.EqualFold(rt.extra[0], "networkInterfaces") && m == http.MethodGet:
		e.serveInstanceNIC(c)
	default:
		writeARMError(c.w, errBadPath(c.r.URL.Path))
	}
}

// needScaleSet checks, under the write lock, that the scale set exists.
func (e *Emulator) needScaleSet(name string) func(*writeCtx) *armError {
	return func(wc *writeCtx) *armError {
		if en := wc.g.resources[resourceKey(typeVMSS, name)]; en == nil || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
			return errResourceNotFound(fullVMSS, name, wc.g.name)
		}
		return nil
	}
}

// expandInstanceView returns the decoration adding properties.instanceView
// when the request asks for $expand=instanceView, else nil.
func expandInstanceView(c *reqCtx) func(obj, *version, time.Time) {
	if !strings.EqualFold(c.r.URL.Query().Get("$expand"), "instanceView") {
		return nil
	}
	scaleSet := strings.EqualFold(c.rt.typ, typeVMSS)
	return func(tree obj, v *version, now time.Time) {
		st, _ := v.ext.(*vmState)
		p := shallowCopy(propsOf(tree))
		p["instanceView"] = instanceView(v.doc, st, stringOf(p["provisioningState"]), now, scaleSet)
		tree["properties"] = p
	}
}

func (e *Emulator) listInstances(c *reqCtx) {
	e.mu.RLock()
	now := e.clock.Now()
	_, g := e.readGroup(c, now)
	found := false
	if g != nil {
		en := g.resources[resourceKey(typeVMSS, c.rt.name)]
		found = en != nil && en.cur != nil && en.cur.phaseAt(now) != phaseGone
	}
	e.mu.RUnlock()
	if g == nil {
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
		return
	}
	if !found {
		writeARMError(c.w, errResourceNotFound(fullVMSS, c.rt.name, g.name))
		return
	}
	e.listCompute(c, vmssVMKind, "vmssvm/"+strings.ToLower(c.rt.name)+"/", instanceLess, nil, expandInstanceView(c))
}

// normalizeVMSS validates a scale set PUT (merged into the current one)
// and plans the instances a Uniform scale set gains or loses.
func normalizeVMSS(wc *writeCtx, in obj, name string, cur *version) (obj, any, *armError) {
	doc, props, ae := computeBase(wc, in, typeVMSS, fullVMSS, name, cur)
	if ae != nil {
		return nil, nil, ae
	}
	id := stringOf(doc["id"])
	loc := stringOf(doc["location"])
	sku, err := getObj(in, "sku", "")
	if err != nil {
		return nil, nil, errInvalidParameter("sku", "%v", err)
	}
	if sku == nil || stringOf(sku["name"]) == "" {
		return nil, nil, errInvalidParameter("sku.name", "The scale set needs sku.name (the VM size).")
	}
	capacity, _, err := getInt(sku, "capacity", "sku")
	if err != nil || capacity < 0 || capacity > 10000 {
		return nil, nil, errInvalidParameter("sku.capacity", "sku.capacity must be an integer from 0 to 10000.")
	}
	doc["sku"] = obj{"name": stringOf(sku["name"]), "tier": firstNonEmpty(stringOf(sku["tier"]), "Standard"), "capacity": capacity}

	mode, ae := enumProp(props, "orchestrationMode", "properties", "Uniform", "Uniform", "Flexible")
	if ae != nil {
		return nil, nil, errInvalidParameter("properties.orchestrationMode", "orchestrationMode must be Uniform or Flexible.")
	}
	if cur != nil && stringOf(propsOf(cur.doc)["orchestrationMode"]) != mode {
		return nil, nil, errInvalidParameter("properties.orchestrationMode", "The orchestrationMode of scale set %s cannot be changed.", id)
	}
	flexible := mode == "Flexible"
	if flexible && capacity > 0 {
		return nil, nil, errInvalidParameter("sku.capacity",
			"The emulator creates no VMs for a Flexible scale set: create them as virtualMachines with properties.virtualMachineScaleSet (capacity must be 0).")
	}
	for _, k := range []string{"overprovision", "singlePlacementGroup", "doNotRunExtensionsOnOverprovisionedVMs"} {
		if _, _, err := getBool(props, k, "properties"); err != nil {
			return nil, nil, errInvalidParameter("properties."+k, "%v", err)
		}
	}
	if _, _, err := getInt(props, "platformFaultDomainCount", "properties"); err != nil {
		return nil, nil, errInvalidParameter("properties.platformFaultDomainCount", "%v", err)
	}
	if flexible {
		setDefault(props, "singlePlacementGroup", false)
		setDefault(props, "platformFaultDomainCount", 1)
	} else {
		setDefault(props, "singlePlacementGroup", true)
		setDefault(props, "overprovision", true)
		setDefault(props, "doNotRunExtensionsOnOverprovisionedVMs", false)
		setDefault(props, "platformFaultDomainCount", 5)
		up, _ := props["upgradePolicy"].(obj)
		if up == nil {
			up = obj{}
		}
		if _, ae := enumProp(up, "mode", "properties.upgradePolicy", "Manual", "Manual", "Automatic", "Rolling"); ae != nil {
			return nil, nil, errInvalidParameter("properties.upgradePolicy.mode", "upgradePolicy.mode must be Manual, Automatic or Rolling.")
		}
		ap, _ := up["automaticOSUpgradePolicy"].(obj)
		if ap == nil {
			ap = obj{}
		}
		for _, k := range []string{"enableAutomaticOSUpgrade", "useRollingUpgradePolicy", "disableAutomaticRollback"} {
			setDefault(ap, k, false)
		}
		up["automaticOSUpgradePolicy"] = ap
		props["upgradePolicy"] = up
	}

	vp, err := getObj(props, "virtualMachineProfile", "properties")
	if err != nil {
		return nil, nil, errInvalidParameter("properties.virtualMachineProfile", "%v", err)
	}
	if vp == nil && !flexible {
		return nil, nil, errInvalidParameter("properties.virtualMachineProfile", "A Uniform scale set needs properties.virtualMachineProfile.")
	}
	if vp != nil {
		nvp, ae := wc.normScaleSetProfile(vp, name, id, loc, flexible, cur)
		if ae != nil {
			return nil, nil, ae
		}
		props["virtualMachineProfile"] = nvp
	}
	if cur != nil {
		props["uniqueId"] = propsOf(cur.doc)["uniqueId"]
		props["timeCreated"] = propsOf(cur.doc)["timeCreated"]
	} else {
		props["uniqueId"] = wc.e.ids.uuid()
		props["timeCreated"] = timeString(wc.now)
	}
	doc["properties"] = props

	st := &vmssState{}
	if cur != nil {
		if s, ok := cur.ext.(*vmssState); ok {
			*st = *s
		}
	}
	if !flexible {
		if ae := wc.planInstances(doc, name, int(capacity), st); ae != nil {
			return nil, nil, ae
		}
	}
	return doc, st, nil
}

// normScaleSetProfile validates virtualMachineProfile.
func (wc *writeCtx) normScaleSetProfile(vp obj, name, id, loc string, flexible bool, cur *version) (obj, *armError) {
	out := deepCopy(vp).(obj)
	const path = "properties.virtualMachineProfile"
	if _, has := out["storageProfile"]; has || !flexible {
		sp, windows, ae := normStorageProfile(out, path, false)
		if ae != nil {
			return nil, ae
		}
		out["storageProfile"] = sp
		osp, ae := normOSProfile(out, path, windows, false)
		if ae != nil {
			return nil, ae
		}
		if stringOf(osp["computerNamePrefix"]) == "" {
			prefix := strings.ToLower(name)
			if len(prefix) > 9 {
				prefix = prefix[:9]
			}
			osp["computerNamePrefix"] = prefix
		}
		out["osProfile"] = osp
	}
	np, err := getObj(out, "networkProfile", path)
	if err != nil {
		return nil, errInvalidParameter(path+".networkProfile", "%v", err)
	}
	if np == nil {
		if !flexible {
			return nil, errInvalidParameter(path+".networkProfile", "A Uniform scale set needs networkProfile.networkInterfaceConfigurations.")
		}
	} else {
		arr, _, err := getArr(np, "networkInterfaceConfigurations", path+".networkProfile")
		if err != nil || len(arr) == 0 && !flexible {
			return nil, errInvalidParameter(path+".networkProfile.networkInterfaceConfigurations", "The scale set needs at least one network interface configuration.")
		}
		cfgs, ae := wc.normNICConfigs(arr, path+".networkProfile.networkInterfaceConfigurations", loc, id, wc.scaleSetScope(id, id, ""))
		if ae != nil {
			return nil, ae
		}
		nnp := obj{"networkInterfaceConfigurations": cfgs}
		if flexible {
			if _, ae := enumProp(np, "networkApiVersion", path+".networkProfile", "2020-11-01", "2020-11-01", "2022-11-01"); ae != nil {
				return nil, errInvalidParameter(path+".networkProfile.networkApiVersion", "networkApiVersion must be 2020-11-01 or 2022-11-01.")
			}
			nnp["networkApiVersion"] = np["networkApiVersion"]
		}
		out["networkProfile"] = nnp
	}
	if cur != nil {
		if old, ok := propsOf(cur.doc)["virtualMachineProfile"].(obj); ok && old["timeCreated"] != nil {
			out["timeCreated"] = old["timeCreated"]
		}
	}
	if out["timeCreated"] == nil {
		out["timeCreated"] = timeString(wc.now)
	}
	return out, nil
}

// computeBase validates the members every Compute resource shares (name,
// location, tags, zones) and returns the document skeleton and a copy of
// the properties without read-only members.
func computeBase(wc *writeCtx, in obj, typ, full, name string, cur *version) (obj, obj, *armError) {
	if n, ok, err := getStr(in, "name", ""); err != nil {
		return nil, nil, errInvalidParameter("name", "%v", err)
	} else if ok && n != "" && !strings.EqualFold(n, name) {
		return nil, nil, errInvalidParameter("name", "The name '%s' in the request body does not match the name '%s' in the request URL.", n, name)
	}
	loc, _, err := getStr(in, "location", "")
	if err != nil {
		return nil, nil, errInvalidParameter("location", "%v", err)
	}
	loc = normLocation(loc)
	storedName := name
	if cur != nil {
		storedName = stringOf(cur.doc["name"])
		if old := stringOf(cur.doc["location"]); loc != old {
			return nil, nil, gatewayError(http.StatusBadRequest, "InvalidResourceLocation",
				"The resource '%s' already exists in location '%s' in resource group '%s'. A resource with the same name cannot be created in location '%s'. Please select a new resource name.",
				storedName, old, wc.g.name, loc)
		}
	} else if loc == "" {
		return nil, nil, gatewayError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	doc := obj{"name": storedName, "id": computeID(wc.s.id, wc.g.name, typ, storedName), "type": full, "location": loc}
	tags, err := getTags(in)
	if err != nil {
		return nil, nil, errInvalidParameter("tags", "%v", err)
	}
	if tags != nil {
		doc["tags"] = tags
	}
	if z, ok, err := getArr(in, "zones", ""); err != nil {
		return nil, nil, errInvalidParameter("zones", "%v", err)
	} else if ok && len(z) > 0 {
		for i, v := range z {
			if _, isStr := v.(string); !isStr {
				return nil, nil, errInvalidParameter(indexPath("zones", i), "zones must be strings.")
			}
		}
		doc["zones"] = deepCopy(z)
	}
	props, err := getObj(in, "properties", "")
	if err != nil {
		return nil, nil, errInvalidParameter("properties", "%v", err)
	}
	if props == nil {
		props = obj{}
	}
	props = deepCopy(props).(obj)
	for _, k := range []string{"provisioningState", "instanceView", "vmId", "latestModelApplied", "modelDefinitionApplied", "resilientVMDeletionStatus"} {
		delete(props, k)
	}
	return doc, props, nil
}

// plannedInstance is a scale set VM a write creates.
type plannedInstance struct {
	id  int
	doc obj
	st  *vmState
}

// planInstances makes the instance count follow capacity: new instances
// (with addresses allocated, joining the model's pools) are created and
// the highest ids removed, after the scale set's new version is installed.
// Existing instances keep their model (they follow a model change only on
// their own PUT); latestModelApplied tells whether they match it.
func (wc *writeCtx) planInstances(doc obj, vmss string, capacity int, st *vmssState) *armError {
	prefix := "vmssvm/" + strings.ToLower(vmss) + "/"
	var live []int
	for key, en := range wc.g.resources {
		if strings.HasPrefix(key, prefix) && en.cur != nil && en.cur.phaseAt(wc.now) != phaseGone && !en.cur.deleting {
			if i, err := strconv.Atoi(key[len(prefix):]); err == nil {
				live = append(live, i)
			}
		}
	}
	var plan []plannedInstance
	for n := len(live); n < capacity; n++ {
		i := st.nextInstance
		st.nextInstance++
		d, s, ae := wc.newInstance(doc, vmss, i)
		if ae != nil {
			return ae
		}
		plan = append(plan, plannedInstance{id: i, doc: d, st: s})
	}
	var remove []int
	if len(live) > capacity {
		sortInts(live)
		remove = live[capacity:]
	}
	model := modelNICConfigs(doc)
	wc.after(func() {
		en := wc.g.resources[resourceKey(typeVMSS, vmss)]
		op := en.cur.op
		for _, p := range plan {
			key := vmssVMKey(vmss, strconv.Itoa(p.id))
			wc.g.resources[key] = &entry{kind: vmssVMSpec, cur: &version{doc: p.doc, etag: computeEtag(1), op: op, creating: true, ext: p.st}}
			wc.membershipDiff(newPoolRefs(), instancePoolRefs(wc.g.name, stringOf(doc["name"]), strconv.Itoa(p.id), stringOf(p.doc["id"]), instanceNICConfigs(p.doc)))
		}
		for _, i := range remove {
			ie := wc.g.resources[vmssVMKey(vmss, strconv.Itoa(i))]
			onDeleteInstance(wc, ie.cur)
			ie.cur = &version{doc: ie.cur.doc, etag: ie.cur.etag, op: op, deleting: true, ext: ie.cur.ext}
		}
		wc.refreshModelApplied(vmss, model)
	})
	return nil
}

// refreshModelApplied recomputes latestModelApplied of the scale set's
// instances (a new version, same etag, when it flips).
func (wc *writeCtx) refreshModelApplied(vmss string, model []any) {
	prefix := "vmssvm/" + strings.ToLower(vmss) + "/"
	for key, en := range wc.g.resources {
		if !strings.HasPrefix(key, prefix) || en.cur == nil || en.cur.deleting {
			continue
		}
		applied := reflect.DeepEqual(normJSON(instanceNICConfigs(en.cur.doc)), normJSON(model))
		if propsOf(en.cur.doc)["latestModelApplied"] == applied {
			continue
		}
		doc := shallowCopy(en.cur.doc)
		p := shallowCopy(propsOf(doc))
		p["latestModelApplied"] = applied
		doc["properties"] = p
		v := en.cur
		en.cur = &version{doc: doc, etag: v.etag, op: v.op, creating: v.creating, deleting: v.deleting, ext: v.ext}
	}
}

// normJSON brings a decoded value to one representation (numbers as
// json.Number) so that documents built from requests and from Go values
// compare equal.
func normJSON(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out, err := parseJSON(b)
	if err != nil {
		return v
	}
	return out
}

func sortInts(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// newInstance builds scale set VM i from the model.
func (wc *writeCtx) newInstance(vmssDoc obj, vmss string, i int) (obj, *vmState, *armError) {
	vmssID := stringOf(vmssDoc["id"])
	vmID := vmssID + "/virtualMachines/" + strconv.Itoa(i)
	vp, _ := propsOf(vmssDoc)["virtualMachineProfile"].(obj)
	osp, _ := vp["osProfile"].(obj)
	stg, _ := vp["storageProfile"].(obj)
	sku, _ := vmssDoc["sku"].(obj)
	img := deepCopy(stg["imageReference"]).(obj)
	windows := isWindowsImage(img)
	img["exactVersion"] = exactVersion(windows)
	disk := deepCopy(stg["osDisk"]).(obj)
	vmssName := stringOf(vmssDoc["name"])
	diskName := vmssName + "_" + vmssName + "_" + strconv.Itoa(i) + "_OS__1_" + strings.ReplaceAll(wc.e.ids.uuid(), "-", "")
	disk["name"] = diskName
	md := shallowCopy(disk["managedDisk"].(obj))
	md["id"] = "/subscriptions/" + wc.s.id + "/resourceGroups/" + wc.g.name + "/providers/Microsoft.Compute/disks/" + diskName
	disk["managedDisk"] = md
	instOS := obj{}
	for k, v := range osp {
		if k != "computerNamePrefix" {
			instOS[k] = deepCopy(v)
		}
	}
	instOS["computerName"] = computerName(stringOf(osp["computerNamePrefix"]), i)
	cfgs := deepCopy(modelNICConfigs(vmssDoc)).([]any)
	var nics []any
	for _, c := range cfgs {
		nics = append(nics, obj{"id": vmID + "/networkInterfaces/" + stringOf(c.(obj)["name"])})
	}
	doc := obj{
		"name": vmssName + "_" + strconv.Itoa(i), "id": vmID, "type": fullVMSSVM, "location": vmssDoc["location"],
		"instanceId": strconv.Itoa(i),
		"sku":        obj{"name": sku["name"], "tier": sku["tier"]},
		"properties": obj{
			"latestModelApplied":          true,
			"modelDefinitionApplied":      "VirtualMachineScaleSet",
			"networkProfileConfiguration": obj{"networkInterfaceConfigurations": cfgs},
			"hardwareProfile":             obj{"vmSize": sku["name"]},
			"resilientVMDeletionStatus":   "Disabled",
			"vmId":                        wc.e.ids.uuid(),
			"storageProfile":              obj{"imageReference": img, "osDisk": disk, "dataDisks": []any{}},
			"osProfile":                   instOS,
			"networkProfile":              obj{"networkInterfaces": nics},
			"timeCreated":                 timeString(wc.now),
		},
	}
	if z, ok := vmssDoc["zones"].([]any); ok && len(z) > 0 {
		doc["zones"] = []any{z[i%len(z)]}
	}
	ips, ae := wc.allocScaleSetIPs(cfgs, nil, vmID)
	if ae != nil {
		return nil, nil, ae
	}
	return doc, &vmState{power: "running", ips: ips, nicEtag: wc.e.ids.etag()}, nil
}

// normalizeVMSSVM validates a scale set VM PUT: only the network profile
// (networkProfileConfiguration) may change; tags are not kept (as
// recorded); the rest is the instance's own.
func normalizeVMSSVM(wc *writeCtx, in obj, name string, cur *version) (obj, any, *armError) {
	if n, ok, err := getStr(in, "name", ""); err != nil || ok && n != "" && !strings.EqualFold(n, stringOf(cur.doc["name"])) {
		return nil, nil, errInvalidParameter("name", "The name in the request body does not match the scale set VM %s.", stringOf(cur.doc["name"]))
	}
	if loc, _, _ := getStr(in, "location", ""); normLocation(loc) != stringOf(cur.doc["location"]) {
		return nil, nil, gatewayError(http.StatusBadRequest, "InvalidResourceLocation",
			"The resource '%s' already exists in location '%s'.", stringOf(cur.doc["name"]), stringOf(cur.doc["location"]))
	}
	props, err := getObj(in, "properties", "")
	if err != nil || props == nil {
		return nil, nil, errInvalidParameter("properties", "The scale set VM needs properties.")
	}
	if hp, _ := props["hardwareProfile"].(obj); hp != nil && !strings.EqualFold(stringOf(hp["vmSize"]), stringOf(propsOf(cur.doc)["hardwareProfile"].(obj)["vmSize"])) {
		return nil, nil, errInvalidParameter("properties.hardwareProfile.vmSize", "The size of a scale set VM follows its scale set's model.")
	}
	npc, err := getObj(props, "networkProfileConfiguration", "properties")
	if err != nil || npc == nil {
		return nil, nil, errInvalidParameter("properties.networkProfileConfiguration", "The scale set VM needs networkProfileConfiguration.")
	}
	arr, _, err := getArr(npc, "networkInterfaceConfigurations", "properties.networkProfileConfiguration")
	if err != nil || len(arr) == 0 {
		return nil, nil, errInvalidParameter("properties.networkProfileConfiguration.networkInterfaceConfigurations", "The scale set VM needs at least one network interface configuration.")
	}
	vmID := stringOf(cur.doc["id"])
	vmssID := vmID[:strings.LastIndex(strings.ToLower(vmID), "/virtualmachines/")]
	cfgs, ae := wc.normNICConfigs(arr, "properties.networkProfileConfiguration.networkInterfaceConfigurations", stringOf(cur.doc["location"]), vmID,
		wc.scaleSetScope(vmssID, vmID, vmID))
	if ae != nil {
		return nil, nil, ae
	}
	old, _ := cur.ext.(*vmState)
	ips, ae := wc.allocScaleSetIPs(cfgs, old.ips, vmID)
	if ae != nil {
		return nil, nil, ae
	}
	doc := shallowCopy(cur.doc)
	p := shallowCopy(propsOf(cur.doc))
	p["networkProfileConfiguration"] = obj{"networkInterfaceConfigurations": cfgs}
	var nics []any
	for _, c := range cfgs {
		nics = append(nics, obj{"id": vmID + "/networkInterfaces/" + stringOf(c.(obj)["name"])})
	}
	p["networkProfile"] = obj{"networkInterfaces": nics}
	vmss, instance := scaleSetOfInstance(vmID)
	if en := wc.g.resources[resourceKey(typeVMSS, vmss)]; en != nil && en.cur != nil {
		p["latestModelApplied"] = reflect.DeepEqual(normJSON(cfgs), normJSON(modelNICConfigs(en.cur.doc)))
	}
	doc["properties"] = p
	st := *old
	st.ips = ips
	if !reflect.DeepEqual(normJSON(cfgs), normJSON(instanceNICConfigs(cur.doc))) {
		st.nicEtag = wc.e.ids.etag()
	}
	wc.membershipDiff(instancePoolRefs(wc.g.name, vmss, instance, vmID, instanceNICConfigs(cur.doc)),
		instancePoolRefs(wc.g.name, vmss, instance, vmID, cfgs))
	return doc, &st, nil
}

// scaleSetOfInstance returns the scale set name and instance id of a scale
// set VM id.
func scaleSetOfInstance(id string) (string, string) {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	if len(segs) < 10 {
		return "", ""
	}
	return segs[7], segs[9]
}

// onDeleteInstance makes a scale set VM leave its pools.
func onDeleteInstance(wc *writeCtx, v *version) {
	vmss, instance := scaleSetOfInstance(stringOf(v.doc["id"]))
	rg := resourceGroupOf(stringOf(v.doc["id"]))
	wc.membershipDiff(instancePoolRefs(rg, vmss, instance, stringOf(v.doc["id"]), instanceNICConfigs(v.doc)), newPoolRefs())
}

// onDeleteInstanceByAPI is a scale set VM DELETE: it leaves its pools and
// the scale set's capacity drops by one.
func onDeleteInstanceByAPI(wc *writeCtx, v *version, _ *operation) {
	onDeleteInstance(wc, v)
	vmss, _ := scaleSetOfInstance(stringOf(v.doc["id"]))
	en := wc.g.resources[resourceKey(typeVMSS, vmss)]
	if en == nil || en.cur == nil {
		return
	}
	doc := shallowCopy(en.cur.doc)
	sku := shallowCopy(doc["sku"].(obj))
	if n, _, _ := getInt(sku, "capacity", ""); n > 0 {
		sku["capacity"] = n - 1
	}
	doc["sku"] = sku
	c := en.cur
	en.cur = &version{doc: doc, etag: computeEtag(etagNumber(c.etag) + 1), op: c.op, creating: c.creating, ext: c.ext}
}

func resourceGroupOf(id string) string {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	if len(segs) < 4 {
		return ""
	}
	return segs[3]
}

// checkDeleteVMSS rejects deleting a Flexible scale set that still has VMs.
func checkDeleteVMSS(wc *writeCtx, v *version) *armError {
	if stringOf(propsOf(v.doc)["orchestrationMode"]) != "Flexible" {
		return nil
	}
	id := stringOf(v.doc["id"])
	for key, en := range wc.g.resources {
		if strings.HasPrefix(key, "virtualmachines/") && en.cur != nil && en.cur.phaseAt(wc.now) != phaseGone && !en.cur.deleting {
			if r, ok := propsOf(en.cur.doc)["virtualMachineScaleSet"].(obj); ok && strings.EqualFold(stringOf(r["id"]), id) {
				return crpError(http.StatusConflict, "OperationNotAllowed",
					"Flexible scale set %s still has virtual machine %s; delete its virtual machines first.", id, stringOf(en.cur.doc["id"]))
			}
		}
	}
	return nil
}

// onDeleteVMSS deletes a Uniform scale set's instances with it.
func onDeleteVMSS(wc *writeCtx, v *version, op *operation) {
	prefix := "vmssvm/" + strings.ToLower(stringOf(v.doc["name"])) + "/"
	for key, en := range wc.g.resources {
		if !strings.HasPrefix(key, prefix) || en.cur == nil || en.cur.deleting {
			continue
		}
		onDeleteInstance(wc, en.cur)
		en.cur = &version{doc: en.cur.doc, etag: en.cur.etag, op: op, deleting: true, ext: en.cur.ext}
	}
}

// getInstanceView answers .../instanceView of a VM or scale set VM.
func (e *Emulator) getInstanceView(c *reqCtx, k *computeKind, key, name string, scaleSet bool) {
	_, en, now, ok := e.readComputeEntry(c, key, k.full, name)
	if !ok {
		return
	}
	v := en.cur
	st, _ := v.ext.(*vmState)
	body := mustMarshal(instanceView(v.doc, st, computeState(v, v.phaseAt(now)), now, scaleSet))
	e.mu.RUnlock()
	writeJSON(c.w, http.StatusOK, body)
}

// powerAction starts a power action (start, powerOff, deallocate,
// restart) on a VM or scale set VM: 202 with polling headers; the instance
// view shows the transitional state until the operation ends.
func (e *Emulator) powerAction(c *reqCtx, k *computeKind, key, action string) {
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	defer e.mu.Unlock()
	en := wc.g.resources[key]
	if en == nil || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
		writeARMError(c.w, errResourceNotFound(k.full, c.rt.name, wc.g.name))
		return
	}
	op, ae := e.startPowerAction(c, wc, k, en, action, nil)
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	c.writeAccepted(op, true, true)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(http.StatusAccepted)
}

// startPowerAction installs the action on one entry; op is shared by the
// instances of a scale set action (nil: a new one).
func (e *Emulator) startPowerAction(c *reqCtx, wc *writeCtx, k *computeKind, en *entry, action string, op *operation) (*operation, *armError) {
	cur := en.cur
	id := stringOf(cur.doc["id"])
	if cur.busy(wc.now) {
		return nil, errComputeBusy(id, c.asyncURL(cur.op))
	}
	st, _ := cur.ext.(*vmState)
	if st == nil {
		st = &vmState{power: "running"}
	}
	if ae := checkPowerAction(id, action, st.powerAt(wc.now)); ae != nil {
		return nil, ae
	}
	if op == nil {
		op = e.newOp(c, wc.s, stringOf(cur.doc["location"]), wc.now)
		op.compute = true
	}
	pa := powerActions[strings.ToLower(action)]
	en.cur = &version{doc: cur.doc, etag: k.etag(cur, cur.phaseAt(wc.now)), op: op, ext: st.withAction(wc.now, op, pa[0], pa[1])}
	return op, nil
}

// scaleSetAction runs a power action on the instances a scale set action
// names ({"instanceIds":[...]}; none: every instance), as one operation.
func (e *Emulator) scaleSetAction(c *reqCtx, action string) {
	var ids []string
	if c.r.ContentLength != 0 {
		raw, ae := readBody(c)
		if ae != nil {
			writeARMError(c.w, ae)
			return
		}
		if len(strings.TrimSpace(string(raw))) > 0 {
			in, err := decodeObject(raw)
			if err != nil {
				writeARMError(c.w, errInvalidJSON(err))
				return
			}
			arr, _, err := getArr(in, "instanceIds", "")
			if err != nil {
				writeARMError(c.w, errInvalidParameter("instanceIds", "%v", err))
				return
			}
			for _, v := range arr {
				s, ok := v.(string)
				if _, err := strconv.Atoi(s); !ok || err != nil {
					writeARMError(c.w, errInvalidParameter("instanceIds", "instanceIds must be instance id strings."))
					return
				}
				ids = append(ids, s)
			}
		}
	}
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	defer e.mu.Unlock()
	if ae := e.needScaleSet(c.rt.name)(wc); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	prefix := "vmssvm/" + strings.ToLower(c.rt.name) + "/"
	var targets []*entry
	if len(ids) == 0 {
		for key, en := range wc.g.resources {
			if strings.HasPrefix(key, prefix) && en.cur != nil && en.cur.phaseAt(wc.now) != phaseGone && !en.cur.deleting {
				targets = append(targets, en)
			}
		}
	} else {
		for _, i := range ids {
			en := wc.g.resources[prefix+i]
			if en == nil || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
				writeARMError(c.w, errInvalidParameter("instanceIds", "Instance %s of scale set %s does not exist.", i, c.rt.name))
				return
			}
			targets = append(targets, en)
		}
	}
	for _, en := range targets {
		if en.cur.busy(wc.now) {
			writeARMError(c.w, errComputeBusy(stringOf(en.cur.doc["id"]), c.asyncURL(en.cur.op)))
			return
		}
		st, _ := en.cur.ext.(*vmState)
		if ae := checkPowerAction(stringOf(en.cur.doc["id"]), action, st.powerAt(wc.now)); ae != nil {
			writeARMError(c.w, ae)
			return
		}
	}
	op := e.newOp(c, wc.s, "", wc.now)
	op.compute = true
	if vm := wc.g.resources[resourceKey(typeVMSS, c.rt.name)]; vm != nil {
		op.location = normLocation(stringOf(vm.cur.doc["location"]))
	}
	for _, en := range targets {
		_, _ = e.startPowerAction(c, wc, vmssVMKind, en, action, op)
	}
	c.writeAccepted(op, true, true)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(http.StatusAccepted)
}
