package emulator

import (
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// kindSpec describes how one Microsoft.Network resource type behaves.
type kindSpec struct {
	typ      string // URL segment in canonical case, e.g. "loadBalancers"
	fullType string // "Microsoft.Network/loadBalancers"

	// createSucceeded: the create response already shows Succeeded (NRP
	// creates these synchronously: loadBalancers, networkInterfaces).
	createSucceeded bool
	// noAsyncOnPut: PUT responses carry no Azure-AsyncOperation header.
	noAsyncOnPut bool
	// updateStatus is the status of a PUT on an existing resource (200;
	// virtualNetworks answer 201 as the recordings show).
	updateStatus int
	// deleteStatus is the status of an accepted DELETE (202; NICs answer 200).
	deleteStatus int
	// deleteStatusOf, when set, picks the status per version.
	deleteStatusOf func(v *version) int
	// hideOnCreate lists properties omitted from the create response
	// (allocated while the operation runs, e.g. ipAddress).
	hideOnCreate []string

	// collections are the child collections under properties, rendered with
	// id, type and the parent's etag and provisioningState.
	collections []*collSpec

	// normalize validates a PUT body and builds the stored document.
	// old is the current version on update, nil on create.
	normalize func(wc *writeCtx, in obj, name string, old *version) (obj, *armError)
	// decorate adds computed members to a rendered tree (back-references).
	decorate func(tree obj)
	// decorateFrom lists the collections decorate reads (rendering a single
	// child only needs these besides the child itself).
	decorateFrom []string
	// checkDelete rejects deletes of resources still in use.
	checkDelete func(wc *writeCtx, v *version) *armError
	// onDelete releases what the resource held (addresses, back-references).
	onDelete func(wc *writeCtx, v *version)
	// render, when set, renders a version at a phase (Compute kinds, whose
	// documents are not shaped like Microsoft.Network's).
	render func(v *version, ph phase) obj
	// serveExtra serves routes under the resource other than its child
	// collections (serviceGateways' services, addressLocations and POST
	// actions); it returns false when the route is not one of them.
	serveExtra func(e *Emulator, c *reqCtx, k *kindSpec) bool
}

// collSpec is a child collection of a resource.
type collSpec struct {
	key      string // property name and URL segment, e.g. "backendAddressPools"
	fullType string // "Microsoft.Network/loadBalancers/backendAddressPools"
	// routable collections are served as subresources (PUT/GET/DELETE/list).
	routable bool
	// putChild merges a subresource PUT into a copy of the parent's
	// properties and returns the normalized child.
	putChild func(wc *writeCtx, parent obj, name string, in obj, existing obj) (obj, *armError)
	// checkDeleteChild rejects deleting a child still in use.
	checkDeleteChild func(wc *writeCtx, parent obj, child obj) *armError
	// afterDeleteChild, when set, runs once a child delete is accepted
	// (back-references the child held elsewhere).
	afterDeleteChild func(wc *writeCtx, parent obj, child obj)
}

var kinds = map[string]*kindSpec{}

func registerKind(k *kindSpec) {
	if k.updateStatus == 0 {
		k.updateStatus = http.StatusOK
	}
	if k.deleteStatus == 0 {
		k.deleteStatus = http.StatusAccepted
	}
	kinds[strings.ToLower(k.typ)] = k
}

func (k *kindSpec) collection(seg string) *collSpec {
	for _, c := range k.collections {
		if strings.EqualFold(c.key, seg) {
			return c
		}
	}
	return nil
}

// writeCtx is the context of one write under the state lock.
type writeCtx struct {
	e   *Emulator
	c   *reqCtx
	s   *subscription
	g   *group
	now time.Time
	// effects run after the write is accepted (cross-resource updates).
	effects []func()
	// memo caches id lookups within one write.
	memo map[string]lookupResult
	// members are NIC-based pool membership changes, applied after the
	// effects (see membership.go).
	members []memberChange
	// subnetUsed caches, per lower-cased subnet id, the private addresses
	// in use during this write (Compute allocations).
	subnetUsed map[string]map[netip.Addr]bool
}

type lookupResult struct {
	a  armID
	en *entry
	v  *version
	g  *group
}

func (wc *writeCtx) after(f func()) { wc.effects = append(wc.effects, f) }

func (wc *writeCtx) runEffects() {
	for _, f := range wc.effects {
		f()
	}
	wc.effects = nil
	wc.flushMembers()
}

// resourceID builds the id of a top-level resource in the write's group.
func (wc *writeCtx) resourceID(k *kindSpec, name string) string {
	return "/subscriptions/" + wc.s.id + "/resourceGroups/" + wc.g.name + "/providers/Microsoft.Network/" + k.typ + "/" + name
}

// lookup resolves a resource id to a live top-level resource. Results are
// memoized for the duration of the write; callers that publish a new
// version of a resource go through replace, which drops the memo.
func (wc *writeCtx) lookup(id string) (armID, *entry, *version, *group) {
	if r, ok := wc.memo[id]; ok {
		return r.a, r.en, r.v, r.g
	}
	a, en, v, g := wc.lookupUncached(id)
	if wc.memo == nil {
		wc.memo = map[string]lookupResult{}
	}
	wc.memo[id] = lookupResult{a, en, v, g}
	return a, en, v, g
}

func (wc *writeCtx) lookupUncached(id string) (armID, *entry, *version, *group) {
	a, ok := parseResourceID(id)
	if !ok || !strings.EqualFold(a.ns, "Microsoft.Network") && !strings.EqualFold(a.ns, "Microsoft.Compute") {
		return a, nil, nil, nil
	}
	s := wc.e.subs[strings.ToLower(a.sub)]
	if s == nil {
		return a, nil, nil, nil
	}
	g := s.liveGroup(a.rg, wc.now)
	if g == nil {
		return a, nil, nil, nil
	}
	en, v := g.liveEntry(a.typ, a.name, wc.now)
	return a, en, v, g
}

// lookupKind resolves id to a live resource of kind typ (no child part).
func (wc *writeCtx) lookupKind(id, typ string) (*entry, *version) {
	a, en, v, _ := wc.lookup(id)
	if en == nil || a.childType != "" || !strings.EqualFold(a.typ, typ) {
		return nil, nil
	}
	return en, v
}

// lookupChild resolves id to a child object of a live resource.
func (wc *writeCtx) lookupChild(id, typ, childKey string) (*version, obj) {
	a, en, v, _ := wc.lookup(id)
	if en == nil || !strings.EqualFold(a.typ, typ) || !strings.EqualFold(a.childType, childKey) {
		return nil, nil
	}
	return v, findChild(propsOf(v.doc), childKey, a.childName)
}

// replace publishes a new version of a resource with a new etag, keeping
// its operation state.
func (wc *writeCtx) replace(en *entry, doc obj) {
	wc.memo = nil
	old := en.cur
	en.cur = &version{doc: doc, etag: wc.e.ids.etag(), op: old.op, deleting: old.deleting, creating: old.creating, ext: old.ext}
}

// propsOf returns doc["properties"] (never nil).
func propsOf(doc obj) obj {
	if p, ok := doc["properties"].(map[string]any); ok {
		return p
	}
	return obj{}
}

// findChild finds a child by name (case-insensitive) in props[key].
func findChild(props obj, key, name string) obj {
	arr, _ := props[key].([]any)
	for _, c := range arr {
		if co, ok := c.(map[string]any); ok {
			if n, _ := co["name"].(string); strings.EqualFold(n, name) {
				return co
			}
		}
	}
	return nil
}

// childIndex returns the index of child name in props[key], or -1.
func childIndex(props obj, key, name string) int {
	arr, _ := props[key].([]any)
	for i, c := range arr {
		if co, ok := c.(map[string]any); ok {
			if n, _ := co["name"].(string); strings.EqualFold(n, name) {
				return i
			}
		}
	}
	return -1
}

// baseDoc validates the members every top-level resource shares and returns
// the stored document skeleton plus the (copied) input properties.
func baseDoc(wc *writeCtx, k *kindSpec, in obj, name string, old *version, locationRequired bool) (obj, obj, *armError) {
	if n, ok, err := getStr(in, "name", ""); err != nil {
		return nil, nil, errBadShape(err)
	} else if ok && n != "" && !strings.EqualFold(n, name) {
		return nil, nil, nrpError(http.StatusBadRequest, "InvalidRequestFormat",
			"The name '%s' in the request body does not match the name '%s' in the request URL.", n, name)
	}
	loc, hasLoc, err := getStr(in, "location", "")
	if err != nil {
		return nil, nil, errBadShape(err)
	}
	loc = normLocation(loc)
	storedName := name
	if old != nil {
		storedName, _ = old.doc["name"].(string)
		oldLoc, _ := old.doc["location"].(string)
		if !hasLoc || loc == "" {
			loc = oldLoc
		} else if loc != oldLoc {
			return nil, nil, gatewayError(http.StatusBadRequest, "InvalidResourceLocation",
				"The resource '%s' already exists in location '%s' in resource group '%s'. A resource with the same name cannot be created in location '%s'. Please select a new resource name.",
				storedName, oldLoc, wc.g.name, loc)
		}
	} else if locationRequired && loc == "" {
		return nil, nil, gatewayError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	doc := obj{
		"name": storedName,
		"id":   wc.resourceID(k, storedName),
		"type": k.fullType,
	}
	if loc != "" {
		doc["location"] = loc
	}
	tags, err := getTags(in)
	if err != nil {
		return nil, nil, errBadShape(err)
	}
	if tags != nil {
		doc["tags"] = tags
	}
	if z, ok, err := getArr(in, "zones", ""); err != nil {
		return nil, nil, errBadShape(err)
	} else if ok {
		for i, v := range z {
			if _, isStr := v.(string); !isStr {
				return nil, nil, errBadShape(&fieldError{indexPath("zones", i), "expected a string, got " + jsonKind(v)})
			}
		}
		doc["zones"] = deepCopy(z)
	}
	if el, err := getObj(in, "extendedLocation", ""); err != nil {
		return nil, nil, errBadShape(err)
	} else if el != nil {
		doc["extendedLocation"] = deepCopy(el)
	}
	props, err := getObj(in, "properties", "")
	if err != nil {
		return nil, nil, errBadShape(err)
	}
	if props == nil {
		props = obj{}
	}
	props = deepCopy(props).(obj)
	delete(props, "provisioningState")
	delete(props, "resourceGuid")
	return doc, props, nil
}

// keepGUID carries the resourceGuid over from old or makes a new one.
func keepGUID(wc *writeCtx, props obj, old *version) {
	if old != nil {
		if g, ok := propsOf(old.doc)["resourceGuid"]; ok {
			props["resourceGuid"] = g
			return
		}
	}
	props["resourceGuid"] = wc.e.ids.uuid()
}

// normSku validates sku {name, tier} against allowed names (case-insensitive,
// canonicalized) and fills the default tier.
func normSku(in obj, allowed []string, def string) (obj, *armError) {
	sku, err := getObj(in, "sku", "")
	if err != nil {
		return nil, errBadShape(err)
	}
	name, tier := def, "Regional"
	if sku != nil {
		n, ok, err := getStr(sku, "name", "sku")
		if err != nil {
			return nil, errBadShape(err)
		}
		if ok && n != "" {
			name = ""
			for _, a := range allowed {
				if strings.EqualFold(a, n) {
					name = a
				}
			}
			if name == "" {
				return nil, nrpError(http.StatusBadRequest, "InvalidRequestFormat",
					"Cannot parse the request: sku.name '%s' is not one of %s.", n, strings.Join(allowed, ", "))
			}
		}
		t, ok, err := getStr(sku, "tier", "sku")
		if err != nil {
			return nil, errBadShape(err)
		}
		if ok && t != "" {
			switch {
			case strings.EqualFold(t, "Regional"):
				tier = "Regional"
			case strings.EqualFold(t, "Global"):
				tier = "Global"
			default:
				return nil, nrpError(http.StatusBadRequest, "InvalidRequestFormat",
					"Cannot parse the request: sku.tier '%s' is not one of Regional, Global.", t)
			}
		}
	}
	return obj{"name": name, "tier": tier}, nil
}

// normChildren validates the child collection props[key] and rewrites it to
// the stored form: each child gets name, id and type; each child's
// properties are passed to fn for kind-specific checks. Read-only members
// listed in readOnly are dropped from the input.
func normChildren(props obj, key, parentID, fullType, path string, readOnly []string,
	fn func(name, id string, cprops obj, path string) *armError) ([]any, *armError) {
	arr, ok, err := getArr(props, key, path)
	if err != nil {
		return nil, errBadShape(err)
	}
	out := make([]any, 0, len(arr))
	if !ok {
		return out, nil
	}
	seen := map[string]bool{}
	for i, el := range arr {
		p := indexPath(joinPath(path, key), i)
		ch, isObj := el.(map[string]any)
		if !isObj {
			return nil, errBadShape(&fieldError{p, "expected an object, got " + jsonKind(el)})
		}
		name, has, err := getStr(ch, "name", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		if !has || name == "" {
			return nil, nrpError(http.StatusBadRequest, "InvalidRequestFormat",
				"Cannot parse the request: %s.name is required for a child resource of %s.", p, parentID)
		}
		if seen[strings.ToLower(name)] {
			e := nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request.")
			e.details = []armError{{code: "DuplicateResourceName", message: "Resource " + parentID + " has two child resources with the same name (" + name + ") in " + key + "."}}
			return nil, e
		}
		seen[strings.ToLower(name)] = true
		cp, err := getObj(ch, "properties", p)
		if err != nil {
			return nil, errBadShape(err)
		}
		if cp == nil {
			cp = obj{}
		} else {
			cp = shallowCopy(cp)
		}
		delete(cp, "provisioningState")
		for _, ro := range readOnly {
			delete(cp, ro)
		}
		id := parentID + "/" + key + "/" + name
		if fn != nil {
			if ae := fn(name, id, cp, joinPath(p, "properties")); ae != nil {
				return nil, ae
			}
		}
		c := obj{"name": name, "id": id, "type": fullType, "properties": cp}
		if z, ok := ch["zones"]; ok && z != nil {
			c["zones"] = deepCopy(z)
		}
		out = append(out, c)
	}
	return out, nil
}

// renderTree renders a stored document at provisioning state ps with etag.
func renderTree(k *kindSpec, doc obj, etag, ps string, hide []string) obj {
	out := shallowCopy(doc)
	out["etag"] = etag
	p := shallowCopy(propsOf(doc))
	p["provisioningState"] = ps
	for _, h := range hide {
		delete(p, h)
	}
	for _, cs := range k.collections {
		arr, ok := p[cs.key].([]any)
		if !ok {
			continue
		}
		na := make([]any, len(arr))
		for i, ch := range arr {
			na[i] = renderChild(ch, etag, ps)
		}
		p[cs.key] = na
	}
	out["properties"] = p
	if k.decorate != nil {
		k.decorate(out)
	}
	return out
}

func renderChild(ch any, etag, ps string) any {
	co, ok := ch.(map[string]any)
	if !ok {
		return ch
	}
	o := shallowCopy(co)
	o["etag"] = etag
	cp := shallowCopy(propsOf(co))
	cp["provisioningState"] = ps
	o["properties"] = cp
	return o
}

// renderOneChild renders child (a member of doc's collection key) with the
// parent's etag and provisioning state, including the back-references
// decorate computes, without rendering the other children.
func renderOneChild(k *kindSpec, doc obj, key string, child obj, etag, ps string) obj {
	props := propsOf(doc)
	tp := obj{key: []any{child}}
	for _, c := range k.decorateFrom {
		if c != key {
			tp[c] = props[c]
		}
	}
	tmp := shallowCopy(doc)
	tmp["properties"] = tp
	tree := renderTree(k, tmp, etag, ps, nil)
	arr, _ := propsOf(tree)[key].([]any)
	if len(arr) == 0 {
		return nil
	}
	out, _ := arr[0].(obj)
	return out
}

// renderVersion renders (and caches) v at phase ph.
func (e *Emulator) renderVersion(k *kindSpec, v *version, ph phase) *rendered {
	if r := v.cache[ph].Load(); r != nil {
		return r
	}
	r := &rendered{build: func() obj {
		if k.render != nil {
			return k.render(v, ph)
		}
		return renderTree(k, v.doc, v.etag, ph.String(), nil)
	}}
	if !v.cache[ph].CompareAndSwap(nil, r) {
		return v.cache[ph].Load()
	}
	return r
}

// renderChildBytes renders (and caches) one child of v at phase ph.
func (e *Emulator) renderChildBytes(k *kindSpec, v *version, ph phase, key, name string) []byte {
	r := e.renderVersion(k, v, ph)
	ck := strings.ToLower(key) + "/" + strings.ToLower(name)
	if b, ok := r.children.Load(ck); ok {
		return b.([]byte)
	}
	ch := findChild(propsOf(r.tree()), key, name)
	if ch == nil {
		return nil
	}
	b := mustMarshal(ch)
	r.children.Store(ck, b)
	return b
}

// cacheChild records a child's rendering at phase ph (a write's answer) as
// what reads of that child will answer, so they render nothing.
func (e *Emulator) cacheChild(k *kindSpec, v *version, ph phase, key, name string, b []byte) {
	e.renderVersion(k, v, ph).children.Store(strings.ToLower(key)+"/"+strings.ToLower(name), b)
}

// rawJSON embeds pre-encoded JSON in a marshalled value.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }
