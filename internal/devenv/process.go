package devenv

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process is a child process (a controller manager under test) whose output
// goes to a log file. It dies with the calling process (SIGKILL on parent
// death), so a failing test never leaves one behind.
type Process struct {
	Cmd     *exec.Cmd
	LogPath string
	done    chan struct{}
}

// StartProcess starts bin with args, its stdout and stderr appended to
// logPath.
func StartProcess(bin string, args []string, logPath string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &Process{Cmd: cmd, LogPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to grace for the exit, then kills it. A
// stopped (SIGSTOP) process is continued first so that it can exit.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL (kill -9) and waits for the exit.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Signal sends sig (SIGSTOP, SIGCONT, ...).
func (p *Process) Signal(sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// Log is the process's output so far.
func (p *Process) Log() (string, error) {
	b, err := os.ReadFile(p.LogPath)
	return string(b), err
}

// WaitForWord waits up to timeout until the file at path (a process's log)
// holds a whitespace-separated word starting with prefix, and returns that
// word (trailing "," and ";" cut): the URL a server prints once it serves.
func WaitForWord(ctx context.Context, path, prefix string, timeout time.Duration) (string, error) {
	var found string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		f, err := os.Open(path)
		if err != nil {
			return false, nil
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			for _, w := range strings.Fields(sc.Text()) {
				if strings.HasPrefix(w, prefix) {
					found = strings.TrimRight(w, ",;")
					return true, nil
				}
			}
		}
		return false, nil
	})
	return found, err
}
