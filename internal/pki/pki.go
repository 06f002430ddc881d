// Package pki issues the throwaway TLS material of azlb's development
// servers (the ARM emulator, the local kube-apiserver): a fresh CA and the
// serving certificate it signs (and, for a local cluster, client
// certificates), ECDSA P-256. Nothing here is for production
// serving, which uses certificates the operator provides.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// Serving is a CA and a serving certificate it signed.
type Serving struct {
	// CAPEM is the CA certificate, for clients to trust.
	CAPEM []byte
	// CertPEM and KeyPEM are the serving certificate (followed by the CA
	// certificate) and its private key.
	CertPEM, KeyPEM []byte
}

// TLSCertificate is the serving certificate for a tls.Config.
func (s Serving) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(s.CertPEM, s.KeyPEM)
}

// NewServing creates a CA named caName and a serving certificate for
// commonName, valid for the DNS names and IP addresses given, from an hour
// ago (clock skew) for validity.
func NewServing(caName, commonName string, dnsNames []string, ips []net.IP, validity time.Duration) (Serving, error) {
	ca, err := NewAuthority(caName, validity)
	if err != nil {
		return Serving{}, err
	}
	return ca.Serving(commonName, dnsNames, ips, validity)
}

// Authority is a CA that keeps its key, to sign several certificates (a
// serving certificate and the client certificates of a local cluster).
type Authority struct {
	// CAPEM is the CA certificate, for peers to trust.
	CAPEM []byte
	cert  *x509.Certificate
	key   *ecdsa.PrivateKey
}

// NewAuthority creates a CA named name, valid from an hour ago for
// validity.
func NewAuthority(name string, validity time.Duration) (*Authority, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"azlb"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	return &Authority{CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), cert: caCert, key: caKey}, nil
}

// Serving signs a serving certificate for commonName, valid for the DNS
// names and IP addresses given, from an hour ago for validity.
func (a *Authority) Serving(commonName string, dnsNames []string, ips []net.IP, validity time.Duration) (Serving, error) {
	certPEM, keyPEM, err := a.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: []string{"azlb"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, validity)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: serving certificate: %w", err)
	}
	return Serving{CAPEM: a.CAPEM, CertPEM: append(certPEM, a.CAPEM...), KeyPEM: keyPEM}, nil
}

// Client signs a client certificate: Kubernetes reads its common name as
// the user and its organizations as the groups.
func (a *Authority) Client(commonName string, organizations []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	certPEM, keyPEM, err = a.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: organizations},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, validity)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: client certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// sign issues tmpl (subject, usages, names) with a fresh key.
func (a *Authority) sign(tmpl *x509.Certificate, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(validity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
