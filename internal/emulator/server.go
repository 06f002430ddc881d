package emulator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/azlb/azlb/internal/pki"
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
	if n := opts.DataPlaneNetwork; n != nil {
		if err := n.Check(); err != nil {
			return nil, err
		}
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
		_ = s.emu.Close()
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
	_ = s.emu.Close()
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

// newServingCert creates a CA and a serving certificate signed by it, for
// localhost, the loopback addresses and the listen address.
func newServingCert(listenIP net.IP) ([]byte, tls.Certificate, error) {
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	if listenIP != nil && !listenIP.IsUnspecified() && !listenIP.IsLoopback() {
		ips = append(ips, listenIP)
	}
	s, err := pki.NewServing("azlb emulator CA", "localhost", []string{"localhost"}, ips, 5*365*24*time.Hour)
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: %w", err)
	}
	cert, err := s.TLSCertificate()
	if err != nil {
		return nil, tls.Certificate{}, fmt.Errorf("emulator: serving certificate: %w", err)
	}
	return s.CAPEM, cert, nil
}
