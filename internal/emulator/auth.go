package emulator

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Token lifetime, as AAD issues for client credentials.
const tokenLifetime = 3599 * time.Second

// armAudiences are the audiences ARM accepts (compared without a trailing
// slash). The emulator's own URL is accepted too.
var armAudiences = []string{"https://management.azure.com", "https://management.core.windows.net"}

// tokenClaims is the payload of an emulator-issued access token.
type tokenClaims struct {
	Aud   string `json:"aud"`
	Iss   string `json:"iss"`
	Iat   int64  `json:"iat"`
	Nbf   int64  `json:"nbf"`
	Exp   int64  `json:"exp"`
	AppID string `json:"appid"`
	Idtyp string `json:"idtyp"`
	Oid   string `json:"oid"`
	Sub   string `json:"sub"`
	Tid   string `json:"tid"`
	Ver   string `json:"ver"`
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT","kid":"azlb-emulator"}`))

// issueToken builds a signed JWT-shaped access token of a tenant.
func (e *Emulator) issueToken(aud, tenant string, now time.Time) (string, int64) {
	exp := now.Add(tokenLifetime).Unix()
	c := tokenClaims{
		Aud: aud, Iss: "https://sts.windows.net/" + tenant + "/",
		Iat: now.Unix(), Nbf: now.Unix() - 300, Exp: exp,
		AppID: e.opts.ClientID, Idtyp: "app", Oid: e.principalID, Sub: e.principalID,
		Tid: tenant, Ver: "1.0",
	}
	payload, _ := json.Marshal(c) // a struct of strings and ints always encodes
	signing := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	mac := hmac.New(sha256.New, e.tokenKey)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), exp
}

// authenticate checks the Authorization header of an ARM request and
// returns the token's claims.
func (e *Emulator) authenticate(r *http.Request, base string) (tokenClaims, *armError) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return tokenClaims{}, e.authError("AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.",
			"The authentication failed because of missing 'Authorization' header.")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return tokenClaims{}, e.authError("AuthenticationFailed", "Authentication failed. The 'Authorization' header is provided in an invalid format.",
			"The authentication failed because the 'Authorization' header is not a bearer token.")
	}
	claims, ae := e.checkToken(strings.TrimSpace(tok), base, time.Now())
	return claims, ae
}

// checkToken verifies an access token (signature, a tenant the emulator
// serves), its expiry and its audience (ARM's, or the emulator's URL).
func (e *Emulator) checkToken(tok, base string, now time.Time) (tokenClaims, *armError) {
	claims, ok := e.verifyToken(tok)
	if !ok {
		return claims, e.authError("InvalidAuthenticationToken", "The access token is invalid.", "The access token is invalid.")
	}
	if now.Unix() >= claims.Exp {
		msg := fmt.Sprintf("The access token expiry UTC time '%s' is earlier than current UTC time '%s'.",
			time.Unix(claims.Exp, 0).UTC().Format("1/2/2006 3:04:05 PM"), now.UTC().Format("1/2/2006 3:04:05 PM"))
		return claims, e.authError("ExpiredAuthenticationToken", msg, "The access token expiry UTC time is earlier than current UTC time.")
	}
	aud := strings.TrimRight(claims.Aud, "/")
	okAud := strings.EqualFold(aud, strings.TrimRight(base, "/"))
	for _, a := range armAudiences {
		okAud = okAud || strings.EqualFold(aud, a)
	}
	if !okAud {
		return claims, e.authError("InvalidAuthenticationTokenAudience",
			fmt.Sprintf("The access token has been obtained for wrong audience or resource '%s'. It should exactly match with one of the allowed audiences 'https://management.core.windows.net/','https://management.core.windows.net','https://management.azure.com/','https://management.azure.com'.", claims.Aud),
			"The access token has been obtained for wrong audience or resource.")
	}
	return claims, nil
}

func (e *Emulator) authError(code, msg, desc string) *armError {
	return e.tenantAuthError(e.opts.TenantID, code, msg, desc)
}

// tenantAuthError is authError pointing the client at a tenant's authority.
func (e *Emulator) tenantAuthError(tenant, code, msg, desc string) *armError {
	return &armError{status: http.StatusUnauthorized, code: code, message: msg, header: map[string]string{
		"WWW-Authenticate": fmt.Sprintf(`Bearer authorization_uri="https://login.windows.net/%s", error="invalid_token", error_description="%s"`, tenant, desc),
	}}
}

// maxCachedTokens bounds the cache of verified tokens.
const maxCachedTokens = 4096

// verifyToken checks the signature and decodes the claims. Verified tokens
// are cached (expiry is still checked by the caller on every request).
func (e *Emulator) verifyToken(tok string) (tokenClaims, bool) {
	if c, ok := e.tokCache.Load(tok); ok {
		return c.(tokenClaims), true
	}
	c, ok := e.verifyTokenUncached(tok)
	if ok {
		if e.tokCount.Add(1) > maxCachedTokens {
			e.tokCache.Clear()
			e.tokCount.Store(0)
		}
		e.tokCache.Store(tok, c)
	}
	return c, ok
}

func (e *Emulator) verifyTokenUncached(tok string) (tokenClaims, bool) {
	var c tokenClaims
	dot := strings.LastIndexByte(tok, '.')
	if dot <= 0 || strings.Count(tok, ".") != 2 {
		return c, false
	}
	sig, err := base64.RawURLEncoding.DecodeString(tok[dot+1:])
	if err != nil {
		return c, false
	}
	mac := hmac.New(sha256.New, e.tokenKey)
	mac.Write([]byte(tok[:dot]))
	if !hmac.Equal(sig, mac.Sum(nil)) {
		return c, false
	}
	first := strings.IndexByte(tok, '.')
	payload, err := base64.RawURLEncoding.DecodeString(tok[first+1 : dot])
	if err != nil || json.Unmarshal(payload, &c) != nil {
		return c, false
	}
	return c, e.knownTenant(c.Tid)
}

// aadError is an AAD v2.0 error response.
type aadError struct {
	status int
	err    string
	code   int
	desc   string
}

func (e *Emulator) writeAADError(w http.ResponseWriter, ae aadError) {
	now := time.Now().UTC()
	trace, corr := e.ids.uuid(), e.ids.uuid()
	body := map[string]any{
		"error":             ae.err,
		"error_description": fmt.Sprintf("AADSTS%d: %s\r\nTrace ID: %s\r\nCorrelation ID: %s\r\nTimestamp: %s", ae.code, ae.desc, trace, corr, now.Format("2006-01-02 15:04:05Z")),
		"error_codes":       []int{ae.code},
		"timestamp":         now.Format("2006-01-02 15:04:05Z"),
		"trace_id":          trace,
		"correlation_id":    corr,
		"error_uri":         fmt.Sprintf("https://login.microsoftonline.com/error?code=%d", ae.code),
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store, no-cache")
	w.WriteHeader(ae.status)
	_, _ = w.Write(mustMarshal(body))
}

// serveAAD handles /{tenant}/... AAD requests. It reports false when the
// path is not an AAD endpoint.
func (e *Emulator) serveAAD(w http.ResponseWriter, r *http.Request, tenant, rest, base string) {
	tenantOK := e.knownTenant(tenant)
	switch strings.ToLower(rest) {
	case "v2.0/.well-known/openid-configuration", ".well-known/openid-configuration":
		if r.Method != http.MethodGet {
			e.writeAADError(w, aadError{http.StatusMethodNotAllowed, "invalid_request", 900561, "The endpoint only accepts GET requests."})
			return
		}
		if !tenantOK {
			e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_tenant", 90002, fmt.Sprintf("Tenant '%s' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.", tenant)})
			return
		}
		t := e.canonicalTenant(tenant)
		cfg := map[string]any{
			"token_endpoint":                        base + "/" + t + "/oauth2/v2.0/token",
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
			"jwks_uri":                              base + "/" + t + "/discovery/v2.0/keys",
			"response_modes_supported":              []string{"query", "fragment", "form_post"},
			"subject_types_supported":               []string{"pairwise"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
			"scopes_supported":                      []string{"openid", "profile", "email", "offline_access"},
			"issuer":                                base + "/" + t + "/v2.0",
			"request_uri_parameter_supported":       false,
			"userinfo_endpoint":                     base + "/oidc/userinfo",
			"authorization_endpoint":                base + "/" + t + "/oauth2/v2.0/authorize",
			"device_authorization_endpoint":         base + "/" + t + "/oauth2/v2.0/devicecode",
			"http_logout_supported":                 true,
			"frontchannel_logout_supported":         true,
			"end_session_endpoint":                  base + "/" + t + "/oauth2/v2.0/logout",
			"claims_supported":                      []string{"sub", "iss", "aud", "exp", "iat", "nbf", "tid", "ver"},
			"tenant_region_scope":                   nil,
			"cloud_instance_name":                   strings.TrimPrefix(strings.TrimPrefix(base, "https://"), "http://"),
			"cloud_graph_host_name":                 "graph.windows.net",
			"msgraph_host":                          "graph.microsoft.com",
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(mustMarshal(cfg))
	case "oauth2/v2.0/token":
		e.serveToken(w, r, tenant, tenantOK, base)
	default:
		e.writeAADError(w, aadError{http.StatusNotFound, "invalid_request", 900023, fmt.Sprintf("Specified tenant identifier '%s' is neither a valid DNS name, nor a valid external domain, or the endpoint is not served by the emulator.", tenant)})
	}
}

// maxFormBytes bounds token request bodies.
const maxFormBytes = 64 << 10

func (e *Emulator) serveToken(w http.ResponseWriter, r *http.Request, tenant string, tenantOK bool, base string) {
	if r.Method != http.MethodPost {
		e.writeAADError(w, aadError{http.StatusMethodNotAllowed, "invalid_request", 900561, "The endpoint only accepts POST requests."})
		return
	}
	if !tenantOK {
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 90002, fmt.Sprintf("Tenant '%s' not found. Check to make sure you have the correct tenant ID and are signing into the correct cloud.", tenant)})
		return
	}
	if ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || ct != "application/x-www-form-urlencoded" {
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'. The content type must be application/x-www-form-urlencoded."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 900144, "The request body could not be parsed as a form."})
		return
	}
	form := r.PostForm
	clientID, secret := form.Get("client_id"), form.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		if uu, err := url.QueryUnescape(u); err == nil {
			u = uu
		}
		if pp, err := url.QueryUnescape(p); err == nil {
			p = pp
		}
		clientID, secret = u, p
	}
	grant := form.Get("grant_type")
	switch {
	case grant == "":
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'grant_type'."})
		return
	case grant != "client_credentials":
		e.writeAADError(w, aadError{http.StatusBadRequest, "unsupported_grant_type", 70003, fmt.Sprintf("The app requested an unsupported grant type '%s'. The emulator only supports client_credentials.", grant)})
		return
	case clientID == "":
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'client_id'."})
		return
	case clientID != e.opts.ClientID:
		e.writeAADError(w, aadError{http.StatusBadRequest, "unauthorized_client", 700016, fmt.Sprintf("Application with identifier '%s' was not found in the directory '%s'. This can happen if the application has not been installed by the administrator of the tenant or consented to by any user in the tenant.", clientID, tenant)})
		return
	case secret == "" && form.Get("client_assertion") == "":
		e.writeAADError(w, aadError{http.StatusUnauthorized, "invalid_client", 7000218, "The request body must contain the following parameter: 'client_assertion' or 'client_secret'."})
		return
	case secret != "" && form.Get("client_assertion") != "":
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 90014, "The request carries both 'client_secret' and 'client_assertion': a client authenticates with one credential."})
		return
	case secret == "":
		if ae := e.verifyClientAssertion(form.Get("client_assertion_type"), form.Get("client_assertion"), clientID, tenant, base, time.Now()); ae != nil {
			e.writeAADError(w, *ae)
			return
		}
	case subtle.ConstantTimeCompare([]byte(secret), []byte(e.opts.ClientSecret)) != 1:
		e.writeAADError(w, aadError{http.StatusUnauthorized, "invalid_client", 7000215, fmt.Sprintf("Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID, for a secret added to app '%s'.", clientID)})
		return
	}
	scopeParam := form.Get("scope")
	if scopeParam == "" {
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'scope'."})
		return
	}
	resource := ""
	for _, s := range strings.Fields(scopeParam) {
		switch s {
		case "openid", "profile", "offline_access", "email":
			continue
		}
		if !strings.HasSuffix(s, "/.default") {
			e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_scope", 1002012, fmt.Sprintf("The provided value for scope %s is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).", s)})
			return
		}
		if resource != "" {
			e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_scope", 70011, "The provided value for the input parameter 'scope' is not valid. Only one resource may be requested at a time."})
			return
		}
		resource = strings.TrimSuffix(s, ".default")
	}
	if resource == "" || resource == "/" {
		e.writeAADError(w, aadError{http.StatusBadRequest, "invalid_scope", 1002012, "The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI)."})
		return
	}
	tok, _ := e.issueToken(resource, e.canonicalTenant(tenant), time.Now())
	secs := int(tokenLifetime / time.Second)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store, no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(mustMarshal(map[string]any{
		"token_type": "Bearer", "expires_in": secs, "ext_expires_in": secs, "access_token": tok,
	}))
}
