package emulator

import (
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Microsoft.Compute: virtual machine scale sets (Uniform and Flexible) and
// their VMs, virtual machines and availability sets at api-version
// 2025-04-01, plus the network interface views of scale set VMs that
// Microsoft.Network serves under the Compute path at 2018-10-01.
//
// What the recordings show and the emulator reproduces: Compute etags are
// quoted integers ("1"); a create answers 201 Creating (availability sets:
// 200, no etag, synchronous), an update 200 Updating; every write of a scale
// set, a scale set VM and a VM create is an asynchronous operation polled at
// .../providers/Microsoft.Compute/locations/{loc}/operations/{id}, whose
// document carries startTime, endTime, status and name; deletes answer 202
// with Azure-AsyncOperation and a Location that is the operation URL with
// monitor=true; errors carry code and message and no details; a PUT merges
// into the existing resource (members it omits keep their values, arrays it
// sends replace the stored ones). See docs/emulator.md for the choices made
// where no recording shows the shape.

// Compute api-versions served.
const (
	// ComputeAPIVersion is the Microsoft.Compute api-version (armcompute/v7).
	ComputeAPIVersion = "2025-04-01"
	// VMSSNICAPIVersion is the api-version of the scale set VM network
	// interface views (armnetwork's *VirtualMachineScaleSet* calls).
	VMSSNICAPIVersion = "2018-10-01"
)

// Compute resource types (URL segments, canonical case).
const (
	typeVMSS   = "virtualMachineScaleSets"
	typeVM     = "virtualMachines"
	typeAvSet  = "availabilitySets"
	fullVMSS   = "Microsoft.Compute/virtualMachineScaleSets"
	fullVMSSVM = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
	fullVM     = "Microsoft.Compute/virtualMachines"
	fullAvSet  = "Microsoft.Compute/availabilitySets"
)

// computeAPIVersionFor is the api-version a Compute route must carry.
func computeAPIVersionFor(rt route) string {
	if isVMSSNICRoute(rt) {
		return VMSSNICAPIVersion
	}
	return ComputeAPIVersion
}

// isVMSSNICRoute reports whether rt addresses the network interface views
// of scale set VMs (.../virtualMachineScaleSets/{v}/networkInterfaces, or
// .../virtualMachines/{i}/networkInterfaces[/...]).
func isVMSSNICRoute(rt route) bool {
	if !strings.EqualFold(rt.typ, typeVMSS) {
		return false
	}
	if rt.kind == routeChildList && strings.EqualFold(rt.childType, "networkInterfaces") {
		return true
	}
	return rt.kind == routeChild && len(rt.extra) > 0 && strings.EqualFold(rt.extra[0], "networkInterfaces")
}

// crpError is an error raised by Microsoft.Compute: code and message, no
// details (as recorded).
func crpError(status int, code, format string, args ...any) *armError {
	return &armError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

// errInvalidParameter is Compute's 400 naming the offending parameter.
func errInvalidParameter(target, format string, args ...any) *armError {
	e := crpError(http.StatusBadRequest, "InvalidParameter", format, args...)
	e.target = target
	return e
}

// errComputeBusy answers a write to a Compute resource whose operation is
// still running.
func errComputeBusy(id, opURL string) *armError {
	return crpError(http.StatusConflict, "OperationNotAllowed",
		"Operation is not allowed on %s while another operation is in progress; poll %s for its outcome.", id, opURL)
}

// computeEtag formats a Compute etag.
func computeEtag(n int) string { return `"` + strconv.Itoa(n) + `"` }

// etagNumber parses a Compute etag ("3" -> 3); 0 when it is not one.
func etagNumber(etag string) int {
	n, err := strconv.Atoi(strings.Trim(etag, `"`))
	if err != nil {
		return 0
	}
	return n
}

// checkComputePreconditions applies If-Match / If-None-Match to a Compute
// resource whose current etag is cur ("" when it does not exist). Quotes
// are not significant; weak etags do not exist in Compute.
func checkComputePreconditions(r *http.Request, cur string, exists bool) *armError {
	if im := strings.TrimSpace(r.Header.Get("If-Match")); im != "" {
		if !exists {
			return crpError(http.StatusPreconditionFailed, "PreconditionFailed",
				"Etag provided in if-match header \"%s\" does not match: the resource does not exist.", strings.Trim(im, `"`))
		}
		if im != "*" && strings.Trim(im, `"`) != strings.Trim(cur, `"`) {
			return crpError(http.StatusPreconditionFailed, "PreconditionFailed",
				"Etag provided in if-match header \"%s\" does not match etag %s of resource.", strings.Trim(im, `"`), cur)
		}
	}
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm != "" && exists {
		if inm == "*" || strings.Trim(inm, `"`) == strings.Trim(cur, `"`) {
			return crpError(http.StatusPreconditionFailed, "PreconditionFailed",
				"Etag provided in if-none-match header \"%s\" matches etag %s of resource.", strings.Trim(inm, `"`), cur)
		}
	}
	return nil
}

// computeState is the provisioningState a Compute resource shows.
func computeState(v *version, ph phase) string {
	if ph == phaseUpdating && v.creating {
		return "Creating"
	}
	return ph.String()
}

// computeID builds the id of a Compute resource.
func computeID(sub, rg, typ, name string) string {
	return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Compute/" + typ + "/" + name
}

// vmssVMKey is the entry key of scale set VM i of vmss.
func vmssVMKey(vmss, i string) string {
	return "vmssvm/" + strings.ToLower(vmss) + "/" + i
}

// serveCompute dispatches Microsoft.Compute routes.
func (e *Emulator) serveCompute(c *reqCtx) {
	switch {
	case strings.EqualFold(c.rt.typ, typeVMSS):
		e.serveVMSS(c)
	case strings.EqualFold(c.rt.typ, typeVM):
		e.serveVM(c)
	case strings.EqualFold(c.rt.typ, typeAvSet):
		e.serveAvSet(c)
	default:
		writeARMError(c.w, gatewayError(http.StatusBadRequest, "InvalidResourceType",
			"The resource type '%s' could not be found in the namespace 'Microsoft.Compute' for api version '%s'.", c.rt.typ, c.apiVersion))
	}
}

// computeKind describes how one Compute resource type is written.
type computeKind struct {
	spec *kindSpec
	// typ and full name the type ("virtualMachines",
	// "Microsoft.Compute/virtualMachines").
	typ, full string
	// normalize builds the stored document (and state) of a PUT; cur is
	// the current version (nil on create). The request has been merged
	// into the current document already.
	normalize func(wc *writeCtx, in obj, name string, cur *version) (obj, any, *armError)
	// etagEveryPut: every PUT moves the etag (VMs, as recorded); others
	// move it only when the document changes.
	etagEveryPut bool
	// noAsyncOnUpdate: an update answers without Azure-AsyncOperation (VMs,
	// as recorded; the client polls the resource).
	noAsyncOnUpdate bool
	// synchronous: writes complete in the response, without etag or
	// polling headers (availability sets, as recorded).
	synchronous bool
	// etagAt is the etag a version shows at a phase (VMs move theirs when
	// their creation completes); nil: v.etag.
	etagAt func(v *version, ph phase) string
}

func (k *computeKind) etag(v *version, ph phase) string {
	if k.etagAt != nil {
		return k.etagAt(v, ph)
	}
	return v.etag
}

// readComputeGroup resolves the group of the route under a read lock the
// caller holds; on failure it answers and returns nil.
func (e *Emulator) readComputeGroup(c *reqCtx, now time.Time) *group {
	_, g := e.readGroup(c, now)
	if g == nil {
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
	}
	return g
}

// readComputeEntry takes the read lock and finds the live entry at key.
// When the group or the entry is missing it answers 404 (the entry as
// resource type full named name), releases the lock and returns ok false;
// otherwise the caller holds the read lock.
func (e *Emulator) readComputeEntry(c *reqCtx, key, full, name string) (g *group, en *entry, now time.Time, ok bool) {
	e.mu.RLock()
	now = e.clock.Now()
	if g = e.readComputeGroup(c, now); g == nil {
		e.mu.RUnlock()
		return nil, nil, now, false
	}
	en = g.resources[key]
	if en == nil || en.cur == nil || en.cur.phaseAt(now) == phaseGone {
		rg := g.name
		e.mu.RUnlock()
		writeARMError(c.w, errResourceNotFound(full, name, rg))
		return nil, nil, now, false
	}
	return g, en, now, true
}

// getCompute answers a GET of the entry at key; name is what the URL
// called it (for the 404).
func (e *Emulator) getCompute(c *reqCtx, k *computeKind, key, name string, decorate func(obj, *version, time.Time)) {
	_, en, now, ok := e.readComputeEntry(c, key, k.full, name)
	if !ok {
		return
	}
	v := en.cur
	ph := v.phaseAt(now)
	var body []byte
	if decorate != nil {
		tree := shallowCopy(e.renderVersion(k.spec, v, ph).tree())
		decorate(tree, v, now)
		body = mustMarshal(tree)
	} else {
		body = e.renderVersion(k.spec, v, ph).bytes()
	}
	etag := k.etag(v, ph)
	e.mu.RUnlock()
	if !k.synchronous {
		c.w.Header()["Etag"] = []string{etag}
	}
	writeJSON(c.w, http.StatusOK, body)
}

// listCompute answers a list of the entries whose keys start with prefix,
// in the route's group or, for a subscription-wide list, every group.
// keep filters versions (nil keeps all); decorate adds members per item.
func (e *Emulator) listCompute(c *reqCtx, k *computeKind, prefix string, less func(a, b string) bool,
	keep func(*version) bool, decorate func(obj, *version, time.Time)) {
	e.mu.RLock()
	now := e.clock.Now()
	var groups []*group
	if c.rt.kind == routeSubTypeList {
		if s := e.subs[strings.ToLower(c.rt.sub)]; s != nil {
			for _, g := range s.groups {
				if !g.goneAt(now) {
					groups = append(groups, g)
				}
			}
		}
	} else {
		g := e.readComputeGroup(c, now)
		if g == nil {
			e.mu.RUnlock()
			return
		}
		groups = []*group{g}
	}
	type item struct {
		key  string
		tree any
	}
	var items []item
	for _, g := range groups {
		for key, en := range g.resources {
			if !strings.HasPrefix(key, prefix) || en.cur == nil {
				continue
			}
			ph := en.cur.phaseAt(now)
			if ph == phaseGone || keep != nil && !keep(en.cur) {
				continue
			}
			r := e.renderVersion(k.spec, en.cur, ph)
			var t any = rawJSON(r.bytes())
			if decorate != nil {
				tree := shallowCopy(r.tree())
				decorate(tree, en.cur, now)
				t = tree
			}
			items = append(items, item{strings.ToLower(g.name) + "/" + key, t})
		}
	}
	e.mu.RUnlock()
	if less == nil {
		less = func(a, b string) bool { return a < b }
	}
	sort.Slice(items, func(i, j int) bool { return less(items[i].key, items[j].key) })
	vals := make([]any, len(items))
	for i, it := range items {
		vals[i] = it.tree
	}
	writeJSON(c.w, http.StatusOK, mustMarshal(obj{"value": vals}))
}

// putCompute runs a PUT of the entry at key. parentCheck, when set, runs
// under the lock first (a scale set VM needs its scale set).
func (e *Emulator) putCompute(c *reqCtx, k *computeKind, key, name string, mayCreate bool, parentCheck func(*writeCtx) *armError) {
	in, ok := readObject(c)
	if !ok {
		return
	}
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	locked := true
	defer func() {
		if locked {
			e.mu.Unlock()
		}
	}()
	if parentCheck != nil {
		if ae := parentCheck(wc); ae != nil {
			writeARMError(c.w, ae)
			return
		}
	}
	en := wc.g.resources[key]
	var cur *version
	if en != nil && en.cur != nil && en.cur.phaseAt(wc.now) != phaseGone {
		cur = en.cur
	}
	curEtag := ""
	if cur != nil {
		curEtag = k.etag(cur, cur.phaseAt(wc.now))
	}
	if ae := checkComputePreconditions(c.r, curEtag, cur != nil); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur == nil && !mayCreate {
		writeARMError(c.w, errResourceNotFound(k.full, name, wc.g.name))
		return
	}
	if cur != nil && cur.busy(wc.now) {
		writeARMError(c.w, errComputeBusy(stringOf(cur.doc["id"]), c.asyncURL(cur.op)))
		return
	}
	src := in
	if cur != nil {
		src = mergeJSON(deepCopy(cur.doc).(obj), in)
	}
	doc, ext, ae := k.normalize(wc, src, name, cur)
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	var op *operation
	if !k.synchronous {
		loc, _ := doc["location"].(string)
		op = e.newOp(c, wc.s, loc, wc.now)
		op.compute = true
	}
	etag := computeEtag(1)
	if cur != nil {
		etag = curEtag
		if k.etagEveryPut || !reflect.DeepEqual(doc, cur.doc) {
			etag = computeEtag(etagNumber(curEtag) + 1)
		}
	}
	nv := &version{doc: doc, etag: etag, op: op, creating: cur == nil, ext: ext}
	if en == nil {
		en = &entry{kind: k.spec}
		wc.g.resources[key] = en
	}
	en.cur = nv
	wc.memo = nil
	wc.runEffects()

	// The response shows Creating or Updating, as recorded, even when the
	// operation is already done: the client polls.
	ph := phaseUpdating
	if k.synchronous {
		ph = phaseSucceeded
	}
	tree := k.spec.render(nv, ph)
	e.mu.Unlock()
	locked = false
	status := http.StatusOK
	if cur == nil && !k.synchronous {
		status = http.StatusCreated
	}
	if !k.synchronous {
		c.w.Header()["Etag"] = []string{nv.etag}
		if cur == nil || !k.noAsyncOnUpdate {
			c.writeAccepted(op, true, false)
		}
	}
	writeJSONTree(c.w, status, tree)
}

// deleteCompute runs a DELETE of the entry at key.
func (e *Emulator) deleteCompute(c *reqCtx, k *computeKind, key string, check func(*writeCtx, *version) *armError, onDelete func(*writeCtx, *version, *operation)) {
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	defer e.mu.Unlock()
	en := wc.g.resources[key]
	if en == nil || en.cur == nil || en.cur.phaseAt(wc.now) == phaseGone {
		c.w.WriteHeader(http.StatusNoContent)
		return
	}
	cur := en.cur
	if ae := checkComputePreconditions(c.r, k.etag(cur, cur.phaseAt(wc.now)), true); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur.busy(wc.now) {
		writeARMError(c.w, errComputeBusy(stringOf(cur.doc["id"]), c.asyncURL(cur.op)))
		return
	}
	if check != nil {
		if ae := check(wc, cur); ae != nil {
			writeARMError(c.w, ae)
			return
		}
	}
	if k.synchronous {
		if onDelete != nil {
			onDelete(wc, cur, nil)
			wc.runEffects()
		}
		delete(wc.g.resources, key)
		c.w.WriteHeader(http.StatusOK)
		return
	}
	loc, _ := cur.doc["location"].(string)
	op := e.newOp(c, wc.s, loc, wc.now)
	op.compute, op.delete = true, true
	if op.result == resultSucceeded && onDelete != nil {
		onDelete(wc, cur, op)
		wc.runEffects()
	}
	en.cur = &version{doc: cur.doc, etag: cur.etag, op: op, deleting: true, ext: cur.ext}
	c.writeAccepted(op, true, true)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(http.StatusAccepted)
}

// serveComputeOperation answers polls of a Compute operation: the
// Azure-AsyncOperation document, or, for the Location URL (monitor=true),
// 202 while it runs and 200 without a body when it succeeded.
func (e *Emulator) serveComputeOperation(c *reqCtx, op *operation, now time.Time) {
	status := op.status(now)
	if strings.Contains(c.r.URL.RawQuery, "monitor=true") {
		switch status {
		case "InProgress":
			c.w.Header().Set("Location", c.locationURL(op))
			c.w.Header().Set("Azure-AsyncOperation", c.asyncURL(op))
			c.w.Header().Set("Content-Length", "0")
			c.w.WriteHeader(http.StatusAccepted)
		case resultSucceeded:
			c.w.Header().Set("Content-Length", "0")
			c.w.WriteHeader(http.StatusOK)
		default:
			writeARMError(c.w, crpError(http.StatusBadRequest, op.errCode, "%s", op.errMessage))
		}
		return
	}
	body := obj{"startTime": op.start.UTC().Format(time.RFC3339Nano), "status": status, "name": op.id}
	if status != "InProgress" {
		body["endTime"] = op.end.UTC().Format(time.RFC3339Nano)
	}
	if status == resultFailed || status == resultCanceled {
		body["error"] = obj{"code": op.errCode, "message": op.errMessage}
	}
	writeJSON(c.w, http.StatusOK, mustMarshal(body))
}

// mergeJSON merges patch into base as Compute merges a PUT into the
// resource: objects merge member by member, anything else (arrays
// included) replaces. base is modified and returned.
func mergeJSON(base, patch obj) obj {
	for k, pv := range patch {
		po, pIsObj := pv.(map[string]any)
		bo, bIsObj := base[k].(map[string]any)
		if pIsObj && bIsObj {
			base[k] = mergeJSON(bo, po)
			continue
		}
		base[k] = deepCopy(pv)
	}
	return base
}

// instanceLess orders list keys ending in numeric instance ids.
func instanceLess(a, b string) bool {
	ia, ea := strconv.Atoi(a[strings.LastIndexByte(a, '/')+1:])
	ib, eb := strconv.Atoi(b[strings.LastIndexByte(b, '/')+1:])
	if ea == nil && eb == nil && a[:strings.LastIndexByte(a, '/')] == b[:strings.LastIndexByte(b, '/')] {
		return ia < ib
	}
	return a < b
}

// timeString is how Compute renders times.
func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
