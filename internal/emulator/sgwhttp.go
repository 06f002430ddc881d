package emulator

import (
	"net/http"
	"net/url"
	"strconv"
)

// Answers to updateServices and updateAddressLocations (see
// Options.ServiceGatewayPOSTStatus).
const (
	// SGWPostOK is what NRP is observed to do: complete the update
	// synchronously and answer 200 with no body, still stamping
	// Azure-AsyncOperation and Location headers. The SDK (armnetwork v9)
	// treats that 200 as an error; clients must accept it themselves.
	SGWPostOK = http.StatusOK
	// SGWPostAccepted is what the REST specification and the SDK expect:
	// 202 with Azure-AsyncOperation and Location; the operation succeeds
	// after OperationDuration and the Location URL then answers 204.
	SGWPostAccepted = http.StatusAccepted
)

// DefaultSGWPageSize is how many items (services, or address locations) a
// page of GET services / GET addressLocations holds before nextLink.
const DefaultSGWPageSize = 100

// SetServiceGatewayPOSTStatus selects how updateServices and
// updateAddressLocations answer: SGWPostOK or SGWPostAccepted.
func (e *Emulator) SetServiceGatewayPOSTStatus(status int) error {
	if err := (Options{ServiceGatewayPOSTStatus: status, ServiceGatewayPageSize: 1}).validateServiceGateway(); err != nil {
		return err
	}
	e.sgwPostStatus.Store(int32(status))
	return nil
}

// SetServiceGatewayPageSize sets the page size of GET services and GET
// addressLocations (at least 1).
func (e *Emulator) SetServiceGatewayPageSize(n int) error {
	if err := (Options{ServiceGatewayPOSTStatus: SGWPostOK, ServiceGatewayPageSize: n}).validateServiceGateway(); err != nil {
		return err
	}
	e.sgwPageSize.Store(int32(n))
	return nil
}

// readSGW takes the read lock and finds the live gateway of the request.
// When it returns nil it has answered and released the lock; otherwise the
// caller holds the read lock.
func (e *Emulator) readSGW(c *reqCtx, k *kindSpec) *entry {
	e.mu.RLock()
	now := e.clock.Now()
	_, g := e.readGroup(c, now)
	if g == nil {
		e.mu.RUnlock()
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
		return nil
	}
	en, v := g.liveEntry(k.typ, c.rt.name, now)
	if v == nil {
		e.mu.RUnlock()
		writeARMError(c.w, errResourceNotFound(k.fullType, c.rt.name, g.name))
		return nil
	}
	return en
}

// page returns the [from, to) window of n items for the request's
// $skiptoken, and the nextLink when more follow.
func (e *Emulator) page(c *reqCtx, n int) (from, to int, next string, ae *armError) {
	q, err := url.ParseQuery(c.r.URL.RawQuery)
	if err != nil {
		return 0, 0, "", gatewayError(http.StatusBadRequest, "InvalidQueryParameter", "The query string could not be parsed.")
	}
	if tok := q.Get("$skiptoken"); tok != "" {
		from, err = strconv.Atoi(tok)
		if err != nil || from < 0 {
			return 0, 0, "", gatewayError(http.StatusBadRequest, "InvalidSkipToken", "The $skiptoken '%s' is not valid.", tok)
		}
	}
	size := int(e.sgwPageSize.Load())
	from = min(from, n)
	to = min(from+size, n)
	if to < n {
		next = c.base + c.r.URL.EscapedPath() + "?api-version=" + NetworkAPIVersion + "&%24skiptoken=" + strconv.Itoa(to)
	}
	return from, to, next, nil
}

func writePage(c *reqCtx, items []any, next string) {
	body := obj{"value": items}
	if next != "" {
		body["nextLink"] = next
	}
	writeJSONTree(c.w, http.StatusOK, body)
}

// listSGWServices serves GET .../serviceGateways/{name}/services.
func (e *Emulator) listSGWServices(c *reqCtx, k *kindSpec) {
	en := e.readSGW(c, k)
	if en == nil {
		return
	}
	var all []any
	if st, _ := en.ext.(*sgwState); st != nil {
		all = st.renderServices()
	}
	e.mu.RUnlock()
	from, to, next, ae := e.page(c, len(all))
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	writePage(c, append([]any{}, all[from:to]...), next)
}

// listSGWLocations serves GET .../serviceGateways/{name}/addressLocations.
func (e *Emulator) listSGWLocations(c *reqCtx, k *kindSpec) {
	en := e.readSGW(c, k)
	if en == nil {
		return
	}
	st, _ := en.ext.(*sgwState)
	if st == nil {
		st = newSGWState()
	}
	locs := st.sortedLocations()
	from, to, next, ae := e.page(c, len(locs))
	if ae != nil {
		e.mu.RUnlock()
		writeARMError(c.w, ae)
		return
	}
	items := make([]any, 0, to-from)
	for _, l := range locs[from:to] {
		items = append(items, st.renderLocation(l))
	}
	e.mu.RUnlock()
	writePage(c, items, next)
}

// sgwApply validates a POST body against the gateway's state and returns
// the change to make.
type sgwApply func(wc *writeCtx, st *sgwState, gw obj, in obj) (func(), *armError)

// postSGW serves updateServices and updateAddressLocations: the request is
// validated as a whole and applied atomically when its operation succeeds
// (at once: the operation's outcome is fixed when it starts).
// servicesChange says whether the request changes the services (rendered
// in the gateway's document).
func (e *Emulator) postSGW(c *reqCtx, k *kindSpec, apply sgwApply, servicesChange bool) {
	raw, ae := readBody(c)
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	if sw, ok := c.w.(*statusWriter); ok {
		sw.body = raw
	}
	in, err := decodeObject(raw)
	if err != nil {
		writeARMError(c.w, errInvalidJSON(err))
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
	if cur.busy(wc.now) {
		writeARMError(c.w, errAnotherOperation(c.asyncURL(cur.op)))
		return
	}
	st := sgwStateOf(en)
	commit, ae := apply(wc, st, cur.doc, in)
	if ae != nil {
		writeARMError(c.w, ae)
		return
	}
	status := int(e.sgwPostStatus.Load())
	if c.lroResult != "" {
		status = SGWPostAccepted // a failing operation is only visible through polling
	}
	op := e.newOp(c, wc.s, stringOf(cur.doc["location"]), wc.now)
	if status == SGWPostOK {
		op.end = wc.now // completed synchronously
	}
	doc := cur.doc
	if op.result == resultSucceeded {
		commit()
		if servicesChange {
			doc = shallowCopy(cur.doc)
			props := shallowCopy(propsOf(cur.doc))
			props["services"] = st.renderServices()
			doc["properties"] = props
		}
	}
	en.cur = &version{doc: doc, etag: e.ids.etag(), op: op}
	c.writeAccepted(op, true, true)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(status)
}
