package emulator

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Server serves an Emulator on a listener, over TLS with a freshly generated
// CA unless started in plain-HTTP mode.
type Server struct {
	emu   *Emulator
	srv   *http.Server
	ln    net.Listener
	url   string
	caPEM []byte
	done  chan struct{}
	err   error

	closeOnce sync.Once
	closeErr  error
}

// Start listens on addr ("" means 127.0.0.1:0) and serves a new emulator.
// Unless plainHTTP, it generates a CA (ECDSA P-256) and a serving
// certificate for 127.0.0.1, ::1, localhost and the listen address.
func Start(opts Options, addr string, plainHTTP bool) (*Server, error) {
	if err := opts.withDefaults().validate(); err != nil {
		return nil, err
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("emulator: listen on %s: %w", addr, err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	s := &Server{emu: New(opts), ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{
		Handler:           s.emu,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       5 * time.Minute,
		ErrorLog:          log.New(serverLogWriter{}, "", 0),
	}
	scheme := "http"
	if !plainHTTP {
		caPEM, cert, err := newServingCert(tcp.IP)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.caPEM = caPEM
		s.srv.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"h2", "http/1.1"},
		}
		scheme = "https"
	}
	s.url = scheme + "://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port))
	go func() {
		defer close(s.done)
		var err error
		if plainHTTP {
			err = s.srv.Serve(ln)
		} else {
			err = s.srv.ServeTLS(ln, "", "")
		}
		if !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// URL is the base URL of the server, e.g. https://127.0.0.1:40123.
func (s *Server) URL() string { return s.url }

// CACertPEM is the PEM-encoded CA certificate that signed the serving
// certificate (nil in plain-HTTP mode).
func (s *Server) CACertPEM() []byte { return append([]byte(nil), s.caPEM...) }

// Emulator returns the served emulator.
func (s *Server) Emulator() *Emulator { return s.emu }

// Close stops the server and closes all connections.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.srv.Close()
		<-s.done
		if s.closeErr == nil {
			s.closeErr = s.err
		}
	})
	return s.closeErr
}

// Shutdown stops accepting connections and waits for active requests.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return err
}

// serverLogWriter forwards net/http server errors to klog, dropping TLS
// handshake errors from clients that go away (routine with test clients).
type serverLogWriter struct{}

func (serverLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if !strings.Contains(msg, "TLS handshake error") {
		klog.InfoS("emulator HTTP server", "message", msg)
	}
	return len(p), nil
}

// newServingCert creates a CA and a leaf certificate signed by it.
func newServingCert(listenIP net.IP) ([]byte, tls.Certificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: CA key: %w", err)
	}
	now := time.Now()
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "azlb emulator CA", Organization: []string{"azlb"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: CA certificate: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: serving key: %w", err)
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if listenIP != nil && !listenIP.IsUnspecified() && !listenIP.IsLoopback() {
		ips = append(ips, listenIP)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{"azlb"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(5 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  ips,
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &leafKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: serving certificate: %w", err)
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	cert := tls.Certificate{Certificate: [][]byte{leafDER, caDER}, PrivateKey: leafKey}
	return caPEM, cert, nil
}
