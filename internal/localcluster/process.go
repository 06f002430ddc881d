package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a process the cluster started, as state.json records it: Down
// signals it only while the pid still names the same process (same start
// time), never a process that reused the pid.
type Proc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // /proc/PID/stat starttime
	Log   string `json:"log"`
}

// spawner starts processes from one OS thread that lives as long as the
// cluster: a process started with a parent-death signal gets it when the
// thread that started it ends, not the process, and the Go runtime may end
// an idle thread (seen here: every node's processes got SIGTERM a moment
// after the goroutines that started them returned).
type spawner struct {
	reqs chan func()
	done chan struct{}
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func()), done: make(chan struct{})}
	go func() {
		// Never unlocked: the thread ends with this goroutine, after stop,
		// and a process still running then gets its parent-death signal.
		runtime.LockOSThread()
		defer close(s.done)
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

// do runs f on the spawner's thread.
func (s *spawner) do(f func()) {
	ran := make(chan struct{})
	s.reqs <- func() {
		defer close(ran)
		f()
	}
	<-ran
}

func (s *spawner) stop() {
	if s == nil {
		return
	}
	close(s.reqs)
	<-s.done
}

// startProc starts bin with args, output appended to log. Every process
// runs in a session of its own (a terminal's ^C does not reach it); with a
// spawner (a cluster that is not detached) it gets SIGTERM when the
// spawner's thread ends, so also when the starting process dies.
func startProc(sp *spawner, name, log string, bin string, args ...string) (Proc, <-chan struct{}, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Proc{}, nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if sp != nil {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
		sp.do(func() { err = cmd.Start() })
	} else {
		err = cmd.Start()
	}
	if err != nil {
		_ = f.Close()
		return Proc{}, nil, fmt.Errorf("start %s: %w", name, err)
	}
	_ = f.Close()
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p := Proc{Name: name, PID: cmd.Process.Pid, Log: log}
	p.Start, _ = startTime(p.PID)
	return p, done, nil
}

// startTime is the pid's start time in clock ticks since boot.
func startTime(pid int) (uint64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces and parentheses
	if i < 0 {
		return 0, fmt.Errorf("pid %d: bad stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("pid %d: short stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 of stat
}

// alive reports whether p still runs (and is the process that was started).
func (p Proc) alive() bool {
	if p.PID <= 1 {
		return false
	}
	st, err := startTime(p.PID)
	return err == nil && (p.Start == 0 || st == p.Start) && !zombie(p.PID)
}

func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

// stop sends SIGTERM, waits up to grace, then SIGKILL and waits again.
func (p Proc) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	if waitGone(p, grace) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGKILL)
	if waitGone(p, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("%s (pid %d) did not exit", p.Name, p.PID)
}

// waitGone polls /proc for a process that is not our child (its parent
// may be another process): there is nothing to wait on.
func waitGone(p Proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.alive() {
			return true
		}
		time.Sleep(50 * time.Millisecond) // polling a foreign process
	}
	return !p.alive()
}

// killAll sends SIGKILL to every pid and waits for them to be gone.
func killAll(pids []int) error {
	var procs []Proc
	for _, pid := range pids {
		st, err := startTime(pid)
		if err != nil {
			continue
		}
		procs = append(procs, Proc{Name: "pid " + strconv.Itoa(pid), PID: pid, Start: st})
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	var errs []error
	for _, p := range procs {
		if !waitGone(p, 10*time.Second) {
			errs = append(errs, fmt.Errorf("%s did not exit after SIGKILL", p.Name))
		}
	}
	return errors.Join(errs...)
}
