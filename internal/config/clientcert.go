package config

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// maxClientCertFileSize bounds how much of aadClientCertPath is read: a
// certificate chain and its key are a few KiB.
const maxClientCertFileSize = 1 << 20

// LoadClientCertificate reads the client certificate of aadClientCertPath
// as the Azure cloud provider reads it (azidentity.ParseCertificates): PEM
// with the certificate(s) and an unencrypted private key ("PRIVATE KEY" or
// "RSA PRIVATE KEY") when password is empty, otherwise (or when the file
// holds no PEM) PKCS#12 decrypted with password. The key must be RSA (Azure
// AD's client assertions, as MSAL signs them) and belong to one of the
// certificates. Errors name the problem, never the password.
func LoadClientCertificate(path string, password Secret) ([]*x509.Certificate, crypto.PrivateKey, error) {
	data, err := readClientCertFile(path)
	if err != nil {
		return nil, nil, err
	}
	if password.IsSet() && hasPEM(data) {
		return nil, nil, fmt.Errorf("%q holds PEM, which is read only without aadClientCertPassword (an encrypted PEM key is not supported): "+
			"remove aadClientCertPassword and decrypt the key, or use a PKCS#12 file", path)
	}
	if !password.IsSet() && hasEncryptedPEMKey(data) {
		return nil, nil, fmt.Errorf("%q holds an encrypted PEM private key, which is not supported: decrypt the key (openssl pkey -in key.pem -out plain.pem) "+
			"or use a PKCS#12 file with aadClientCertPassword", path)
	}
	certs, key, err := azidentity.ParseCertificates(data, []byte(password.Reveal()))
	if err != nil {
		return nil, nil, fmt.Errorf("%q: %s", path, describeCertError(err, password.IsSet()))
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("%q: the private key is %s; Azure AD client assertions are signed with an RSA key (as MSAL signs them): use an RSA certificate", path, keyKind(key))
	}
	for _, c := range certs {
		if pub, ok := c.PublicKey.(*rsa.PublicKey); ok && pub.N.Cmp(rk.N) == 0 && pub.E == rk.E {
			return certs, key, nil
		}
	}
	return nil, nil, fmt.Errorf("%q: the private key belongs to none of its %d certificate(s)", path, len(certs))
}

func readClientCertFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%q is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, maxClientCertFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read: %w", err)
	}
	if len(data) > maxClientCertFileSize {
		return nil, fmt.Errorf("%q is larger than %d bytes", path, maxClientCertFileSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%q is empty", path)
	}
	return data, nil
}

func hasPEM(data []byte) bool {
	b, _ := pem.Decode(data)
	return b != nil
}

func hasEncryptedPEMKey(data []byte) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == "ENCRYPTED PRIVATE KEY" || strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return true
		}
	}
}

// describeCertError turns a parse error of azidentity.ParseCertificates
// (PEM, then golang.org/x/crypto/pkcs12) into advice. None of them holds
// the password.
func describeCertError(err error, withPassword bool) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "decryption password incorrect"):
		if withPassword {
			return "cannot decrypt the PKCS#12 file: aadClientCertPassword is not its password"
		}
		return "cannot decrypt the PKCS#12 file: it has a password; set aadClientCertPassword"
	case strings.Contains(msg, "unknown digest algorithm"), strings.Contains(msg, "unknown encryption algorithm"),
		strings.Contains(msg, "algorithm"), strings.Contains(msg, "not implemented"):
		return "cannot read the PKCS#12 file (" + sanitize(msg) + "): only the legacy PKCS#12 encryption (3DES/RC2 with SHA-1, as the Azure cloud provider reads it) is supported; " +
			"OpenSSL 3 writes AES by default: export with `openssl pkcs12 -export -legacy`, or use PEM"
	case strings.Contains(msg, "found no private key"):
		return "holds no (unencrypted) private key beside the certificate: a client certificate file needs both"
	case strings.Contains(msg, "found no certificate"):
		return "holds a private key but no certificate"
	case strings.Contains(msg, "multiple private keys"):
		return "holds more than one private key"
	}
	detail := " (" + sanitize(msg) + ")"
	if strings.Contains(msg, "error reading P12 data") {
		detail = "" // an ASN.1 complaint about bytes that are no PKCS#12 at all
	}
	if !withPassword {
		return "is neither PEM (a certificate and an unencrypted private key) nor a PKCS#12 file" + detail
	}
	return "is not a PKCS#12 file" + detail
}

func keyKind(key crypto.PrivateKey) string {
	switch key.(type) {
	case nil:
		return "missing"
	case interface{ Public() crypto.PublicKey }:
		return fmt.Sprintf("a %T", key)
	}
	return "of an unknown kind"
}

// errNoClientCert is returned by ClientCertificate for a configuration
// without aadClientCertPath.
var errNoClientCert = errors.New("aadClientCertPath is not set")

// ClientCertificate loads the configuration's client certificate
// (aadClientCertPath, aadClientCertPassword); see LoadClientCertificate.
func (c *Config) ClientCertificate() ([]*x509.Certificate, crypto.PrivateKey, error) {
	if c.AADClientCertPath == "" {
		return nil, nil, errNoClientCert
	}
	certs, key, err := LoadClientCertificate(c.AADClientCertPath, c.AADClientCertPassword)
	if err != nil {
		return nil, nil, &FieldError{Field: "aadClientCertPath", Rule: err.Error()}
	}
	return certs, key, nil
}

// clientCertificate checks the certificate settings: a password only with
// a certificate, the certificate as the one method (not beside a secret or
// an identity), and a file that loads.
func (v *validator) clientCertificate(c *Config) {
	if c.AADClientCertPassword.IsSet() && c.AADClientCertPath == "" {
		v.add("aadClientCertPassword", "requires aadClientCertPath")
	}
	if c.AADClientCertPath == "" {
		return
	}
	const field = "aadClientCertPath"
	switch {
	case c.UseFederatedWorkloadIdentityExtension:
		v.add(field, "cannot be combined with useFederatedWorkloadIdentityExtension: choose one authentication method")
	case c.UseManagedIdentityExtension:
		v.add(field, "cannot be combined with useManagedIdentityExtension: choose one authentication method")
	case c.AADClientSecret.IsSet():
		v.add(field, "cannot be combined with aadClientSecret: choose one authentication method "+
			"(the Azure cloud provider would use the secret and ignore the certificate)")
	default:
		if _, _, err := c.ClientCertificate(); err != nil {
			v.errs = append(v.errs, err)
		}
	}
}
