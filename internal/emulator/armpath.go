package emulator

import (
	"net/http"
	"net/url"
	"strings"
)

// routeKind classifies an ARM path.
type routeKind int

const (
	routeUnknown          routeKind = iota
	routeSubscription               // /subscriptions/{sub}
	routeGroupList                  // /subscriptions/{sub}/resourcegroups
	routeGroup                      // /subscriptions/{sub}/resourcegroups/{rg}
	routeGroupOpResult              // /subscriptions/{sub}/operationresults/{token}
	routeTypeList                   // .../resourcegroups/{rg}/providers/{ns}/{type}
	routeSubTypeList                // /subscriptions/{sub}/providers/{ns}/{type}
	routeResource                   // .../providers/{ns}/{type}/{name}
	routeChildList                  // .../{type}/{name}/{childType}
	routeChild                      // .../{type}/{name}/{childType}/{childName}
	routeOperation                  // /subscriptions/{sub}/providers/{ns}/locations/{loc}/operations/{id}
	routeOperationResult            // .../locations/{loc}/operationResults/{id}
	routeProvider                   // /subscriptions/{sub}/providers/{ns}
	routeProviderRegister           // /subscriptions/{sub}/providers/{ns}/register
	routeFeature                    // /subscriptions/{sub}/providers/Microsoft.Features/providers/{ns}/features/{name}[/register|/unregister]
)

// route is a parsed ARM path. Names keep the case of the request.
type route struct {
	kind      routeKind
	sub       string
	rg        string
	ns        string
	typ       string
	name      string
	childType string
	childName string
	location  string
	opID      string
	// extra holds segments after childName (Microsoft.Compute paths such as
	// .../virtualMachines/{i}/instanceView or .../networkInterfaces/{nic});
	// only the Compute routes accept them.
	extra []string
}

// parseARMPath parses an ARM URL path case-insensitively.
func parseARMPath(p string) (route, *armError) {
	p = strings.Trim(p, "/")
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if s == "" {
			return route{}, errBadPath(p)
		}
	}
	var rt route
	if len(segs) < 2 || !strings.EqualFold(segs[0], "subscriptions") {
		return rt, errBadPath(p)
	}
	rt.sub = segs[1]
	if !isGUID(rt.sub) {
		return rt, &armError{status: http.StatusBadRequest, code: "InvalidSubscriptionId",
			message: "The provided subscription identifier '" + rt.sub + "' is malformed or invalid.", gateway: true}
	}
	rest := segs[2:]
	switch {
	case len(rest) == 0:
		rt.kind = routeSubscription
	case strings.EqualFold(rest[0], "resourcegroups"):
		switch {
		case len(rest) == 1:
			rt.kind = routeGroupList
		case len(rest) == 2:
			rt.kind, rt.rg = routeGroup, rest[1]
		case len(rest) >= 5 && strings.EqualFold(rest[2], "providers"):
			rt.rg, rt.ns, rt.typ = rest[1], rest[3], rest[4]
			switch len(rest) {
			case 5:
				rt.kind = routeTypeList
			case 6:
				rt.kind, rt.name = routeResource, rest[5]
			case 7:
				rt.kind, rt.name, rt.childType = routeChildList, rest[5], rest[6]
			case 8, 9, 10, 11, 12:
				rt.kind, rt.name, rt.childType, rt.childName = routeChild, rest[5], rest[6], rest[7]
				rt.extra = rest[8:]
			default:
				return rt, errBadPath(p)
			}
		default:
			return rt, errBadPath(p)
		}
	case strings.EqualFold(rest[0], "operationresults") && len(rest) == 2:
		rt.kind, rt.opID = routeGroupOpResult, rest[1]
	case strings.EqualFold(rest[0], "providers") && len(rest) == 2:
		rt.kind, rt.ns = routeProvider, rest[1]
	case strings.EqualFold(rest[0], "providers") && strings.EqualFold(rest[1], "Microsoft.Features") &&
		(len(rest) == 6 || len(rest) == 7) && strings.EqualFold(rest[2], "providers") && strings.EqualFold(rest[4], "features"):
		rt.kind, rt.ns, rt.name = routeFeature, rest[3], rest[5]
		if len(rest) == 7 {
			rt.childType = rest[6]
		}
	case strings.EqualFold(rest[0], "providers") && len(rest) >= 3:
		rt.ns = rest[1]
		switch {
		case len(rest) == 3 && strings.EqualFold(rest[2], "register"):
			rt.kind = routeProviderRegister
		case len(rest) == 3:
			rt.kind, rt.typ = routeSubTypeList, rest[2]
		case len(rest) == 6 && strings.EqualFold(rest[2], "locations") && strings.EqualFold(rest[4], "operations"):
			rt.kind, rt.location, rt.opID = routeOperation, rest[3], rest[5]
		case len(rest) == 6 && strings.EqualFold(rest[2], "locations") && strings.EqualFold(rest[4], "operationresults"):
			rt.kind, rt.location, rt.opID = routeOperationResult, rest[3], rest[5]
		default:
			return rt, errBadPath(p)
		}
	default:
		return rt, errBadPath(p)
	}
	return rt, nil
}

func errBadPath(p string) *armError {
	return &armError{status: http.StatusNotFound, code: "InvalidResourceType",
		message: "The resource path '/" + p + "' is not served by ARM or by the emulator.", gateway: true}
}

// isGUID reports whether s has the 8-4-4-4-12 hex form.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
				return false
			}
		}
	}
	return true
}

// apiVersion returns the api-version query parameter without parsing the
// whole query.
func apiVersion(rawQuery string) (string, bool) {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k == "api-version" {
			if uv, err := url.QueryUnescape(v); err == nil {
				v = uv
			}
			return v, v != ""
		}
	}
	return "", false
}

// armID is a parsed resource id.
type armID struct {
	sub, rg, ns, typ, name, childType, childName string
}

// parseResourceID parses /subscriptions/{s}/resourceGroups/{rg}/providers/{ns}/{type}/{name}[/{ct}/{cn}].
func parseResourceID(id string) (armID, bool) {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	if len(segs) != 8 && len(segs) != 10 {
		return armID{}, false
	}
	if !strings.EqualFold(segs[0], "subscriptions") || !strings.EqualFold(segs[2], "resourcegroups") ||
		!strings.EqualFold(segs[4], "providers") {
		return armID{}, false
	}
	for _, s := range segs {
		if s == "" {
			return armID{}, false
		}
	}
	a := armID{sub: segs[1], rg: segs[3], ns: segs[5], typ: segs[6], name: segs[7]}
	if len(segs) == 10 {
		a.childType, a.childName = segs[8], segs[9]
	}
	return a, true
}
