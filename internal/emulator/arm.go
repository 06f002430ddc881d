package emulator

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// reqCtx carries per-request values through the ARM handlers.
type reqCtx struct {
	w          http.ResponseWriter
	r          *http.Request
	base       string // scheme://host of this emulator as the client sees it
	rt         route
	apiVersion string
	lroResult  string // from a fault: the started operation ends this way
}

const maxBodyBytes = 4 << 20 // ARM's request size limit

// serveARM authenticates and dispatches an ARM request.
func (e *Emulator) serveARM(w http.ResponseWriter, r *http.Request, base, lro string) {
	claims, ae := e.authenticate(r, base)
	if ae != nil {
		writeARMError(w, ae)
		return
	}
	rt, ae := parseARMPath(r.URL.Path)
	if ae != nil {
		writeARMError(w, ae)
		return
	}
	if ae := e.authorizeTenants(r, rt, claims, base); ae != nil {
		writeARMError(w, ae)
		return
	}
	c := &reqCtx{w: w, r: r, base: base, rt: rt, lroResult: lro}
	// Azure Resource Manager throttles a request, whatever it asks,
	// once it knows the caller.
	if !e.throttle(c, claims.Oid) {
		return
	}
	v, ok := apiVersion(r.URL.RawQuery)
	if !ok {
		writeARMError(w, errMissingAPIVersion())
		return
	}
	c.apiVersion = v

	switch rt.kind {
	case routeSubscription:
		e.serveSubscription(c)
		return
	case routeProvider:
		if !slices.Contains(resourcesAPIVersions, v) {
			writeARMError(w, gatewayError(http.StatusBadRequest, "InvalidApiVersionParameter",
				"The api-version '%s' is invalid. The supported versions are '%s'.", v, strings.Join(resourcesAPIVersions, ",")))
			return
		}
		e.serveProvider(c)
		return
	case routeProviderRegister:
		if !slices.Contains(resourcesAPIVersions, v) {
			writeARMError(w, gatewayError(http.StatusBadRequest, "InvalidApiVersionParameter",
				"The api-version '%s' is invalid. The supported versions are '%s'.", v, strings.Join(resourcesAPIVersions, ",")))
			return
		}
		if r.Method != http.MethodPost {
			methodNotAllowed(c)
			return
		}
		ns, ok := servedNamespace(rt.ns)
		if !ok {
			writeARMError(w, gatewayError(http.StatusNotFound, "InvalidResourceNamespace",
				"The resource namespace '%s' is invalid. The emulator serves Microsoft.Network and Microsoft.Compute.", rt.ns))
			return
		}
		e.registerProvider(c, ns)
		return
	case routeFeature:
		e.serveFeature(c)
		return
	case routeGroupList, routeGroup, routeGroupOpResult:
		if !slices.Contains(resourcesAPIVersions, v) {
			writeARMError(w, gatewayError(http.StatusBadRequest, "InvalidApiVersionParameter",
				"The api-version '%s' is invalid. The supported versions are '%s'.", v, strings.Join(resourcesAPIVersions, ",")))
			return
		}
	default:
		if strings.EqualFold(rt.ns, "Microsoft.Compute") {
			if want := computeAPIVersionFor(rt); v != want {
				writeARMError(w, gatewayError(http.StatusBadRequest, "NoRegisteredProviderFound",
					"No registered resource provider found for location '%s' and API version '%s' for type '%s'. The supported api-versions are '%s'.",
					firstNonEmpty(rt.location, "global"), v, firstNonEmpty(rt.typ, "locations/operations"), want))
				return
			}
			break
		}
		if !strings.EqualFold(rt.ns, "Microsoft.Network") {
			writeARMError(w, gatewayError(http.StatusConflict, "MissingSubscriptionRegistration",
				"The subscription is not registered to use namespace '%s'. The emulator serves Microsoft.Network, Microsoft.Compute and Microsoft.Resources only.", rt.ns))
			return
		}
		if len(rt.extra) > 0 {
			writeARMError(w, errBadPath(r.URL.Path))
			return
		}
		if v != NetworkAPIVersion {
			t := rt.typ
			if t == "" {
				t = "locations/operations"
			}
			writeARMError(w, gatewayError(http.StatusBadRequest, "NoRegisteredProviderFound",
				"No registered resource provider found for location '%s' and API version '%s' for type '%s'. The supported api-versions are '%s'.",
				firstNonEmpty(rt.location, "global"), v, t, NetworkAPIVersion))
			return
		}
	}

	switch rt.kind {
	case routeGroupList:
		e.listGroups(c)
	case routeGroup:
		e.serveGroup(c)
	case routeGroupOpResult:
		e.serveGroupOpResult(c)
	case routeOperation, routeOperationResult:
		e.serveOperation(c)
	case routeTypeList, routeSubTypeList, routeResource, routeChildList, routeChild:
		if strings.EqualFold(rt.ns, "Microsoft.Compute") {
			e.serveCompute(c)
			return
		}
		e.serveNetwork(c)
	default:
		writeARMError(w, errBadPath(r.URL.Path))
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// readBody reads a bounded request body.
func readBody(c *reqCtx) ([]byte, *armError) {
	if c.r.Body == nil {
		return nil, nil
	}
	var b []byte
	var err error
	if cl := c.r.ContentLength; cl > 0 && cl <= maxBodyBytes {
		b = make([]byte, 0, cl+1)
		for err == nil && int64(len(b)) <= maxBodyBytes {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			var n int
			n, err = c.r.Body.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
	} else {
		b, err = io.ReadAll(io.LimitReader(c.r.Body, maxBodyBytes+1))
	}
	if err != nil {
		return nil, gatewayError(http.StatusBadRequest, "InvalidRequestContent", "The request content could not be read: %s.", sanitizeMsg(err.Error()))
	}
	if len(b) > maxBodyBytes {
		return nil, gatewayError(http.StatusRequestEntityTooLarge, "RequestContentTooLarge",
			"The request content size exceeds the maximum of %d bytes.", maxBodyBytes)
	}
	return b, nil
}

// methodNotAllowed answers a method the route does not support.
// readObject reads and decodes a request body that must be a JSON object,
// answering the ARM error itself when it is not.
func readObject(c *reqCtx) (obj, bool) {
	raw, ae := readBody(c)
	if ae != nil {
		writeARMError(c.w, ae)
		return nil, false
	}
	in, err := decodeObject(raw)
	if err != nil {
		writeARMError(c.w, errInvalidJSON(err))
		return nil, false
	}
	return in, true
}

func methodNotAllowed(c *reqCtx) {
	writeARMError(c.w, gatewayError(http.StatusMethodNotAllowed, "HttpMethodNotAllowed",
		"The requested resource does not support http method '%s'.", c.r.Method))
}

func (e *Emulator) serveSubscription(c *reqCtx) {
	if c.r.Method != http.MethodGet {
		methodNotAllowed(c)
		return
	}
	writeJSON(c.w, http.StatusOK, mustMarshal(obj{
		"id": "/subscriptions/" + c.rt.sub, "authorizationSource": "RoleBased", "subscriptionId": c.rt.sub,
		"tenantId": e.tenantOf(c.rt.sub), "displayName": "azlb emulator subscription", "state": "Enabled",
		"subscriptionPolicies": obj{"locationPlacementId": "Public_2014-09-01", "quotaId": "Internal_2014-09-01", "spendingLimit": "Off"},
	}))
}

// subscription returns (creating on first use) the state of sub. Caller
// holds e.mu for writing.
func (e *Emulator) subscription(sub string) *subscription {
	key := strings.ToLower(sub)
	s := e.subs[key]
	if s == nil {
		s = &subscription{id: sub, groups: map[string]*group{}, ops: map[string]*operation{}}
		e.subs[key] = s
	}
	return s
}

// newOp creates an operation starting at now and registers it.
func (e *Emulator) newOp(c *reqCtx, s *subscription, location string, now time.Time) *operation {
	op := &operation{
		id: e.ids.uuid(), sub: s.id, location: normLocation(location), apiVersion: c.apiVersion,
		start: now, end: now.Add(e.opts.OperationDuration), result: resultSucceeded,
	}
	switch c.lroResult {
	case resultFailed:
		op.result, op.errCode, op.errMessage = resultFailed, "InternalServerError", "An error occurred while processing the operation (injected by the emulator)."
	case resultCanceled:
		op.result, op.errCode, op.errMessage = resultCanceled, "Canceled", "Operation was canceled (injected by the emulator)."
	}
	s.addOp(op, now)
	return op
}

// asyncURL is the Azure-AsyncOperation URL of op on this emulator.
func (c *reqCtx) asyncURL(op *operation) string {
	if op.compute {
		return fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s?api-version=%s",
			c.base, op.sub, op.location, op.id, ComputeAPIVersion)
	}
	return fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Network/locations/%s/operations/%s?api-version=%s",
		c.base, op.sub, op.location, op.id, NetworkAPIVersion)
}

// locationURL is the Location URL of op on this emulator: NRP's
// operationResults, or, for Compute, the operation URL with monitor=true
// (as the recordings show).
func (c *reqCtx) locationURL(op *operation) string {
	if op.compute {
		return fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Compute/locations/%s/operations/%s?api-version=%s&monitor=true",
			c.base, op.sub, op.location, op.id, ComputeAPIVersion)
	}
	return fmt.Sprintf("%s/subscriptions/%s/providers/Microsoft.Network/locations/%s/operationResults/%s?api-version=%s",
		c.base, op.sub, op.location, op.id, NetworkAPIVersion)
}

// normLocation lower-cases a location and removes spaces ("East US" -> "eastus").
func normLocation(l string) string {
	return strings.ToLower(strings.ReplaceAll(l, " ", ""))
}
