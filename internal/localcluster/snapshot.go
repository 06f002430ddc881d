package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Snapshot is what of the host a cluster could change, as text lines by
// section: the host's links, addresses, routes and policy rules, the
// firewall rules, the mounts, the top cgroups of every hierarchy, the
// host directories components create, and the kernel settings kubelet and
// kube-proxy would write. Down must leave it as Up found it.
type Snapshot map[string][]string

// hostSysctls are the settings a node's components would write if they
// ran in the host's namespaces.
var hostSysctls = []string{
	"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv4/conf/all/route_localnet",
	"net/ipv4/conf/all/rp_filter", "net/ipv4/conf/default/rp_filter",
	"net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// TakeSnapshot reads the host's state.
func TakeSnapshot(ctx context.Context) (Snapshot, error) {
	s := Snapshot{}
	cmds := map[string][]string{
		"links":   {"ip", "-o", "link", "show"},
		"addrs":   {"ip", "-o", "addr", "show"},
		"routes4": {"ip", "-4", "route", "show", "table", "all"},
		"routes6": {"ip", "-6", "route", "show", "table", "all"},
		"rules4":  {"ip", "-4", "rule", "show"},
		"rules6":  {"ip", "-6", "rule", "show"},
		"nft":     {"nft", "list", "ruleset"},
	}
	for name, c := range cmds {
		out, err := output(ctx, c[0], c[1:]...)
		if err != nil {
			return nil, err
		}
		s[name] = lines(out)
	}
	// Link lines carry counters of no interest (the peer index changes
	// with nothing of ours): keep the index and name.
	for i, l := range s["links"] {
		if f := strings.Fields(l); len(f) > 1 {
			s["links"][i] = f[0] + " " + strings.TrimSuffix(f[1], ":")
		}
	}
	for _, m := range mountPoints() {
		s["mounts"] = append(s["mounts"], m.point+" "+m.fstype)
	}
	for _, h := range cgroupHierarchies() {
		ents, _ := os.ReadDir(h)
		for _, e := range ents {
			if e.IsDir() {
				s["cgroups"] = append(s["cgroups"], filepath.Join(h, e.Name()))
			}
		}
	}
	for _, d := range append(hostRuntimeDirs, slotsDir, "/run/netns", "/etc/cni", "/var/lib/kubelet", "/var/log/pods", "/var/log/containers") {
		if _, err := os.Stat(d); err == nil {
			s["dirs"] = append(s["dirs"], d)
		}
	}
	for _, k := range hostSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err == nil {
			s["sysctls"] = append(s["sysctls"], k+"="+strings.TrimSpace(string(b)))
		}
	}
	for k := range s {
		sort.Strings(s[k])
	}
	return s, nil
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Diff lists what differs between two snapshots ("+ section: line" for
// what after has and before had not, "- ..." the other way) among the
// lines relevant says may be a cluster's doing: on a shared machine other
// processes change the host too.
func Diff(before, after Snapshot, relevant func(section, line string) bool) []string {
	var out []string
	for _, sec := range sortedKeys(before, after) {
		b, a := set(before[sec]), set(after[sec])
		for l := range a {
			if !b[l] && relevant(sec, l) {
				out = append(out, "+ "+sec+": "+l)
			}
		}
		for l := range b {
			if !a[l] && relevant(sec, l) {
				out = append(out, "- "+sec+": "+l)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Relevant is Diff's filter for a cluster in slot with directory dir:
// every line naming its links, cgroups, directory or address ranges, and
// every line of the sections only a cluster's components would change
// (firewall, kernel settings, the runtime directories).
func Relevant(slot int, dir string) func(section, line string) bool {
	p, _ := NewPlan(slot, 1)
	marks := []string{dir, p.HostLink, p.ClientLink, fmt.Sprintf("/azlb%d-", slot), ProbeSource.String(), "cni0", "kube-"}
	for _, r := range p.Ranges() {
		// The address prefix as text: "10.224." for a /16, "198.18.0." for a /24.
		parts := strings.Split(r.Addr().String(), ".")
		marks = append(marks, strings.Join(parts[:r.Bits()/8], ".")+".")
	}
	return func(section, line string) bool {
		switch section {
		case "nft", "sysctls", "dirs":
			return true
		}
		for _, m := range marks {
			if strings.Contains(line, m) {
				return true
			}
		}
		return false
	}
}

func set(l []string) map[string]bool {
	m := make(map[string]bool, len(l))
	for _, x := range l {
		m[x] = true
	}
	return m
}

func sortedKeys(ms ...Snapshot) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range ms {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	sort.Strings(out)
	return out
}
