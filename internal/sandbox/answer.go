package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/nodeagent"
)

// answerTimeout bounds the wait for one demo Service to answer: the data
// plane takes a node into rotation once its probes (every 5 s) have seen
// it up, so a Service normally answers within about 10 s of its rules.
const answerTimeout = 90 * time.Second

// waitAnswer waits until every port of a Service answers through the
// emulator's data plane to a client on src (the zero Addr: any address):
// a TCP port an HTTP GET / with 200 and the name of the node that served
// it, a UDP port a datagram with a reply naming the node (nodeagent.UDPReply).
// It returns the frontends ("IP:port/PROTOCOL") and the nodes that answered.
func waitAnswer(ctx context.Context, cs kubernetes.Interface, ns, name string, src netip.Addr, timeout time.Duration) (frontends, nodes string, err error) {
	svc, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		return "", "", fmt.Errorf("service %s/%s has no ingress IP", ns, name)
	}
	ip, err := netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
	if err != nil {
		return "", "", fmt.Errorf("service %s/%s: %w", ns, name, err)
	}
	var fes, answered []string
	for _, p := range svc.Spec.Ports {
		fe := netip.AddrPortFrom(ip, uint16(p.Port))
		hello := helloTCP
		if p.Protocol == v1.ProtocolUDP {
			hello = nodeagent.HelloUDP
		}
		desc := fmt.Sprintf("%s/%s", fe, p.Protocol)
		var node string
		var last error
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
			node, last = hello(src, fe, 2*time.Second)
			return last == nil, nil
		})
		if err != nil {
			if last == nil {
				last = err
			}
			return "", "", fmt.Errorf("service %s/%s did not answer on %s within %v (last: %w)", ns, name, desc, timeout, last)
		}
		fes, answered = append(fes, desc), append(answered, node)
	}
	return strings.Join(fes, ", "), strings.Join(answered, ", "), nil
}

// helloTCP sends GET / on a new connection from src (any address when
// src is the zero Addr) to fe and returns the name in the answer.
func helloTCP(src netip.Addr, fe netip.AddrPort, timeout time.Duration) (string, error) {
	d := &net.Dialer{Timeout: timeout}
	if src.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	tr := &http.Transport{DisableKeepAlives: true, DialContext: d.DialContext}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Timeout: timeout, Transport: tr}).Get("http://" + fe.String() + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK || name == "" {
		return "", errors.New("answered " + resp.Status + " " + name)
	}
	return name, nil
}
