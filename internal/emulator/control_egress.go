package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/azlb/azlb/internal/emulator/dataplane"
)

// Limits of a pod's HTTP request sent through the control API.
const (
	egressRequestTimeout = 10 * time.Second
	egressMaxBody        = 64 << 10
)

// serveEgressControl answers /_emulator/egress: GET ?pod=IP tells a pod's
// outbound route; POST {"pod":IP,"url":"http://..."} sends an HTTP GET as
// the pod would, through the data plane (its flow leaves from the route's
// source), and returns what came back. This is how a user outside the
// emulator's process plays "curl from the pod": pods are not processes
// here.
func (e *Emulator) serveEgressControl(w http.ResponseWriter, r *http.Request) {
	if e.dp == nil {
		controlError(w, http.StatusNotFound, "the data plane is off (start the emulator with --data-plane)")
		return
	}
	var body struct {
		Pod string `json:"pod"`
		URL string `json:"url"`
	}
	switch r.Method {
	case http.MethodGet:
		body.Pod = r.URL.Query().Get("pod")
	case http.MethodPost:
		if err := decodeStrict(r, &body); err != nil {
			controlError(w, http.StatusBadRequest, "invalid egress request: %v", err)
			return
		}
	default:
		controlError(w, http.StatusNotFound, "no control endpoint %s %s; see docs/emulator.md", r.Method, r.URL.Path)
		return
	}
	pod, err := netip.ParseAddr(body.Pod)
	if err != nil {
		controlError(w, http.StatusBadRequest, "field \"pod\" must be the pod's IP address: %q", body.Pod)
		return
	}
	src, svc, ok := e.EgressSource(pod)
	if !ok {
		controlError(w, http.StatusConflict, "%v %s (no outbound service in a service gateway maps it to an attached NAT gateway with a public IP of its family)", dataplane.ErrNoEgress, pod)
		return
	}
	out := obj{"pod": pod.String(), "service": svc, "source": src.String()}
	if r.Method == http.MethodGet {
		controlJSON(w, http.StatusOK, out)
		return
	}
	u, err := url.Parse(body.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		controlError(w, http.StatusBadRequest, "field \"url\" must be an http:// URL with a loopback IP address and port: %q", body.URL)
		return
	}
	status, answer, err := e.egressGet(r.Context(), pod, u)
	if err != nil {
		controlError(w, http.StatusBadGateway, "the pod's request to %s failed: %v", u, err)
		return
	}
	out["status"], out["body"] = status, answer
	controlJSON(w, http.StatusOK, out)
}

// egressGet sends one HTTP GET from a pod through DialEgress, following no
// redirect, and returns the status and at most egressMaxBody of the body.
func (e *Emulator) egressGet(ctx context.Context, pod netip.Addr, u *url.URL) (int, string, error) {
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return e.DialEgress(ctx, pod, network, host)
		},
	}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: egressRequestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, egressMaxBody))
	if err != nil {
		return 0, "", fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, string(b), nil
}
