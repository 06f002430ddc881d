package emulator

import (
	"net/http"
	"sort"
	"strings"
	"time"
)

// serveNetwork dispatches Microsoft.Network resource routes.
func (e *Emulator) serveNetwork(c *reqCtx) {
	k := kinds[strings.ToLower(c.rt.typ)]
	if k == nil {
		writeARMError(c.w, gatewayError(http.StatusBadRequest, "InvalidResourceType",
			"The resource type '%s' could not be found in the namespace 'Microsoft.Network' for api version '%s'.", c.rt.typ, c.apiVersion))
		return
	}
	switch c.rt.kind {
	case routeTypeList, routeSubTypeList:
		if c.r.Method != http.MethodGet {
			methodNotAllowed(c)
			return
		}
		e.listResources(c, k)
	case routeResource:
		switch c.r.Method {
		case http.MethodGet:
			e.getResource(c, k)
		case http.MethodPut:
			e.putResource(c, k)
		case http.MethodPatch:
			e.patchResource(c, k)
		case http.MethodDelete:
			e.deleteResource(c, k)
		default:
			methodNotAllowed(c)
		}
	case routeChildList, routeChild:
		if k.serveExtra != nil && k.serveExtra(e, c, k) {
			return
		}
		cs := k.collection(c.rt.childType)
		if cs == nil || !cs.routable {
			writeARMError(c.w, gatewayError(http.StatusBadRequest, "InvalidResourceType",
				"The resource type '%s/%s' could not be found in the namespace 'Microsoft.Network' for api version '%s'.", k.typ, c.rt.childType, c.apiVersion))
			return
		}
		switch {
		case c.rt.kind == routeChildList && c.r.Method == http.MethodGet:
			e.listChildren(c, k, cs)
		case c.rt.kind == routeChild && c.r.Method == http.MethodGet:
			e.getChild(c, k, cs)
		case c.rt.kind == routeChild && c.r.Method == http.MethodPut:
			e.putChild(c, k, cs)
		case c.rt.kind == routeChild && c.r.Method == http.MethodDelete:
			e.deleteChild(c, k, cs)
		default:
			methodNotAllowed(c)
		}
	}
}

// readGroup finds the live group of the route under a read lock held by the
// caller.
func (e *Emulator) readGroup(c *reqCtx, now time.Time) (*subscription, *group) {
	s := e.subs[strings.ToLower(c.rt.sub)]
	if s == nil {
		return nil, nil
	}
	return s, s.liveGroup(c.rt.rg, now)
}

func (e *Emulator) getResource(c *reqCtx, k *kindSpec) {
	e.mu.RLock()
	now := e.clock.Now()
	_, g := e.readGroup(c, now)
	if g == nil {
		e.mu.RUnlock()
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
		return
	}
	_, v := g.liveEntry(k.typ, c.rt.name, now)
	if v == nil {
		rg := g.name
		e.mu.RUnlock()
		writeARMError(c.w, errResourceNotFound(k.fullType, c.rt.name, rg))
		return
	}
	r := e.renderVersion(k, v, v.phaseAt(now))
	etag := v.etag
	e.mu.RUnlock()
	c.w.Header()["Etag"] = []string{etag}
	writeJSON(c.w, http.StatusOK, r.bytes())
}

func (e *Emulator) listResources(c *reqCtx, k *kindSpec) {
	e.mu.RLock()
	now := e.clock.Now()
	var groups []*group
	if c.rt.kind == routeTypeList {
		_, g := e.readGroup(c, now)
		if g == nil {
			e.mu.RUnlock()
			writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
			return
		}
		groups = []*group{g}
	} else if s := e.subs[strings.ToLower(c.rt.sub)]; s != nil {
		for _, g := range s.groups {
			if !g.goneAt(now) {
				groups = append(groups, g)
			}
		}
	}
	type item struct {
		key string
		b   []byte
	}
	var items []item
	prefix := strings.ToLower(k.typ) + "/"
	for _, g := range groups {
		for key, en := range g.resources {
			if !strings.HasPrefix(key, prefix) || en.cur == nil {
				continue
			}
			ph := en.cur.phaseAt(now)
			if ph == phaseGone {
				continue
			}
			items = append(items, item{strings.ToLower(g.name) + "/" + key, e.renderVersion(k, en.cur, ph).bytes()})
		}
	}
	e.mu.RUnlock()
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })
	vals := make([]any, len(items))
	for i, it := range items {
		vals[i] = rawJSON(it.b)
	}
	writeJSON(c.w, http.StatusOK, mustMarshal(obj{"value": vals}))
}

// checkPreconditions applies If-Match / If-None-Match to the resource with
// id whose current etag is cur ("" when it does not exist).
func checkPreconditions(r *http.Request, id, cur string, exists bool) *armError {
	if im := strings.TrimSpace(r.Header.Get("If-Match")); im != "" {
		if !exists {
			return errPreconditionMissing(id)
		}
		if im != "*" {
			given := normEtag(im)
			if given != cur {
				return errPreconditionMismatch(given, cur, id)
			}
		}
	}
	if inm := strings.TrimSpace(r.Header.Get("If-None-Match")); inm != "" && exists {
		if inm == "*" {
			return errPreconditionExists(id, cur)
		}
		if normEtag(inm) == cur {
			return errPreconditionExists(id, cur)
		}
	}
	return nil
}

// normEtag brings an etag to NRP's weak form W/"x" (a bare or strong etag is
// compared as weak, as NRP does).
func normEtag(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, `W/"`) && strings.HasSuffix(s, `"`) && len(s) >= 4 {
		return s
	}
	if len(s) >= 2 && strings.HasPrefix(s, `"`) && strings.HasSuffix(s, `"`) {
		return `W/` + s
	}
	return `W/"` + s + `"`
}

// beginWrite takes the state lock and resolves the group for a write. On
// failure it has written the response and released the lock.
func (e *Emulator) beginWrite(c *reqCtx) (*writeCtx, bool) {
	e.mu.Lock()
	now := e.clock.Now()
	s := e.subscription(c.rt.sub)
	g := s.liveGroup(c.rt.rg, now)
	if g == nil {
		e.mu.Unlock()
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
		return nil, false
	}
	if g.deletingAt(now) {
		e.mu.Unlock()
		writeARMError(c.w, gatewayError(http.StatusConflict, "ResourceGroupBeingDeleted",
			"The resource group '%s' is in deprovisioning state and cannot perform this operation.", g.name))
		return nil, false
	}
	return &writeCtx{e: e, c: c, s: s, g: g, now: now}, true
}

// writeAccepted sets the polling headers of an accepted write.
func (c *reqCtx) writeAccepted(op *operation, withAsync, withLocation bool) {
	h := c.w.Header()
	if withAsync {
		h["Azure-Asyncoperation"] = []string{c.asyncURL(op)}
		h["Azure-Asyncnotification"] = []string{"Enabled"}
	}
	if withLocation {
		h["Location"] = []string{c.locationURL(op)}
	}
}

// responsePhase is the provisioning state a write response shows.
func (e *Emulator) responsePhase(c *reqCtx, op *operation, create bool, k *kindSpec, now time.Time) phase {
	if c.lroResult != "" || !op.done(now) {
		return phaseUpdating
	}
	if create && !k.createSucceeded {
		return phaseUpdating
	}
	return phaseSucceeded
}

func (e *Emulator) putResource(c *reqCtx, k *kindSpec) {
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
	en, cur := wc.g.liveEntry(k.typ, c.rt.name, wc.now)
	id := wc.resourceID(k, c.rt.name)
	if cur != nil {
		id, _ = cur.doc["id"].(string)
	}
	curEtag := ""
	if cur != nil {
		curEtag = cur.etag
	}
	if ae := checkPreconditions(c.r, id, curEtag, cur != nil); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur != nil && cur.busy(wc.now) {
		writeARMError(c.w, errAnotherOperation(c.asyncURL(cur.op)))
		return
	}
	doc, ae := k.normalize(wc, in, c.rt.name, cur)
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	loc, _ := doc["location"].(string)
	op := e.newOp(c, wc.s, loc, wc.now)
	nv := &version{doc: doc, etag: e.ids.etag(), op: op}
	if cur != nil {
		nv.ext = cur.ext
	}
	if en == nil {
		en = &entry{kind: k}
		wc.g.resources[resourceKey(k.typ, c.rt.name)] = en
	}
	en.cur = nv
	wc.memo = nil
	wc.runEffects()

	create := cur == nil
	ph := e.responsePhase(c, op, create, k, wc.now)
	var hide []string
	if create {
		hide = k.hideOnCreate
	}
	tree := renderTree(k, doc, nv.etag, ph.String(), hide)
	// Published documents are never mutated, so encoding can happen
	// without the lock.
	e.mu.Unlock()
	locked = false
	c.writeAccepted(op, !k.noAsyncOnPut, false)
	status := k.updateStatus
	if create {
		status = http.StatusCreated
	}
	writeJSONTree(c.w, status, tree)
}

// patchResource updates tags (the UpdateTags operation).
func (e *Emulator) patchResource(c *reqCtx, k *kindSpec) {
	in, ok := readObject(c)
	if !ok {
		return
	}
	tags, err := getTags(in)
	if err != nil {
		writeARMError(c.w, errBadShape(err))
		return
	}
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	defer e.mu.Unlock()
	en, cur := wc.g.liveEntry(k.typ, c.rt.name, wc.now)
	if cur == nil {
		writeARMError(c.w, errResourceNotFound(k.fullType, c.rt.name, wc.g.name))
		return
	}
	id, _ := cur.doc["id"].(string)
	if ae := checkPreconditions(c.r, id, cur.etag, true); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur.busy(wc.now) {
		writeARMError(c.w, errAnotherOperation(c.asyncURL(cur.op)))
		return
	}
	doc := shallowCopy(cur.doc)
	if _, has := in["tags"]; has {
		if tags == nil {
			delete(doc, "tags")
		} else {
			doc["tags"] = tags
		}
	}
	wc.replace(en, doc)
	writeJSON(c.w, http.StatusOK, e.renderVersion(k, en.cur, en.cur.phaseAt(wc.now)).bytes())
}

func (e *Emulator) deleteResource(c *reqCtx, k *kindSpec) {
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	defer e.mu.Unlock()
	en, cur := wc.g.liveEntry(k.typ, c.rt.name, wc.now)
	if cur == nil {
		if c.r.Header.Get("If-Match") != "" {
			writeARMError(c.w, errPreconditionMissing(wc.resourceID(k, c.rt.name)))
			return
		}
		c.w.WriteHeader(http.StatusNoContent)
		return
	}
	id, _ := cur.doc["id"].(string)
	if ae := checkPreconditions(c.r, id, cur.etag, true); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur.busy(wc.now) {
		writeARMError(c.w, errAnotherOperation(c.asyncURL(cur.op)))
		return
	}
	if k.checkDelete != nil {
		if ae := k.checkDelete(wc, cur); ae != nil {
			writeARMError(c.w, ae)
			return
		}
	}
	loc, _ := cur.doc["location"].(string)
	op := e.newOp(c, wc.s, loc, wc.now)
	op.delete = true
	if op.result == resultSucceeded && k.onDelete != nil {
		k.onDelete(wc, cur)
		wc.runEffects()
	}
	en.cur = &version{doc: cur.doc, etag: cur.etag, op: op, deleting: true, ext: cur.ext}
	status := k.deleteStatus
	if k.deleteStatusOf != nil {
		status = k.deleteStatusOf(cur)
	}
	c.writeAccepted(op, true, true)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(status)
}

// parentForChild resolves the parent of a child route under a lock held by
// the caller; on failure it writes the response.
func (e *Emulator) parentForChild(c *reqCtx, k *kindSpec, g *group, now time.Time) (*entry, *version, bool) {
	en, v := g.liveEntry(k.typ, c.rt.name, now)
	if v == nil {
		writeARMError(c.w, errResourceNotFound(k.fullType, c.rt.name, g.name))
		return nil, nil, false
	}
	return en, v, true
}

// readParent takes the read lock and finds the live parent of the child
// the request addresses. When it returns false it has answered the request
// and released the lock; otherwise the caller holds the read lock.
func (e *Emulator) readParent(c *reqCtx, k *kindSpec) (*version, time.Time, bool) {
	e.mu.RLock()
	now := e.clock.Now()
	_, g := e.readGroup(c, now)
	if g == nil {
		e.mu.RUnlock()
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
		return nil, now, false
	}
	_, v, ok := e.parentForChild(c, k, g, now)
	if !ok {
		e.mu.RUnlock()
		return nil, now, false
	}
	return v, now, true
}

func (e *Emulator) getChild(c *reqCtx, k *kindSpec, cs *collSpec) {
	v, now, ok := e.readParent(c, k)
	if !ok {
		return
	}
	b := e.renderChildBytes(k, v, v.phaseAt(now), cs.key, c.rt.childName)
	etag := v.etag
	parentID, _ := v.doc["id"].(string)
	e.mu.RUnlock()
	if b == nil {
		writeARMError(c.w, errChildNotFound(parentID+"/"+cs.key+"/"+c.rt.childName))
		return
	}
	c.w.Header()["Etag"] = []string{etag}
	writeJSON(c.w, http.StatusOK, b)
}

func (e *Emulator) listChildren(c *reqCtx, k *kindSpec, cs *collSpec) {
	v, now, ok := e.readParent(c, k)
	if !ok {
		return
	}
	r := e.renderVersion(k, v, v.phaseAt(now))
	arr, _ := propsOf(r.tree())[cs.key].([]any)
	body := mustMarshal(obj{"value": append([]any{}, arr...)})
	e.mu.RUnlock()
	writeJSON(c.w, http.StatusOK, body)
}

func (e *Emulator) putChild(c *reqCtx, k *kindSpec, cs *collSpec) {
	in, ok := readObject(c)
	if !ok {
		return
	}
	if n, ok, err := getStr(in, "name", ""); err != nil {
		writeARMError(c.w, errBadShape(err))
		return
	} else if ok && n != "" && !strings.EqualFold(n, c.rt.childName) {
		writeARMError(c.w, nrpError(http.StatusBadRequest, "InvalidRequestFormat",
			"The name '%s' in the request body does not match the name '%s' in the request URL.", n, c.rt.childName))
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
	en, cur, ok := e.parentForChild(c, k, wc.g, wc.now)
	if !ok {
		return
	}
	parentID, _ := cur.doc["id"].(string)
	props := propsOf(cur.doc)
	idx := childIndex(props, cs.key, c.rt.childName)
	childID := parentID + "/" + cs.key + "/" + c.rt.childName
	var existing obj
	if idx >= 0 {
		existing = props[cs.key].([]any)[idx].(obj)
		childID, _ = existing["id"].(string)
	}
	if ae := checkPreconditions(c.r, childID, cur.etag, idx >= 0); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur.busy(wc.now) {
		writeARMError(c.w, errAnotherOperation(c.asyncURL(cur.op)))
		return
	}
	// Work on a copy of the parent: the current version stays untouched
	// until the new one is published.
	doc := shallowCopy(cur.doc)
	np := shallowCopy(props)
	doc["properties"] = np
	child, ae := cs.putChild(wc, doc, c.rt.childName, in, existing)
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	arr, _ := np[cs.key].([]any)
	arr = append([]any(nil), arr...)
	if idx >= 0 {
		arr[idx] = child
	} else {
		arr = append(arr, child)
	}
	np[cs.key] = arr
	loc, _ := doc["location"].(string)
	op := e.newOp(c, wc.s, loc, wc.now)
	nv := &version{doc: doc, etag: e.ids.etag(), op: op}
	en.cur = nv
	wc.memo = nil
	wc.runEffects()

	ph := e.responsePhase(c, op, idx < 0, &kindSpec{}, wc.now)
	tree := renderOneChild(k, doc, cs.key, child, nv.etag, ph.String())
	// The answer is what a read of the child at this phase returns: when a
	// read now would see this phase, it is cached for the reads to come.
	cacheable := ph == nv.phaseAt(wc.now)
	e.mu.Unlock()
	locked = false
	c.writeAccepted(op, !k.noAsyncOnPut, false)
	status := http.StatusOK
	if idx < 0 {
		status = http.StatusCreated
	}
	if !cacheable {
		writeJSONTree(c.w, status, tree)
		return
	}
	b := mustMarshal(tree)
	e.cacheChild(k, nv, ph, cs.key, c.rt.childName, b)
	writeJSON(c.w, status, b)
}

func (e *Emulator) deleteChild(c *reqCtx, k *kindSpec, cs *collSpec) {
	wc, ok := e.beginWrite(c)
	if !ok {
		return
	}
	defer e.mu.Unlock()
	en, cur, ok := e.parentForChild(c, k, wc.g, wc.now)
	if !ok {
		return
	}
	props := propsOf(cur.doc)
	idx := childIndex(props, cs.key, c.rt.childName)
	if idx < 0 {
		if c.r.Header.Get("If-Match") != "" {
			parentID, _ := cur.doc["id"].(string)
			writeARMError(c.w, errPreconditionMissing(parentID+"/"+cs.key+"/"+c.rt.childName))
			return
		}
		c.w.WriteHeader(http.StatusNoContent)
		return
	}
	child := props[cs.key].([]any)[idx].(obj)
	childID, _ := child["id"].(string)
	if ae := checkPreconditions(c.r, childID, cur.etag, true); ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if cur.busy(wc.now) {
		writeARMError(c.w, errAnotherOperation(c.asyncURL(cur.op)))
		return
	}
	if cs.checkDeleteChild != nil {
		if ae := cs.checkDeleteChild(wc, cur.doc, child); ae != nil {
			writeARMError(c.w, ae)
			return
		}
	}
	loc, _ := cur.doc["location"].(string)
	op := e.newOp(c, wc.s, loc, wc.now)
	doc := cur.doc
	if op.result == resultSucceeded {
		doc = shallowCopy(cur.doc)
		np := shallowCopy(props)
		arr := append([]any(nil), props[cs.key].([]any)...)
		np[cs.key] = append(arr[:idx], arr[idx+1:]...)
		doc["properties"] = np
	}
	en.cur = &version{doc: doc, etag: e.ids.etag(), op: op}
	if op.result == resultSucceeded && cs.afterDeleteChild != nil {
		cs.afterDeleteChild(wc, doc, child)
		wc.runEffects()
	}
	c.writeAccepted(op, true, true)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(http.StatusAccepted)
}
