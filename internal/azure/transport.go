package azure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
)

// writeIdleConnsPerHost is how many idle HTTP/1.1 connections to one host
// the write transport keeps: each write in flight holds one connection, and
// the Store, the admin-state and NIC controllers write concurrently.
const writeIdleConnsPerHost = 32

// armTransport is the HTTP transport NewClients builds for ARM and AAD. It
// closes the gap between the write fence's per-attempt check (fencePolicy)
// and the bytes leaving the process: a replica frozen in that gap (SIGSTOP,
// a VM pause) would otherwise send an admitted write after it resumed, when
// another replica may already lead.
//
//   - Requests fencePolicy marked as writes (every PUT, PATCH, POST and
//     DELETE of an ARM client, see markWrite) go through their own HTTP/1.1
//     connections, whose every socket write (TLS handshake, headers, each
//     piece of the body) asks the fence first. A write that resumes after
//     its replica lost the lease fails before its next byte is sent.
//   - Everything else (reads, operation polls, AAD token requests) shares
//     the ordinary transport, HTTP/2 where the server offers it, unfenced: a
//     replica that lost its lease may still authenticate and read.
//
// HTTP/1.1 keeps one request per connection, so a connection's bytes are
// always its one write's; nothing else (HTTP/2 window updates, pings) writes
// on it while the response is read.
type armTransport struct {
	reads, writes *http.Client
	fence         func() error
}

// writeMark is the context key fencePolicy sets on write attempts.
type writeMark struct{}

// markWrite returns ctx marked as carrying an ARM write.
func markWrite(ctx context.Context) context.Context { return context.WithValue(ctx, writeMark{}, true) }

func isWrite(ctx context.Context) bool { return ctx.Value(writeMark{}) != nil }

// newBaseTransport is the HTTP transport for ARM and AAD: Go's default
// transport, trusting the system roots plus caCertFile's PEM bundle when it
// is set.
func newBaseTransport(caCertFile string) (*http.Transport, error) {
	base, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return nil, errors.New("http.DefaultTransport is not an *http.Transport")
	}
	tr := base.Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	if caCertFile == "" {
		return tr, nil
	}
	pemBytes, err := os.ReadFile(caCertFile)
	if err != nil {
		return nil, fmt.Errorf("caCertFile: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("caCertFile %q contains no PEM certificate", caCertFile)
	}
	tr.TLSClientConfig.RootCAs = pool
	return tr, nil
}

// newARMTransport splits base into the read transport (base itself) and an
// HTTP/1.1 write transport whose connections ask fence before every socket
// write. fence returns nil to allow.
func newARMTransport(base *http.Transport, fence func() error) *armTransport {
	w := base.Clone()
	// Clone copies base's HTTP/2 set-up (ALPN "h2" and its TLSNextProto
	// entry): offer and speak HTTP/1.1 only.
	w.Protocols = new(http.Protocols)
	w.Protocols.SetHTTP1(true)
	w.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	w.TLSClientConfig = w.TLSClientConfig.Clone()
	w.TLSClientConfig.NextProtos = []string{"http/1.1"}
	w.MaxIdleConnsPerHost = writeIdleConnsPerHost
	dial := w.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	w.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if err := fence(); err != nil { // not even a TCP handshake
			return nil, &socketFenceError{err: err}
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &fencedConn{Conn: c, fence: fence}, nil
	}
	return &armTransport{reads: &http.Client{Transport: base}, writes: &http.Client{Transport: w}, fence: fence}
}

// Do sends marked writes through the fenced transport. A write that fails
// while the fence is closed is reported as fenced (final for the SDK retry
// policy, like fencePolicy's refusals): whatever part of it was sent went
// out before the fence closed, and a retry would be refused anyway.
func (t *armTransport) Do(req *http.Request) (*http.Response, error) {
	if !isWrite(req.Context()) {
		return t.reads.Do(req)
	}
	resp, err := t.writes.Do(req)
	if err == nil {
		return resp, nil
	}
	var sf *socketFenceError
	if errors.As(err, &sf) {
		return nil, &fencedError{method: req.Method, path: req.URL.Path, err: fmt.Errorf("at the socket: %w", sf.err)}
	}
	if ferr := t.fence(); ferr != nil {
		return nil, &fencedError{method: req.Method, path: req.URL.Path, err: fmt.Errorf("at the socket: %w (the write failed: %w)", ferr, err)}
	}
	return nil, err
}

// CloseIdleConnections closes both transports' idle connections.
func (t *armTransport) CloseIdleConnections() {
	t.reads.CloseIdleConnections()
	t.writes.CloseIdleConnections()
}

// fencedConn asks the fence before each write to the socket. Between that
// check and the system call there are only a few instructions, the whole
// remaining window for a freeze to let an admitted write out late.
type fencedConn struct {
	net.Conn
	fence func() error
}

func (c *fencedConn) Write(p []byte) (int, error) {
	if err := c.fence(); err != nil {
		return 0, &socketFenceError{err: err}
	}
	return c.Conn.Write(p)
}

// socketFenceError is a socket write the fence refused.
type socketFenceError struct{ err error }

func (e *socketFenceError) Error() string {
	return fmt.Sprintf("socket write refused: %v: %v", ErrWriteFenced, e.err)
}

func (e *socketFenceError) Unwrap() []error { return []error{ErrWriteFenced, e.err} }
