package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
)

// EgressRoute is where the outbound flows of pods leave from: pods
// registered in a service gateway under an outbound service leave through
// its NAT gateway, from that NAT gateway's public IP of their family.
type EgressRoute struct {
	// Service is the gateway's outbound service (an egress identity, or the
	// default one).
	Service string
	// Pods are the pod addresses the gateway maps to the service.
	Pods []netip.Addr
	// Sources are the NAT gateway's public IP addresses (at most one per
	// family is used: the smallest).
	Sources []netip.Addr
}

// ErrNoEgress reports that the pod has no outbound route (no outbound service, a NAT
// gateway without a public IP of its family, or a NAT gateway detached from
// the gateway): Azure drops its flows.
var ErrNoEgress = errors.New("no outbound route for the pod")

// egressTable maps pod addresses to their outbound source; it has its own
// lock (SetEgress is called after every ARM write).
type egressTable struct {
	mu    sync.RWMutex
	route map[netip.Addr]egressHop
}

type egressHop struct {
	service string
	source  netip.Addr
}

// SetEgress replaces the outbound routes (the whole set).
func (p *Plane) SetEgress(routes []EgressRoute) {
	m := map[netip.Addr]egressHop{}
	for _, r := range routes {
		srcs := append([]netip.Addr(nil), r.Sources...)
		sort.Slice(srcs, func(i, j int) bool { return srcs[i].Less(srcs[j]) })
		for _, pod := range r.Pods {
			for _, s := range srcs {
				if s.Is4() == pod.Is4() {
					m[pod.Unmap()] = egressHop{service: r.Service, source: s}
					break
				}
			}
		}
	}
	p.egress.mu.Lock()
	p.egress.route = m
	p.egress.mu.Unlock()
}

// EgressSource returns the address a pod's outbound flows leave from and
// the outbound service that carries them.
func (p *Plane) EgressSource(pod netip.Addr) (source netip.Addr, service string, ok bool) {
	p.egress.mu.RLock()
	defer p.egress.mu.RUnlock()
	h, ok := p.egress.route[pod.Unmap()]
	return h.source, h.service, ok
}

// DialEgress opens an outbound flow of a pod ("tcp" or "udp") to a
// loopback address: the peer sees it come from the pod's outbound source
// (its NAT gateway's public IP). A pod without a route gets ErrNoEgress; a
// destination or source that is not a loopback address is refused (the
// data plane never sends a packet off the machine).
func (p *Plane) DialEgress(ctx context.Context, pod netip.Addr, network, address string) (net.Conn, error) {
	src, svc, ok := p.EgressSource(pod)
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrNoEgress, pod)
	}
	dst, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("egress destination %q: %w", address, err)
	}
	if err := Loopback(dst.Addr()); err != nil {
		return nil, fmt.Errorf("egress destination: %w", err)
	}
	if err := Loopback(src); err != nil {
		return nil, fmt.Errorf("outbound source of service %s: %w", svc, err)
	}
	d := net.Dialer{}
	switch strings.ToLower(network) {
	case "tcp", "tcp4", "tcp6":
		d.LocalAddr = &net.TCPAddr{IP: src.AsSlice()}
	case "udp", "udp4", "udp6":
		d.LocalAddr = &net.UDPAddr{IP: src.AsSlice()}
	default:
		return nil, fmt.Errorf("egress network %q is not served (tcp and udp are)", network)
	}
	return d.DialContext(ctx, network, dst.String())
}
