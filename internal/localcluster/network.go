package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// run runs a command and returns its error with its output.
func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// in runs a command inside the network namespace file ns.
func in(ctx context.Context, ns, name string, args ...string) error {
	return run(ctx, "nsenter", append([]string{"--net=" + ns, "--", name}, args...)...)
}

// ipIn runs `ip ARGS` inside the network namespace file ns.
func ipIn(ctx context.Context, ns string, args ...string) error { return in(ctx, ns, "ip", args...) }

// sysctlIn writes net.* settings inside ns (each namespace has its own).
func sysctlIn(ctx context.Context, ns string, kv ...string) error {
	return in(ctx, ns, "sysctl", append([]string{"-q", "-w"}, kv...)...)
}

// netnsPath is the file of the cluster's network namespace name.
func netnsPath(dir, name string) string { return filepath.Join(dir, "netns", name) }

// newNetNS creates a network namespace kept alive by a bind mount on
// path (unshare --net=PATH).
func newNetNS(ctx context.Context, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return err
	}
	if err := run(ctx, "unshare", "--net="+path, "true"); err != nil {
		return err
	}
	return ipIn(ctx, path, "link", "set", "lo", "up")
}

// setupNetwork builds the cluster's networks (see Plan):
//
//	host ── azlb<s>h ─┐                         ┌─ eth0 node0 (pods on cni0)
//	                  └─ br0 in namespace fabric ┼─ eth0 node1 ...
//	                                             └─ nd0 lb ── cl0 ── azlb<s>c ── host
//
// The host reaches the nodes and their pods over azlb<s>h, the public IPs
// through the load balancer's namespace over azlb<s>c, from ClientIP. In
// the load balancer's namespace every packet that arrives (from clients on
// cl0, from nodes on nd0) is delivered locally, whatever its destination:
// the emulator's data plane accepts clients there on the frontends'
// addresses and talks to nodes from the clients' addresses (transparent
// sockets), so no address of its own stands in for either. The nodes route
// the client range and the probe source (168.63.129.16) to it, other
// nodes' pod ranges to those nodes, and nothing else: no namespace has a
// default route.
func setupNetwork(ctx context.Context, dir string, p Plan) error {
	fab, lb := netnsPath(dir, p.fabric), netnsPath(dir, p.lb)
	for _, ns := range append([]string{fab, lb}, nodePaths(dir, p)...) {
		if err := newNetNS(ctx, ns); err != nil {
			return err
		}
	}
	steps := [][]string{
		// The fabric: a bridge, nothing else; its frames go through no
		// firewall.
		{"fab", "link", "add", "br0", "type", "bridge"},
		{"fab", "link", "set", "br0", "up"},
		// The host's leg on the bridge.
		{"", "link", "add", p.HostLink, "type", "veth", "peer", "name", "host", "netns", fab},
		{"fab", "link", "set", "host", "master", "br0", "up"},
		{"", "addr", "add", prefixOf(p.HostIP, p.NodeNet), "dev", p.HostLink},
		{"", "link", "set", p.HostLink, "up"},
		// The load balancer: nd0 on the bridge, cl0 to the host.
		{"lb", "link", "add", "nd0", "type", "veth", "peer", "name", "lb", "netns", fab},
		{"fab", "link", "set", "lb", "master", "br0", "up"},
		{"lb", "addr", "add", prefixOf(p.LBNodeIP, p.NodeNet), "dev", "nd0"},
		{"lb", "link", "set", "nd0", "up"},
		{"", "link", "add", p.ClientLink, "type", "veth", "peer", "name", "cl0", "netns", lb},
		{"", "addr", "add", prefixOf(p.ClientIP, p.ClientNet), "dev", p.ClientLink},
		{"", "link", "set", p.ClientLink, "up"},
		{"lb", "addr", "add", prefixOf(p.LBClientIP, p.ClientNet), "dev", "cl0"},
		{"lb", "link", "set", "cl0", "up"},
		{"lb", "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", "100"},
		{"lb", "rule", "add", "pref", "100", "iif", "cl0", "lookup", "100"},
		{"lb", "rule", "add", "pref", "101", "iif", "nd0", "lookup", "100"},
		{"", "route", "add", p.Public.String(), "via", p.LBClientIP.String(), "dev", p.ClientLink},
	}
	for i, n := range p.Nodes {
		key := "node" + fmt.Sprint(i)
		steps = append(steps,
			[]string{key, "link", "add", "eth0", "type", "veth", "peer", "name", "n" + fmt.Sprint(i), "netns", fab},
			[]string{"fab", "link", "set", "n" + fmt.Sprint(i), "master", "br0", "up"},
			[]string{key, "addr", "add", prefixOf(n.IP, p.NodeNet), "dev", "eth0"},
			[]string{key, "link", "set", "eth0", "up"},
			[]string{key, "route", "add", p.ClientNet.String(), "via", p.LBNodeIP.String()},
			[]string{key, "route", "add", ProbeSource.String() + "/32", "via", p.LBNodeIP.String()},
			// Connections from the node itself to a cluster IP are
			// translated after the routing decision: the range needs a route.
			[]string{key, "route", "add", p.ServiceCIDR.String(), "dev", "eth0"},
			[]string{"", "route", "add", n.PodCIDR.String(), "via", n.IP.String(), "dev", p.HostLink},
			[]string{"lb", "route", "add", n.PodCIDR.String(), "via", n.IP.String()},
		)
		for j, o := range p.Nodes {
			if j != i {
				steps = append(steps, []string{key, "route", "add", o.PodCIDR.String(), "via", o.IP.String()})
			}
		}
	}
	nsOf := map[string]string{"fab": fab, "lb": lb}
	for i := range p.Nodes {
		nsOf["node"+fmt.Sprint(i)] = nodePaths(dir, p)[i]
	}
	for _, s := range steps {
		var err error
		if s[0] == "" {
			err = run(ctx, "ip", s[1:]...)
		} else {
			err = ipIn(ctx, nsOf[s[0]], s[1:]...)
		}
		if err != nil {
			return err
		}
	}
	// Settings of the cluster's own namespaces (never the host's).
	if err := sysctlIn(ctx, fab, "net.bridge.bridge-nf-call-iptables=0", "net.bridge.bridge-nf-call-ip6tables=0"); err != nil {
		return err
	}
	// Every address is local to the load balancer's namespace for packets
	// that arrive on nd0 and cl0 (table 100): it must still answer ARP
	// only for its own addresses (arp_ignore 1), or it would claim the
	// host's and the nodes' on the bridge.
	if err := sysctlIn(ctx, lb, "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.conf.nd0.rp_filter=0", "net.ipv4.conf.cl0.rp_filter=0",
		"net.ipv4.conf.nd0.arp_ignore=1", "net.ipv4.conf.cl0.arp_ignore=1",
		"net.ipv4.conf.nd0.arp_announce=2", "net.ipv4.conf.cl0.arp_announce=2"); err != nil {
		return err
	}
	for _, ns := range nodePaths(dir, p) {
		// Pods route through their node; kube-proxy's rules see bridged
		// pod traffic (hairpin to a Service on the same node).
		if err := sysctlIn(ctx, ns, "net.ipv4.ip_forward=1", "net.bridge.bridge-nf-call-iptables=1",
			"net.bridge.bridge-nf-call-ip6tables=1", "net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0"); err != nil {
			return err
		}
	}
	return nil
}

func nodePaths(dir string, p Plan) []string {
	out := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		out[i] = netnsPath(dir, n.NetNS)
	}
	return out
}

func prefixOf(a netip.Addr, net netip.Prefix) string {
	return netip.PrefixFrom(a, net.Bits()).String()
}

// checkFree refuses a plan whose ranges overlap an address or route the
// machine already has (another network the cluster would shadow).
func checkFree(ctx context.Context, p Plan) error {
	out, err := output(ctx, "ip", "-o", "-4", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	addrs, err := output(ctx, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range append(strings.Split(out, "\n"), strings.Split(addrs, "\n")...) {
		for _, f := range strings.Fields(line) {
			q, err := netip.ParsePrefix(f)
			if err != nil {
				if a, aerr := netip.ParseAddr(f); aerr == nil {
					q = netip.PrefixFrom(a, 32)
				} else {
					continue
				}
			}
			if q.Bits() == 0 {
				continue // a default route overlaps everything and is no network of ours
			}
			for _, r := range p.Ranges() {
				if r.Overlaps(q) {
					errs = append(errs, fmt.Errorf("range %s of slot %d overlaps %s on this machine (%s)", r, p.Slot, q, strings.TrimSpace(line)))
				}
			}
		}
	}
	return errors.Join(errs...)
}
