package nodeagent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/azlb/azlb/internal/emulator/dataplane"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
)

// ProxyHealthPort is kube-proxy's own health port (/healthz), which load
// balancers probe in the shared health probe mode.
const ProxyHealthPort = 10256

// annotationDisableFloatingIP mirrors the Service annotation azlb reads
// (internal/annotations): with floating IP on, the load balancer sends a
// Service's traffic to the node at the Service port.
const annotationDisableFloatingIP = "service.beta.kubernetes.io/azure-disable-load-balancer-floating-ip"

// Proxy is the kube-proxy part of a simulated node, for the emulator's data
// plane: on the node's loopback IPv4 addresses it serves every TCP and UDP
// port a load balancer sends Service traffic to (the node port; the Service
// port too when floating IP is on), so a client sees which node served it:
// each HTTP request on a TCP port is answered with the node's name, each
// datagram on a UDP port with a reply datagram naming the node (UDPReply).
// As kube-proxy does, it refuses traffic of a Service with no ready
// endpoint, and of an externalTrafficPolicy Local Service with no ready
// endpoint on this node: a TCP connection is reset, a UDP datagram
// dropped. The Service's health check node port (TCP) answers 200 when the
// node has ready endpoints of the Service and 503 otherwise; port 10256
// answers /healthz. SCTP ports are not served. Addresses that are not IPv4
// loopback are never bound.
type Proxy struct {
	node     string
	addrs    []netip.Addr
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	log      klog.Logger

	mu      sync.Mutex
	servers map[socketKey]server
}

// portKey is a port of one protocol (v1.ProtocolTCP or v1.ProtocolUDP).
type portKey struct {
	proto v1.Protocol
	port  uint16
}

// socketKey is a port of one protocol on one address.
type socketKey struct {
	proto v1.Protocol
	addr  netip.AddrPort
}

// server serves one socketKey: a TCP port (portServer) or a UDP port
// (udpServer).
type server interface {
	// setRoles replaces what the port serves.
	setRoles(roles []portRole)
	// close stops serving and waits until the server has stopped.
	close()
}

// NewProxy builds the proxy of a node from its addresses (those that are
// not IPv4 loopback are ignored) and listers of Services and
// EndpointSlices. Nothing is served before Sync.
func NewProxy(node string, ips []string, services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister, log klog.Logger) (*Proxy, error) {
	if node == "" || services == nil || slices == nil {
		return nil, errors.New("nodeagent: NewProxy: node name, Service and EndpointSlice listers are required")
	}
	p := &Proxy{node: node, services: services, slices: slices, log: log.WithValues("node", node), servers: map[socketKey]server{}}
	for _, s := range ips {
		// Loopback addresses only (IPv4 127/8; IPv6 ::1 and prefixes
		// routed to the loopback device, as the data plane serves them).
		if a, err := netip.ParseAddr(s); err == nil && dataplane.Loopback(a) == nil {
			p.addrs = append(p.addrs, a)
		}
	}
	return p, nil
}

// portRole is what one port serves for one Service.
type portRole struct {
	kind    roleKind
	svc     types.NamespacedName
	local   bool
	ingress []string // the Service's load balancer IPs
}

type roleKind int

const (
	roleTraffic     roleKind = iota // the Service's traffic
	roleHealthCheck                 // the Service's health check node port
	roleProxyHealth                 // kube-proxy's /healthz
)

// roleSet is what a port serves, swapped atomically by Sync.
type roleSet struct{ roles atomic.Pointer[[]portRole] }

func (r *roleSet) setRoles(roles []portRole) { r.roles.Store(&roles) }

// roleFrom is the role of a flow from src. Several floating-IP Services
// on one port: the data plane connects from the frontend's address, which
// names the Service; otherwise the port's first role.
func (r *roleSet) roleFrom(src netip.Addr) portRole {
	roles := *r.roles.Load()
	if len(roles) > 1 {
		host := src.Unmap().String()
		for _, x := range roles {
			if slices.Contains(x.ingress, host) {
				return x
			}
		}
	}
	return roles[0]
}

// portServer serves one TCP address and port over HTTP.
type portServer struct {
	roleSet
	p    *Proxy
	ln   net.Listener
	srv  *http.Server
	done chan struct{}
}

// Sync makes the served ports match the Services. With running false the
// node is down: every port closes and every connection ends. A port that
// cannot be opened is logged and tried again at the next Sync.
func (p *Proxy) Sync(running bool) error {
	want := map[portKey][]portRole{}
	if running && len(p.addrs) > 0 {
		var err error
		if want, err = p.desired(); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, s := range p.servers {
		if _, ok := want[portKey{k.proto, k.addr.Port()}]; !ok {
			s.close()
			delete(p.servers, k)
		}
	}
	var errs []error
	for pk, roles := range want {
		for _, a := range p.addrs {
			k := socketKey{pk.proto, netip.AddrPortFrom(a, pk.port)}
			s := p.servers[k]
			if s == nil {
				var err error
				if s, err = p.listen(k, roles); err != nil {
					errs = append(errs, err)
					continue
				}
				p.servers[k] = s
			}
			s.setRoles(roles)
		}
	}
	if len(errs) > 0 {
		p.log.Info("Simulated kube-proxy cannot open some ports; retrying", "err", errors.Join(errs...))
	}
	return nil
}

// Close closes every port.
func (p *Proxy) Close() { _ = p.Sync(false) }

// desired lists the roles of every port from the Services: a TCP or UDP
// Service port is served on its node port (and Service port with floating
// IP) in its own protocol; health check ports are TCP.
func (p *Proxy) desired() (map[portKey][]portRole, error) {
	svcs, err := p.services.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	sort.Slice(svcs, func(i, j int) bool {
		return svcs[i].Namespace+"/"+svcs[i].Name < svcs[j].Namespace+"/"+svcs[j].Name
	})
	want := map[portKey][]portRole{{v1.ProtocolTCP, ProxyHealthPort}: {{kind: roleProxyHealth}}}
	add := func(proto v1.Protocol, port int32, r portRole) {
		k := portKey{proto, uint16(port)}
		if port > 0 && port <= 65535 && k != (portKey{v1.ProtocolTCP, ProxyHealthPort}) {
			want[k] = append(want[k], r)
		}
	}
	for _, s := range svcs {
		lb := s.Spec.Type == v1.ServiceTypeLoadBalancer
		if !lb && s.Spec.Type != v1.ServiceTypeNodePort {
			continue
		}
		r := portRole{kind: roleTraffic, svc: types.NamespacedName{Namespace: s.Namespace, Name: s.Name},
			local: s.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal}
		for _, in := range s.Status.LoadBalancer.Ingress {
			r.ingress = append(r.ingress, in.IP)
		}
		floating := lb && !strings.EqualFold(strings.TrimSpace(s.Annotations[annotationDisableFloatingIP]), "true")
		for _, port := range s.Spec.Ports {
			proto := cmp.Or(port.Protocol, v1.ProtocolTCP)
			if proto != v1.ProtocolTCP && proto != v1.ProtocolUDP {
				continue
			}
			add(proto, port.NodePort, r)
			if floating {
				add(proto, port.Port, r)
			}
		}
		if lb && r.local {
			hc := r
			hc.kind = roleHealthCheck
			add(v1.ProtocolTCP, s.Spec.HealthCheckNodePort, hc)
		}
	}
	return want, nil
}

// listen opens a port of its protocol and serves roles on it.
func (p *Proxy) listen(k socketKey, roles []portRole) (server, error) {
	if k.proto == v1.ProtocolUDP {
		return p.listenUDP(k.addr, roles)
	}
	lc := net.ListenConfig{Control: dataplane.FreeBind}
	ln, err := lc.Listen(context.Background(), tcpNetwork(k.addr.Addr()), k.addr.String())
	if err != nil {
		return nil, err
	}
	s := &portServer{p: p, ln: ln, done: make(chan struct{})}
	s.setRoles(roles)
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

func (s *portServer) close() {
	_ = s.srv.Close()
	<-s.done
}

// ServeHTTP answers one request on a port.
func (s *portServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var src netip.Addr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		src = ap.Addr()
	}
	role := s.roleFrom(src)
	p := s.p
	switch role.kind {
	case roleProxyHealth:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"lastUpdated": time.Now().UTC(), "currentTime": time.Now().UTC(), "nodeHealthy": true})
	case roleHealthCheck:
		_, local, _, _ := p.endpoints(role.svc)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if local == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"service":        map[string]string{"namespace": role.svc.Namespace, "name": role.svc.Name},
			"localEndpoints": local, "serviceProxyHealthy": true})
	default:
		if !p.serves(role) {
			reset(w) // kube-proxy rejects or drops it
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, p.node+"\n")
	}
}

// serves reports whether kube-proxy on this node forwards a Service's
// traffic: to its ready endpoints (with externalTrafficPolicy Local, this
// node's) or, when there are none, to those terminating but still serving,
// as kube-proxy does since ProxyTerminatingEndpoints (KEP-1669).
func (p *Proxy) serves(role portRole) bool {
	ready, local, serving, localServing := p.endpoints(role.svc)
	if role.local {
		return local > 0 || localServing > 0
	}
	return ready > 0 || serving > 0
}

// endpoints counts the Service's ready endpoints and its terminating but
// serving ones (serving unset counts as serving, as kube-proxy reads it),
// and of each those on this node.
func (p *Proxy) endpoints(svc types.NamespacedName) (ready, local, serving, localServing int) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	slices, err := p.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return 0, 0, 0, 0
	}
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			here := ep.NodeName != nil && *ep.NodeName == p.node
			c := ep.Conditions
			switch {
			case c.Ready == nil || *c.Ready:
				ready++
				if here {
					local++
				}
			case c.Terminating != nil && *c.Terminating && (c.Serving == nil || *c.Serving):
				serving++
				if here {
					localServing++
				}
			}
		}
	}
	return ready, local, serving, localServing
}

// reset drops the connection with a TCP reset.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	c, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// tcpNetwork is "tcp4" or "tcp6" for the address's family.
func tcpNetwork(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "tcp4"
	}
	return "tcp6"
}
