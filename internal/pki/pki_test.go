package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestServingCertificateIsTrustedThroughItsCA(t *testing.T) {
	s, err := NewServing("test CA", "localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := s.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CAPEM) {
		t.Fatal("CA PEM not parsed")
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("a client trusting the CA: %v", err)
	}
	resp.Body.Close()
	if _, err := http.Get(srv.URL); err == nil {
		t.Fatal("a client without the CA trusted the server")
	}
}

// TestClientCertificateIsVerifiedThroughItsCA: a server requiring client
// certificates of the authority sees the user and groups the certificate
// names; one from another authority is refused.
func TestClientCertificateIsVerifiedThroughItsCA(t *testing.T) {
	ca, err := NewAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ca.Serving("localhost", nil, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := s.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CAPEM)
	var seen string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := r.TLS.PeerCertificates[0]
		seen = c.Subject.CommonName + "/" + c.Subject.Organization[0]
		w.WriteHeader(204)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	client := func(a *Authority) error {
		certPEM, keyPEM, err := a.Client("kube-apiserver-kubelet-client", []string{"system:masters"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := client(ca); err != nil || seen != "kube-apiserver-kubelet-client/system:masters" {
		t.Fatalf("a client of the authority: %v, seen %q", err, seen)
	}
	other, err := NewAuthority("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := client(other); err == nil {
		t.Fatal("a client certificate of another authority was accepted")
	}
}
