package emulator

import (
	"net/http"
	"sort"
	"strings"
	"time"
)

// renderGroup renders a resource group as ARM does.
func (e *Emulator) renderGroup(sub string, g *group, now time.Time) []byte {
	state := "Succeeded"
	if g.deletingAt(now) {
		state = "Deleting"
	}
	m := obj{
		"id":         "/subscriptions/" + sub + "/resourceGroups/" + g.name,
		"name":       g.name,
		"type":       "Microsoft.Resources/resourceGroups",
		"location":   g.location,
		"properties": obj{"provisioningState": state},
	}
	if g.tags != nil {
		m["tags"] = g.tags
	}
	if g.managedBy != "" {
		m["managedBy"] = g.managedBy
	}
	return mustMarshal(m)
}

func (e *Emulator) listGroups(c *reqCtx) {
	if c.r.Method != http.MethodGet {
		methodNotAllowed(c)
		return
	}
	e.mu.RLock()
	now := e.clock.Now()
	var items []any
	if s := e.subs[strings.ToLower(c.rt.sub)]; s != nil {
		names := make([]string, 0, len(s.groups))
		for k, g := range s.groups {
			if !g.goneAt(now) {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			items = append(items, rawJSON(e.renderGroup(s.id, s.groups[k], now)))
		}
	}
	e.mu.RUnlock()
	if items == nil {
		items = []any{}
	}
	writeJSON(c.w, http.StatusOK, mustMarshal(obj{"value": items}))
}

func (e *Emulator) serveGroup(c *reqCtx) {
	switch c.r.Method {
	case http.MethodGet, http.MethodHead:
		e.mu.RLock()
		now := e.clock.Now()
		var body []byte
		if s := e.subs[strings.ToLower(c.rt.sub)]; s != nil {
			if g := s.liveGroup(c.rt.rg, now); g != nil {
				body = e.renderGroup(s.id, g, now)
			}
		}
		e.mu.RUnlock()
		if c.r.Method == http.MethodHead {
			if body == nil {
				c.w.WriteHeader(http.StatusNotFound)
			} else {
				c.w.WriteHeader(http.StatusNoContent)
			}
			return
		}
		if body == nil {
			writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
			return
		}
		writeJSON(c.w, http.StatusOK, body)
	case http.MethodPut, http.MethodPatch:
		e.putGroup(c)
	case http.MethodDelete:
		e.deleteGroup(c)
	default:
		methodNotAllowed(c)
	}
}

// validGroupName applies ARM's resource group naming rules.
func validGroupName(n string) bool {
	if n == "" || len(n) > 90 || strings.HasSuffix(n, ".") {
		return false
	}
	for _, r := range n {
		switch {
		case r == '-' || r == '_' || r == '.' || r == '(' || r == ')':
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r > 127: // Unicode letters and digits are allowed
		default:
			return false
		}
	}
	return true
}

func (e *Emulator) putGroup(c *reqCtx) {
	if !validGroupName(c.rt.rg) {
		writeARMError(c.w, gatewayError(http.StatusBadRequest, "InvalidResourceGroup",
			"The provided resource group name '%s' has these invalid characters or length. Resource group names may contain alphanumerics, underscores, parentheses, hyphens and periods, be 1-90 characters long, and not end in a period.", c.rt.rg))
		return
	}
	in, ok := readObject(c)
	if !ok {
		return
	}
	loc, hasLoc, ferr := getStr(in, "location", "")
	var tags obj
	if ferr == nil {
		tags, ferr = getTags(in)
	}
	managedBy := ""
	if ferr == nil {
		managedBy, _, ferr = getStr(in, "managedBy", "")
	}
	if ferr != nil {
		writeARMError(c.w, gatewayError(http.StatusBadRequest, "InvalidRequestContent",
			"The request content was invalid and could not be deserialized: '%s'.", sanitizeMsg(ferr.Error())))
		return
	}
	e.mu.Lock()
	now := e.clock.Now()
	defer e.mu.Unlock()
	s := e.subscription(c.rt.sub)
	g := s.liveGroup(c.rt.rg, now)
	if c.r.Method == http.MethodPatch {
		if g == nil {
			writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
			return
		}
		if _, ok := in["tags"]; ok {
			g.tags = tags
		}
		if managedBy != "" {
			g.managedBy = managedBy
		}
		writeJSON(c.w, http.StatusOK, e.renderGroup(s.id, g, now))
		return
	}
	if !hasLoc || loc == "" {
		writeARMError(c.w, gatewayError(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition."))
		return
	}
	loc = normLocation(loc)
	if g != nil && g.deletingAt(now) {
		writeARMError(c.w, gatewayError(http.StatusConflict, "ResourceGroupBeingDeleted",
			"The resource group '%s' is in deprovisioning state and cannot perform this operation.", g.name))
		return
	}
	status := http.StatusOK
	if g == nil {
		g = &group{name: c.rt.rg, location: loc, resources: map[string]*entry{}}
		s.groups[strings.ToLower(c.rt.rg)] = g
		status = http.StatusCreated
	} else if g.location != loc {
		writeARMError(c.w, gatewayError(http.StatusConflict, "InvalidResourceGroupLocation",
			"Invalid resource group location '%s'. The Resource group already exists in location '%s'.", loc, g.location))
		return
	}
	g.tags = tags
	g.managedBy = managedBy
	writeJSON(c.w, status, e.renderGroup(s.id, g, now))
}

// getTags reads the optional tags object (string values only).
func getTags(in obj) (obj, error) {
	t, err := getObj(in, "tags", "")
	if err != nil || t == nil {
		return nil, err
	}
	out := make(obj, len(t))
	for k, v := range t {
		s, ok := v.(string)
		if !ok {
			return nil, &fieldError{"tags." + k, "tag values must be strings, got " + jsonKind(v)}
		}
		out[k] = s
	}
	return out, nil
}

func (e *Emulator) deleteGroup(c *reqCtx) {
	e.mu.Lock()
	now := e.clock.Now()
	defer e.mu.Unlock()
	s := e.subscription(c.rt.sub)
	g := s.liveGroup(c.rt.rg, now)
	if g == nil {
		writeARMError(c.w, errResourceGroupNotFound(c.rt.rg))
		return
	}
	if g.deleteOp == nil || g.deleteOp.done(now) {
		op := e.newOp(c, s, g.location, now)
		op.rgDelete = true
		g.deleteOp = op
		if op.result == resultSucceeded {
			wc := &writeCtx{e: e, c: c, s: s, g: g, now: now}
			for _, en := range g.resources {
				if en.cur != nil && en.cur.phaseAt(now) != phaseGone && en.kind.onDelete != nil {
					en.kind.onDelete(wc, en.cur)
				}
			}
			g.resources = map[string]*entry{}
		}
	}
	token := groupJobToken(g.deleteOp.id, g.name, g.location)
	c.w.Header().Set("Location", c.base+"/subscriptions/"+s.id+"/operationresults/"+token+"?api-version="+c.apiVersion)
	c.w.Header().Set("Content-Length", "0")
	c.w.WriteHeader(http.StatusAccepted)
}
