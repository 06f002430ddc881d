package dataplane

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// healthKey names the health of one member under one probe.
type healthKey struct {
	probe string // probe id, lower-cased
	addr  netip.Addr
}

// target probes one member for one probe and keeps its health. Its state
// outlives configuration changes of the probe (interval, threshold): only
// the probing loop restarts.
type target struct {
	key  healthKey
	dial netip.Addr // where the member is reached (Member.Dial; fixed for its address)
	net  *netNS     // the namespace it is reached in; nil: loopback

	mu        sync.Mutex
	probe     Probe
	sec       *Security // the security groups probes must pass
	up        bool
	successes int // consecutive
	failures  int // consecutive
	probes    uint64
	lastErr   string
	lastProbe time.Time
	changedAt time.Time

	stop chan struct{}
	done chan struct{}
}

// healthy reports whether the member is probed up.
func (t *target) healthy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.up
}

// record applies one probe result. A failure with down set (an HTTP
// answer other than 200) takes the member out at once, as Azure does;
// otherwise Threshold consecutive results flip the state.
func (t *target) record(now time.Time, err error, down bool) (changed, up bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.probes++
	t.lastProbe = now
	if err == nil {
		t.lastErr = ""
		t.failures = 0
		t.successes++
		if !t.up && t.successes >= t.probe.Threshold {
			t.up, t.changedAt = true, now
			return true, true
		}
		return false, t.up
	}
	t.lastErr = err.Error()
	t.successes = 0
	t.failures++
	if t.up && (down || t.failures >= t.probe.Threshold) {
		t.up, t.changedAt = false, now
		return true, false
	}
	return false, t.up
}

// prober runs targets' loops.
type prober struct {
	clock   clock.WithTicker
	timeout time.Duration // upper bound of one probe
	logf    func(format string, args ...any)
	denied  func(Verdict) // a probe refused by a security rule
	wg      *sync.WaitGroup
}

// start runs t's loop: one probe at once, then one per interval.
func (p *prober) start(t *target) {
	t.mu.Lock()
	pr := t.probe
	t.stop, t.done = make(chan struct{}), make(chan struct{})
	stop, done := t.stop, t.done
	t.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		tick := p.clock.NewTicker(pr.Interval)
		defer tick.Stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			down, err := p.guarded(ctx, t, pr)
			if ctx.Err() != nil {
				return
			}
			if changed, up := t.record(p.clock.Now(), err, down); changed {
				p.logf("probe %s: member %s is now %s (%v)", pr.ID, t.key.addr, upDown(up), err)
			}
			select {
			case <-stop:
				return
			case <-tick.C():
			}
		}
	}()
}

// halt stops t's loop and waits for it.
func (t *target) halt() {
	t.mu.Lock()
	stop, done := t.stop, t.done
	t.stop, t.done = nil, nil
	t.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
}

func upDown(up bool) string {
	if up {
		return "Up"
	}
	return "Down"
}

// ErrProbeDenied is the error of a probe the member's security groups
// refused: it counts as an unanswered probe.
var ErrProbeDenied = errors.New("probe denied by network security")

// guarded sends one probe if the member's security groups let it through
// (source: the AzureLoadBalancer address, or for an IPv6 member each of
// ProbeSourcesIPv6; destination: the member and the probe port); a
// denied probe is a failure, as an unanswered one.
func (p *prober) guarded(ctx context.Context, t *target, pr Probe) (down bool, err error) {
	t.mu.Lock()
	sec := t.sec
	t.mu.Unlock()
	for _, src := range probeSources(t.key.addr) {
		if v := sec.Evaluate(ProtocolTCP, src, netip.AddrPortFrom(t.key.addr, pr.Port)); !v.Allowed {
			if p.denied != nil {
				p.denied(v)
			}
			return false, fmt.Errorf("%w: %s", ErrProbeDenied, v)
		}
	}
	return p.once(ctx, pr, t.dial, t.net)
}

// errNotOK is an HTTP probe answered with a status other than 200.
var errNotOK = errors.New("probe answered with a status other than 200 OK")

// once sends one probe. down reports an answer that takes the member out
// at once (an HTTP status other than 200).
func (p *prober) once(ctx context.Context, pr Probe, addr netip.Addr, via *netNS) (down bool, err error) {
	if via == nil {
		if err := Loopback(addr); err != nil {
			return false, fmt.Errorf("not probed: %w", err)
		}
	}
	timeout := min(pr.Interval, p.timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hostPort := net.JoinHostPort(addr.String(), strconv.Itoa(int(pr.Port)))
	var conn net.Conn
	if via != nil {
		// From Azure's probe address where the nodes route it back.
		var src netip.AddrPort
		if s := via.cfg.ProbeSource; s.IsValid() && s.Is4() == addr.Is4() {
			src = netip.AddrPortFrom(s, 0)
		}
		conn, err = via.dial(ctx, ProtocolTCP, src, netip.AddrPortFrom(addr, pr.Port), 0)
	} else {
		d := net.Dialer{}
		conn, err = d.DialContext(ctx, network(ProtocolTCP, addr), hostPort)
	}
	if err != nil {
		return false, err
	}
	// Stopping the loop aborts a probe that is waiting for an answer.
	stopAbort := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stopAbort()
	if strings.EqualFold(pr.Protocol, "Tcp") {
		return false, conn.Close()
	}
	defer func() { _ = conn.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if !strings.EqualFold(pr.Protocol, "Https") {
		return httpProbe(conn, hostPort, pr.Path)
	}
	// Azure's HTTPS probes do not validate the certificate.
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, ServerName: addr.String()}) //nolint:gosec // as Azure's probes
	if err := tc.HandshakeContext(ctx); err != nil {
		return false, err
	}
	return httpProbe(tc, hostPort, pr.Path)
}

// httpProbe sends GET path on c and reads the status line.
func httpProbe(c net.Conn, host, path string) (down bool, err error) {
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: Load Balancer Agent\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return false, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return true, fmt.Errorf("%w: %s", errNotOK, resp.Status)
	}
	return false, nil
}
