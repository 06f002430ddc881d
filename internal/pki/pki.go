// Package pki issues the throwaway TLS material of azlb's development
// servers (the ARM emulator, the local kube-apiserver): a fresh CA and one
// serving certificate it signs, ECDSA P-256. Nothing here is for production
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: caName, Organization: []string{"azlb"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: commonName, Organization: []string{"azlb"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Serving{}, fmt.Errorf("pki: serving key: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return Serving{
		CAPEM:   caPEM,
		CertPEM: append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), caPEM...),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
