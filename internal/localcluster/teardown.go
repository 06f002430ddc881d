package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/azlb/azlb/internal/devenv"
)

// Down tears down the cluster whose directory is dir, from its
// state.json: the nodes' kube-proxy and kubelet, every process in the
// nodes' cgroups (the pods), containerd and its shims, the control plane;
// then every mount under dir, the nodes' cgroups, the network namespaces
// and host links, the host directories Up created, and the slot. It goes
// on past errors and returns them all; a second Down finds nothing to do.
func Down(ctx context.Context, dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	s, err := readState(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	p, err := NewPlan(s.Slot, s.Nodes)
	if err != nil {
		return err
	}
	var errs []error
	byName := map[string]Proc{}
	for _, pr := range s.Procs {
		byName[pr.Name] = pr
	}
	stop := func(names ...string) {
		for _, n := range names {
			if pr, ok := byName[n]; ok {
				if err := pr.stop(10 * time.Second); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	for _, n := range p.Nodes {
		stop(n.Name+"-kube-proxy", n.Name+"-kubelet")
	}
	for _, n := range p.Nodes {
		if err := killAll(cgroupProcs(cgroupRoot(p, n))); err != nil {
			errs = append(errs, err)
		}
	}
	for _, n := range p.Nodes {
		stop(n.Name + "-containerd")
		// containerd-shim-runc-v2 processes outlive containerd; they name
		// the node's containerd socket in their arguments.
		if err := killAll(procsWithArg(dirsOf(dir, n).socket)); err != nil {
			errs = append(errs, err)
		}
	}
	stop("coredns", "kube-scheduler", "kube-controller-manager")
	devenv.StopDetached(filepath.Join(dir, "kube"))
	for _, pr := range s.Procs { // anything else Up recorded
		if err := pr.stop(10 * time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	for _, n := range p.Nodes {
		if err := removeCgroup(cgroupRoot(p, n)); err != nil {
			errs = append(errs, err)
		}
	}
	// The host's ends of the veth pairs go with their namespaces; delete
	// them anyway in case a namespace survived.
	for _, l := range []string{p.HostLink, p.ClientLink} {
		if _, err := os.Stat(filepath.Join("/sys/class/net", l)); err == nil {
			if err := run(ctx, "ip", "link", "del", l); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err) // gone meanwhile with its namespace: fine
			}
		}
	}
	_ = os.RemoveAll(filepath.Join(dir, "netns"))
	if o, err := readOwner(s.Slot); err == nil && o.Dir == dir {
		releaseSlot(s.Slot)
	}
	removeIfEmptyTree(slotsDir)
	if err := os.Remove(filepath.Join(dir, "state.json")); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cgroupHierarchies are the mounted cgroup hierarchies (v1 controllers
// and the unified one).
func cgroupHierarchies() []string {
	var out []string
	for _, m := range mountPoints() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.point)
		}
	}
	return out
}

// cgroupProcs lists every pid in the cgroup root and below, in every
// hierarchy.
func cgroupProcs(root string) []int {
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// makeCgroup creates the cgroup root in every hierarchy (the kubelet wants
// its cgroupRoot to exist); a cpuset child gets its parent's CPUs and
// memory nodes, as cgroup v1 wants before any task joins.
func makeCgroup(root string) error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, root)
		if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
				return fmt.Errorf("cgroup %s: %w", filepath.Join(d, f), err)
			}
		}
	}
	return nil
}

// removeCgroup removes the cgroup root and its children in every
// hierarchy, deepest first.
func removeCgroup(root string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		var dirs []string
		_ = filepath.WalkDir(filepath.Join(h, root), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for range 50 { // a cgroup is busy for a moment after its last process exits
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}

// procsWithArg lists the processes with arg among their arguments.
func procsWithArg(arg string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

type mount struct{ point, fstype string }

// mountPoints lists the mounts of this process's mount namespace.
func mountPoints() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountUnder unmounts every mount at or under dir, deepest first; a
// mount still busy after a few tries is detached (MNT_DETACH).
func unmountUnder(dir string) error {
	var errs []error
	for range 5 {
		var under []string
		for _, m := range mountPoints() {
			if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
				under = append(under, m.point)
			}
		}
		if len(under) == 0 {
			return nil
		}
		sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
		errs = errs[:0]
		for _, m := range under {
			if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				if derr := syscall.Unmount(m, syscall.MNT_DETACH); derr != nil && !errors.Is(derr, syscall.EINVAL) {
					errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// removeIfEmptyTree removes dir if it holds nothing but empty directories.
func removeIfEmptyTree(dir string) {
	var dirs []string
	empty := true
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.IsDir() {
			empty = false
			return filepath.SkipAll
		}
		dirs = append(dirs, path)
		return nil
	})
	if !empty {
		return
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}
