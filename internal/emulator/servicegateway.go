package emulator

import (
	"net/http"
	"net/netip"
	"strings"
)

const sgwType = "Microsoft.Network/serviceGateways"

func init() {
	registerKind(&kindSpec{
		typ: "serviceGateways", fullType: sgwType,
		normalize:  normalizeServiceGateway,
		serveExtra: serveServiceGatewayChild,
	})
}

// normalizeServiceGateway validates a ServiceGateway PUT. The document keeps
// properties.services (the registered services, rendered like GET /services
// items) from the previous version: a PUT of the gateway does not change its
// services, only updateServices does. The recordings show no resourceGuid.
func normalizeServiceGateway(wc *writeCtx, in obj, name string, old *version) (obj, *armError) {
	k := kinds["servicegateways"]
	if !validSGWName(name) {
		return nil, nrpError(http.StatusBadRequest, "InvalidResourceName",
			"Resource name %s is invalid. The name can contain only letters, digits and '-'.", name)
	}
	doc, props, ae := baseDoc(wc, k, in, name, old, true)
	if ae != nil {
		return nil, ae
	}
	sku, ae := normSku(in, []string{"Standard"}, "Standard")
	if ae != nil {
		return nil, ae
	}
	doc["sku"] = sku
	id := doc["id"].(string)
	loc := doc["location"].(string)
	if vnetID, has, err := getRef(props, "virtualNetwork", "properties"); err != nil {
		return nil, errBadShape(err)
	} else if has {
		_, v := wc.lookupKind(vnetID, "virtualNetworks")
		if v == nil || stringOf(v.doc["location"]) != loc {
			return nil, errInvalidReference(vnetID, id)
		}
		props["virtualNetwork"] = ref(stringOf(v.doc["id"]))
	}
	for _, key := range []string{"routeTargetAddress", "routeTargetAddressV6"} {
		if ae := normRouteTarget(wc, props, key, id, loc, key == "routeTargetAddressV6"); ae != nil {
			return nil, ae
		}
	}
	delete(props, "resourceGuid")
	delete(props, "services")
	services := []any{}
	if old != nil {
		if s, ok := propsOf(old.doc)["services"].([]any); ok {
			services = s
		}
	}
	props["services"] = services
	doc["properties"] = props
	return doc, nil
}

// normRouteTarget validates a route target address: a subnet of a virtual
// network in the gateway's location and a private address of the right
// family, Static (inside the subnet) or Dynamic (allocated).
func normRouteTarget(wc *writeCtx, props obj, key, ownerID, loc string, v6 bool) *armError {
	rt, err := getObj(props, key, "properties")
	if err != nil {
		return errBadShape(err)
	}
	if rt == nil {
		return nil
	}
	path := "properties." + key
	rt = shallowCopy(rt)
	subnetID, has, err := getRef(rt, "subnet", path)
	if err != nil {
		return errBadShape(err)
	}
	if !has {
		return nrpError(http.StatusBadRequest, "InvalidRequestFormat", "Cannot parse the request: %s.subnet is required for %s.", path, ownerID)
	}
	vv, sub := wc.lookupChild(subnetID, "virtualNetworks", "subnets")
	if sub == nil || stringOf(vv.doc["location"]) != loc {
		return errInvalidReference(subnetID, ownerID)
	}
	// assignPrivateIP works on an IP configuration; the route target keeps
	// only the members the recordings show.
	tmp := obj{"privateIPAddress": rt["privateIPAddress"], "privateIPAllocationMethod": rt["privateIPAllocationMethod"]}
	if v6 {
		tmp["privateIPAddressVersion"] = "IPv6"
	}
	if tmp["privateIPAddress"] == nil {
		delete(tmp, "privateIPAddress")
	}
	if tmp["privateIPAllocationMethod"] == nil {
		delete(tmp, "privateIPAllocationMethod")
	}
	if ae := wc.assignPrivateIP(tmp, stringOf(sub["id"]), propsOf(sub), ownerID, "", path, map[netip.Addr]bool{}); ae != nil {
		return ae
	}
	rt["subnet"] = ref(stringOf(sub["id"]))
	rt["privateIPAddress"] = tmp["privateIPAddress"]
	rt["privateIPAllocationMethod"] = tmp["privateIPAllocationMethod"]
	props[key] = rt
	return nil
}

// validSGWName follows the REST specification's pattern ^[a-zA-Z0-9-]*$
// (and ARM's 1..80 characters).
func validSGWName(n string) bool {
	if n == "" || len(n) > 80 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if !alnum(n[i]) && n[i] != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

// capServices refuses, before anything else of it is looked at, an
// updateServices request with more serviceRequests than
// Options.ServiceGatewayMaxServicesPerUpdate (when set).
func (e *Emulator) capServices(apply sgwApply) sgwApply {
	return func(wc *writeCtx, st *sgwState, gw obj, in obj) (func(), *armError) {
		limit := e.opts.ServiceGatewayMaxServicesPerUpdate
		if arr, ok := in["serviceRequests"].([]any); ok && limit > 0 && len(arr) > limit {
			return nil, sgwBadRequest(codeTooManyServices, "The request to service gateway %s has %d service requests; at most %d are allowed in one request.",
				stringOf(gw["id"]), len(arr), limit)
		}
		return apply(wc, st, gw, in)
	}
}

// serveServiceGatewayChild serves the gateway's child routes: GET services,
// GET addressLocations, POST updateServices, POST updateAddressLocations.
func serveServiceGatewayChild(e *Emulator, c *reqCtx, k *kindSpec) bool {
	if c.rt.kind != routeChildList {
		return false
	}
	switch seg := strings.ToLower(c.rt.childType); {
	case seg == "services" && c.r.Method == http.MethodGet:
		e.listSGWServices(c, k)
	case seg == "addresslocations" && c.r.Method == http.MethodGet:
		e.listSGWLocations(c, k)
	case seg == "updateservices" && c.r.Method == http.MethodPost:
		e.postSGW(c, k, e.capServices(applyUpdateServices), true)
	case seg == "updateaddresslocations" && c.r.Method == http.MethodPost:
		e.postSGW(c, k, applyUpdateAddressLocations, false)
	case seg == "services" || seg == "addresslocations" || seg == "updateservices" || seg == "updateaddresslocations":
		methodNotAllowed(c)
	default:
		return false
	}
	return true
}
