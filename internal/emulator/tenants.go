package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Tenant is a directory beside Options.TenantID. The client application is
// registered in it too (a multi-tenant application: the same client id,
// secret and certificates get tokens of either tenant), and it holds
// Subscriptions; every other subscription belongs to Options.TenantID.
type Tenant struct {
	ID            string
	Subscriptions []string
}

// HeaderAuxiliary carries the auxiliary tokens of a request that links
// resources of other tenants (ARM's "Authenticate requests across
// tenants").
const HeaderAuxiliary = "x-ms-authorization-auxiliary"

// maxAuxiliaryTokens is how many auxiliary tokens ARM accepts in one
// request.
const maxAuxiliaryTokens = 3

// tenancy maps tenants and subscriptions; it does not change after New.
type tenancy struct {
	tenants map[string]string // lower-case id -> id as configured
	subs    map[string]string // lower-case subscription -> tenant id
}

func newTenancy(o Options) tenancy {
	t := tenancy{tenants: map[string]string{strings.ToLower(o.TenantID): o.TenantID}, subs: map[string]string{}}
	for _, x := range o.Tenants {
		t.tenants[strings.ToLower(x.ID)] = x.ID
		for _, s := range x.Subscriptions {
			t.subs[strings.ToLower(s)] = x.ID
		}
	}
	return t
}

// validateTenants checks Options.Tenants: ids that are GUIDs, distinct and
// not TenantID; subscriptions that are GUIDs, each in one tenant.
func (o Options) validateTenants() error {
	seen := map[string]bool{strings.ToLower(o.TenantID): true}
	subs := map[string]bool{}
	for _, t := range o.Tenants {
		if !isGUID(t.ID) {
			return fmt.Errorf("emulator: tenant %q is not a GUID", t.ID)
		}
		if seen[strings.ToLower(t.ID)] {
			return fmt.Errorf("emulator: tenant %s is given twice (the default tenant is %s)", t.ID, o.TenantID)
		}
		seen[strings.ToLower(t.ID)] = true
		if len(t.Subscriptions) == 0 {
			return fmt.Errorf("emulator: tenant %s holds no subscription", t.ID)
		}
		for _, s := range t.Subscriptions {
			if !isGUID(s) {
				return fmt.Errorf("emulator: subscription %q of tenant %s is not a GUID", s, t.ID)
			}
			if subs[strings.ToLower(s)] {
				return fmt.Errorf("emulator: subscription %s is in two tenants", s)
			}
			subs[strings.ToLower(s)] = true
		}
	}
	return nil
}

// knownTenant reports whether the AAD endpoint serves tenant.
func (e *Emulator) knownTenant(tenant string) bool {
	_, ok := e.tenancy.tenants[strings.ToLower(tenant)]
	return ok
}

// canonicalTenant is a known tenant's id as configured.
func (e *Emulator) canonicalTenant(tenant string) string {
	if t, ok := e.tenancy.tenants[strings.ToLower(tenant)]; ok {
		return t
	}
	return tenant
}

// tenantOf is the tenant a subscription belongs to.
func (e *Emulator) tenantOf(sub string) string {
	if t, ok := e.tenancy.subs[strings.ToLower(sub)]; ok {
		return t
	}
	return e.opts.TenantID
}

// authorizeTenants applies ARM's rules across tenants to an authenticated
// request: the primary token must be of the subscription's tenant
// (InvalidAuthenticationTokenTenant); every auxiliary token must be valid
// and unexpired (at most three); and a write whose body links a resource in
// a subscription of another tenant needs an auxiliary token of that tenant
// (LinkedAuthorizationFailed). With one tenant only the first rule can
// apply and the body is not read.
func (e *Emulator) authorizeTenants(r *http.Request, rt route, claims tokenClaims, base string) *armError {
	if rt.sub == "" {
		return nil
	}
	subTenant := e.tenantOf(rt.sub)
	if !strings.EqualFold(claims.Tid, subTenant) {
		return e.tenantAuthError(subTenant, "InvalidAuthenticationTokenTenant", fmt.Sprintf(
			"The access token is from the wrong issuer 'https://sts.windows.net/%s/'. It must match the tenant 'https://sts.windows.net/%s/' associated with this subscription. Please use the authority (URL) 'https://login.windows.net/%s' to get the token. Note, if the subscription is transferred to another tenant there is no impact to the services, but information about new tenant could take time to propagate (up to an hour). If you just transferred your subscription and see this error message, please try back later.",
			claims.Tid, subTenant, subTenant), "The access token is from the wrong issuer.")
	}
	allowed, ae := e.auxiliaryTenants(r, base)
	if ae != nil {
		return ae
	}
	if len(e.opts.Tenants) == 0 || !isWriteMethod(r.Method) || r.Method == http.MethodDelete || r.Body == nil {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return gatewayError(http.StatusBadRequest, "InvalidRequestContent", "The request content could not be read: %s.", sanitizeMsg(err.Error()))
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	allowed = append(allowed, claims.Tid)
	for _, sub := range linkedSubscriptions(body) {
		if t := e.tenantOf(sub); !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, t) }) {
			return &armError{status: http.StatusForbidden, code: "LinkedAuthorizationFailed", gateway: true, message: fmt.Sprintf(
				"The client has permission to perform action '%s' on scope '%s', however the current tenant '%s' is not authorized to access linked subscription '%s'.",
				writeAction(rt), r.URL.Path, claims.Tid, sub)}
		}
	}
	return nil
}

// auxiliaryTenants checks the auxiliary header and returns the tenants of
// its tokens.
func (e *Emulator) auxiliaryTenants(r *http.Request, base string) ([]string, *armError) {
	h := strings.TrimSpace(r.Header.Get(HeaderAuxiliary))
	if h == "" {
		return nil, nil
	}
	parts := strings.Split(h, ",")
	if len(parts) > maxAuxiliaryTokens {
		return nil, e.authError("InvalidAuthenticationToken", fmt.Sprintf(
			"The '%s' header holds %d tokens; at most %d are accepted.", HeaderAuxiliary, len(parts), maxAuxiliaryTokens), "Too many auxiliary tokens.")
	}
	var out []string
	now := time.Now()
	for _, p := range parts {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(p), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
			return nil, e.authError("InvalidAuthenticationToken", fmt.Sprintf(
				"An auxiliary token in the '%s' header is not a bearer token (the emulator does not decrypt EncryptedBearer tokens).", HeaderAuxiliary),
				"An auxiliary token is not a bearer token.")
		}
		claims, ae := e.checkToken(strings.TrimSpace(tok), base, now)
		if ae != nil {
			ae.message = fmt.Sprintf("Auxiliary token of client '%s' in tenant '%s': %s", claims.AppID, claims.Tid, ae.message)
			return nil, ae
		}
		out = append(out, claims.Tid)
	}
	return out, nil
}

// linkedSubscriptions lists the subscriptions of the resource ids a
// request body refers to (every "id" member holding
// /subscriptions/{sub}/...), without repeats.
func linkedSubscriptions(body []byte) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil // the handler answers the malformed body
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, m := range x {
				if s, ok := m.(string); ok && strings.EqualFold(k, "id") {
					if sub := subscriptionOf(s); sub != "" && !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, sub) }) {
						out = append(out, sub)
					}
					continue
				}
				walk(m)
			}
		case []any:
			for _, m := range x {
				walk(m)
			}
		}
	}
	walk(v)
	slices.Sort(out)
	return out
}

// subscriptionOf is the subscription of a resource id, or "".
func subscriptionOf(id string) string {
	segs := strings.Split(strings.TrimPrefix(id, "/"), "/")
	if len(segs) < 2 || !strings.EqualFold(segs[0], "subscriptions") || !isGUID(segs[1]) {
		return ""
	}
	return segs[1]
}

// writeAction is the RBAC action of a write on the route, as ARM names it
// in its errors (Microsoft.Network/networkInterfaces/write).
func writeAction(rt route) string {
	parts := []string{firstNonEmpty(rt.ns, "Microsoft.Resources")}
	if rt.typ != "" {
		parts = append(parts, rt.typ)
	} else {
		parts = append(parts, "subscriptions/resourceGroups")
	}
	if rt.childType != "" {
		parts = append(parts, rt.childType)
	}
	return strings.Join(parts, "/") + "/write"
}
