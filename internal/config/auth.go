package config

import (
	"crypto/x509"
	"fmt"
	"io"
	"net/url"
	"os"
)

// AuthMethod is how azlb authenticates to ARM.
type AuthMethod string

// Authentication methods, in the order of precedence AuthMethod applies.
const (
	// AuthMethodNone: no method can be determined (Validate rejects it).
	AuthMethodNone AuthMethod = ""
	// AuthMethodWorkloadIdentity: useFederatedWorkloadIdentityExtension,
	// with aadClientId, tenantId and aadFederatedTokenFile.
	AuthMethodWorkloadIdentity AuthMethod = "workloadIdentity"
	// AuthMethodManagedIdentity: useManagedIdentityExtension, with an
	// optional userAssignedIdentityID (else the system-assigned identity).
	AuthMethodManagedIdentity AuthMethod = "managedIdentity"
	// AuthMethodClientSecret: aadClientId and aadClientSecret, with tenantId.
	AuthMethodClientSecret AuthMethod = "clientSecret"
	// AuthMethodClientCertificate: aadClientId and aadClientCertPath (and
	// aadClientCertPassword for a PKCS#12 file), with tenantId.
	AuthMethodClientCertificate AuthMethod = "clientCertificate"
)

// AuthMethod returns the authentication method the configuration selects.
// The two identity switches decide: useFederatedWorkloadIdentityExtension
// selects workload identity and useManagedIdentityExtension selects managed
// identity (aadClientSecret is then ignored; AKS writes the placeholder
// "msi" there). Setting both is ambiguous and yields AuthMethodNone. With
// neither, a non-empty aadClientSecret selects the client secret, else a
// non-empty aadClientCertPath the client certificate (the Azure cloud
// provider's order; Validate refuses the secret and the certificate
// together). AuthMethod does not check that the chosen method is complete;
// Validate does.
func (c *Config) AuthMethod() AuthMethod {
	switch {
	case c.UseFederatedWorkloadIdentityExtension && c.UseManagedIdentityExtension:
		return AuthMethodNone
	case c.UseFederatedWorkloadIdentityExtension:
		return AuthMethodWorkloadIdentity
	case c.UseManagedIdentityExtension:
		return AuthMethodManagedIdentity
	case c.AADClientSecret.IsSet():
		return AuthMethodClientSecret
	case c.AADClientCertPath != "":
		return AuthMethodClientCertificate
	default:
		return AuthMethodNone
	}
}

func (v *validator) auth(c *Config) {
	if c.UseFederatedWorkloadIdentityExtension && c.UseManagedIdentityExtension {
		v.add("useFederatedWorkloadIdentityExtension", "cannot be combined with useManagedIdentityExtension: choose one authentication method")
	}
	if c.UserAssignedIdentityID != "" && !c.UseManagedIdentityExtension {
		v.add("userAssignedIdentityID", "requires useManagedIdentityExtension")
	}
	v.clientCertificate(c)
	switch c.AuthMethod() {
	case AuthMethodWorkloadIdentity:
		const why = "required for workload identity (useFederatedWorkloadIdentityExtension)"
		v.required("aadClientId", c.AADClientID, why)
		v.required("tenantId", c.TenantID, why)
		v.required("aadFederatedTokenFile", c.AADFederatedTokenFile, why)
	case AuthMethodManagedIdentity:
		// Nothing else is required.
	case AuthMethodClientSecret:
		const why = "required for client secret authentication"
		v.required("aadClientId", c.AADClientID, why)
		v.required("tenantId", c.TenantID, why)
	case AuthMethodClientCertificate:
		const why = "required for client certificate authentication (aadClientCertPath)"
		v.required("aadClientId", c.AADClientID, why)
		v.required("tenantId", c.TenantID, why)
	case AuthMethodNone:
		if !c.UseFederatedWorkloadIdentityExtension {
			v.add("aadClientSecret", "required: no authentication method configured "+
				"(set aadClientId, aadClientSecret and tenantId, or aadClientId, aadClientCertPath and tenantId, "+
				"or useManagedIdentityExtension, or useFederatedWorkloadIdentityExtension)")
		}
	}
}

// endpoint checks an optional endpoint URL: absolute, https (http only to
// the loopback host), no user information.
func (v *validator) endpoint(field, raw string) {
	if raw == "" {
		return
	}
	const rule = "must be an absolute https URL (http is accepted only for localhost, 127.0.0.1 and [::1])"
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || !u.IsAbs() {
		v.add(field, rule)
		return
	}
	if u.User != nil {
		v.add(field, "must not contain user information")
		return
	}
	switch u.Scheme {
	case "https":
	case "http":
		switch u.Hostname() {
		case "localhost", "127.0.0.1", "::1":
		default:
			v.add(field, fmt.Sprintf("%s; got %q", rule, u.Redacted()))
		}
	default:
		v.add(field, fmt.Sprintf("%s; got %q", rule, u.Redacted()))
	}
}

// maxCACertFileSize bounds how much of caCertFile is read.
const maxCACertFileSize = 16 << 20

// caCertFile checks that path names a regular file holding at least one PEM
// certificate.
func (v *validator) caCertFile(path string) {
	if path == "" {
		return
	}
	const field = "caCertFile"
	st, err := os.Stat(path)
	if err != nil {
		v.add(field, fmt.Sprintf("cannot read: %v", err))
		return
	}
	if !st.Mode().IsRegular() {
		v.add(field, fmt.Sprintf("%q is not a regular file", path))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.add(field, fmt.Sprintf("cannot read: %v", err))
		return
	}
	defer func() { _ = f.Close() }()
	pemData, err := io.ReadAll(io.LimitReader(f, maxCACertFileSize+1))
	if err != nil {
		v.add(field, fmt.Sprintf("cannot read: %v", err))
		return
	}
	if len(pemData) > maxCACertFileSize {
		v.add(field, fmt.Sprintf("%q is larger than %d bytes", path, maxCACertFileSize))
		return
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pemData) {
		v.add(field, fmt.Sprintf("%q holds no PEM certificate", path))
	}
}
