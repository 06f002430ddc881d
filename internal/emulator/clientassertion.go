package emulator

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" //nolint:gosec // x5t is a SHA-1 thumbprint by definition (RFC 7515 4.1.7)
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// clientAssertionType is the only client_assertion_type AAD accepts for a
// certificate credential (RFC 7523).
const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// maxAssertionBytes bounds a client assertion (a few KiB with a
// certificate chain in x5c).
const maxAssertionBytes = 32 << 10

// SetClientCertificates sets the certificates registered on the client
// application (Options.ClientCertificates): a client assertion signed with
// the key of one of them authenticates the client.
func (e *Emulator) SetClientCertificates(certs ...*x509.Certificate) {
	c := slices.Clone(certs)
	e.clientCerts.Store(&c)
}

func (e *Emulator) clientCertificates() []*x509.Certificate {
	if c := e.clientCerts.Load(); c != nil {
		return *c
	}
	return nil
}

// assertionHeader is the JOSE header of a client assertion.
type assertionHeader struct {
	Alg     string   `json:"alg"`
	X5t     string   `json:"x5t"`
	X5tS256 string   `json:"x5t#S256"`
	X5c     []string `json:"x5c"`
}

// assertionClaims are the claims AAD reads from a client assertion.
type assertionClaims struct {
	Aud any          `json:"aud"` // a string, or a list of one
	Iss string       `json:"iss"`
	Sub string       `json:"sub"`
	Jti string       `json:"jti"`
	Exp *json.Number `json:"exp"`
	Nbf *json.Number `json:"nbf"`
}

// verifyClientAssertion checks a certificate credential's client assertion
// (a JWT, RFC 7523) the way AAD does, strictly: the assertion type, a
// well-formed JWT signed RS256 or PS256, a thumbprint (x5t or x5t#S256)
// naming a certificate registered on the application and valid now, a
// signature by that certificate's key (x5c, when sent, must start with that
// certificate), iss and sub equal to client_id, aud equal to this tenant's
// token endpoint, a jti, and now within nbf..exp. It returns nil when the
// assertion authenticates clientID.
func (e *Emulator) verifyClientAssertion(typ, assertion, clientID, tenant, base string, now time.Time) *aadError {
	malformed := func(reason string) *aadError {
		return &aadError{http.StatusUnauthorized, "invalid_client", 50027, "JWT token is invalid or malformed. [Reason - " + reason + "]"}
	}
	switch {
	case typ == "":
		return &aadError{http.StatusBadRequest, "invalid_request", 900144, "The request body must contain the following parameter: 'client_assertion_type'."}
	case typ != clientAssertionType:
		return &aadError{http.StatusBadRequest, "invalid_request", 50027, fmt.Sprintf("Invalid client_assertion_type '%s': it must be '%s'.", typ, clientAssertionType)}
	case len(assertion) > maxAssertionBytes:
		return malformed("the assertion is larger than the emulator accepts")
	}
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return malformed("not a JWS in compact serialization")
	}
	var h assertionHeader
	var c assertionClaims
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &h) != nil || decodeClaims(cb, &c) != nil {
		return malformed("a part is not base64url-encoded JSON")
	}
	if h.Alg != "RS256" && h.Alg != "PS256" {
		return malformed(fmt.Sprintf("signing algorithm '%s' is not supported (RS256, PS256)", h.Alg))
	}
	if h.X5t == "" && h.X5tS256 == "" {
		return malformed("No certificate thumbprint specified in token header.")
	}
	cert, thumb := e.assertionCertificate(h)
	if cert == nil {
		return &aadError{http.StatusUnauthorized, "invalid_client", 700027, fmt.Sprintf(
			"The certificate with identifier used to sign the client assertion is not registered on application. [Reason - The key was not found., Thumbprint of key used by client: '%s', Please visit the Azure Portal, Graph Explorer or directly use MS Graph to see configured keys for app Id '%s'.]", thumb, clientID)}
	}
	if len(h.X5c) > 0 {
		first, err := base64.StdEncoding.DecodeString(h.X5c[0])
		if err != nil || !bytes.Equal(first, cert.Raw) {
			return malformed("the first certificate of x5c is not the one the thumbprint names")
		}
	}
	keyPeriod := fmt.Sprintf("Found key 'Start=%s, End=%s'", cert.NotBefore.UTC().Format("01/02/2006 15:04:05"), cert.NotAfter.UTC().Format("01/02/2006 15:04:05"))
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return &aadError{http.StatusUnauthorized, "invalid_client", 700027, fmt.Sprintf(
			"Client assertion contains an invalid signature. [Reason - The key used is expired., Thumbprint of key used by client: '%s', %s]", thumb, keyPeriod)}
	}
	if !verifyRSA(cert, h.Alg, parts[0]+"."+parts[1], sig) {
		return &aadError{http.StatusUnauthorized, "invalid_client", 700027, fmt.Sprintf(
			"Client assertion contains an invalid signature. [Reason - The provided signature value did not match the expected signature value., Thumbprint of key used by client: '%s', %s]", thumb, keyPeriod)}
	}
	if c.Iss != clientID || c.Sub != clientID {
		return &aadError{http.StatusUnauthorized, "invalid_client", 700021, fmt.Sprintf(
			"Client assertion application identifier doesn't match 'client_id' parameter. Review the documentation at https://learn.microsoft.com/entra/identity-platform/certificate-credentials . [Reason - iss '%s', sub '%s', client_id '%s']", c.Iss, c.Sub, clientID)}
	}
	want := base + "/" + tenant + "/oauth2/v2.0/token"
	if aud, ok := singleAudience(c.Aud); !ok || !strings.EqualFold(strings.TrimRight(aud, "/"), want) {
		return &aadError{http.StatusUnauthorized, "invalid_client", 700023, fmt.Sprintf(
			"Client assertion audience claim does not match Realm issuer. [Reason - aud %v, expected '%s']", c.Aud, want)}
	}
	if c.Jti == "" {
		return malformed("the jti claim is missing")
	}
	exp, okExp := unixClaim(c.Exp)
	nbf, okNbf := unixClaim(c.Nbf)
	if !okExp || !okNbf {
		return malformed("the exp and nbf claims must be numbers of seconds")
	}
	if sec := now.Unix(); sec >= exp || sec < nbf {
		return &aadError{http.StatusUnauthorized, "invalid_client", 700024, fmt.Sprintf(
			"Client assertion is not within its valid time range. Current time: %s, assertion valid from %s, expiry time of assertion %s.",
			now.UTC().Format(time.RFC3339), time.Unix(nbf, 0).UTC().Format(time.RFC3339), time.Unix(exp, 0).UTC().Format(time.RFC3339))}
	}
	return nil
}

func decodeClaims(b []byte, c *assertionClaims) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(c)
}

// assertionCertificate finds the registered certificate the header's
// thumbprint names (x5t#S256 first), and the thumbprint as AAD prints it
// (upper-case hex).
func (e *Emulator) assertionCertificate(h assertionHeader) (*x509.Certificate, string) {
	thumb, sum := h.X5tS256, func(raw []byte) []byte { s := sha256.Sum256(raw); return s[:] }
	if thumb == "" {
		thumb, sum = h.X5t, func(raw []byte) []byte { s := sha1.Sum(raw); return s[:] } //nolint:gosec // see import
	}
	want, ok := decodeThumbprint(thumb)
	if !ok {
		return nil, thumb
	}
	printed := strings.ToUpper(hex.EncodeToString(want))
	for _, c := range e.clientCertificates() {
		if bytes.Equal(sum(c.Raw), want) {
			return c, printed
		}
	}
	return nil, printed
}

// decodeThumbprint reads a thumbprint in base64url (RFC 7515) or, as MSAL
// writes x5t#S256, standard base64.
func decodeThumbprint(s string) ([]byte, bool) {
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(s); err == nil && (len(b) == sha1.Size || len(b) == sha256.Size) {
			return b, true
		}
	}
	return nil, false
}

func verifyRSA(cert *x509.Certificate, alg, signed string, sig []byte) bool {
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return false
	}
	digest := sha256.Sum256([]byte(signed))
	if alg == "PS256" {
		return rsa.VerifyPSS(pub, crypto.SHA256, digest[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}) == nil
	}
	return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
}

func singleAudience(aud any) (string, bool) {
	switch a := aud.(type) {
	case string:
		return a, true
	case []any:
		if len(a) == 1 {
			s, ok := a[0].(string)
			return s, ok
		}
	}
	return "", false
}

func unixClaim(n *json.Number) (int64, bool) {
	if n == nil {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false
	}
	return int64(f), true
}
