package readme

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Result is what one command did.
type Result struct {
	Stdout, Stderr string
	// Code is its exit status.
	Code int
	// Took is how long it ran.
	Took time.Duration
	// Base is where its outputs are (Base+".out", Base+".err"); a
	// background job it started goes on writing there.
	Base string
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d after %v\n--- stdout:\n%s--- stderr:\n%s", r.Code, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Session is one bash process that runs commands one after another, so
// variables, exports and background jobs carry over from one to the next
// as in a user's terminal. Each command's output goes to files of its own.
type Session struct {
	dir   string // where the outputs go
	cmd   *exec.Cmd
	stdin io.WriteCloser
	n     int
	mu    sync.Mutex
	exit  chan struct{}
}

// StartSession starts bash (argv: the command that runs it, for example
// through nsenter) in workdir with env.
func StartSession(argv []string, workdir string, env []string, outDir string) (*Session, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = workdir
	cmd.Env = env
	log, err := os.Create(filepath.Join(outDir, "session.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	s := &Session{dir: outDir, cmd: cmd, stdin: stdin, exit: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(s.exit)
	}()
	return s, nil
}

// Run runs one command (as bash reads it: several lines are fine) and
// waits for it, at most timeout. A command that outlives timeout fails the
// session: bash is still busy with it.
func (s *Session) Run(ctx context.Context, command string, timeout time.Duration) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	base := filepath.Join(s.dir, strconv.Itoa(s.n))
	rc := base + ".rc"
	// The group runs in the session's shell (no subshell), so assignments
	// and exports stay; a background job inherits the group's outputs.
	script := fmt.Sprintf("{ %s\n} >%q 2>%q </dev/null; echo $? >%q.tmp; mv %q.tmp %q\n",
		command, base+".out", base+".err", rc, rc, rc)
	start := time.Now()
	if _, err := io.WriteString(s.stdin, script); err != nil {
		return Result{}, fmt.Errorf("the session's bash is gone: %w", err)
	}
	var code int
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-s.exit:
			return false, errors.New("the session's bash exited")
		default:
		}
		b, err := os.ReadFile(rc)
		if err != nil {
			return false, nil //nolint:nilerr // not done yet
		}
		code, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return true, err
	})
	r := Result{Took: time.Since(start), Code: code, Base: base}
	out, _ := os.ReadFile(base + ".out")
	errOut, _ := os.ReadFile(base + ".err")
	r.Stdout, r.Stderr = string(out), string(errOut)
	if err != nil {
		return r, fmt.Errorf("%q did not finish within %v: %w", command, timeout, err)
	}
	return r, nil
}

// Value is a shell variable's value in the session.
func (s *Session) Value(ctx context.Context, name string) (string, error) {
	r, err := s.Run(ctx, `printf %s "$`+name+`"`, 10*time.Second)
	return r.Stdout, err
}

// Pid is bash's process id.
func (s *Session) Pid() int { return s.cmd.Process.Pid }

// Close ends bash (killing a command still running) and waits for it.
func (s *Session) Close() {
	_ = s.stdin.Close()
	select {
	case <-s.exit:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
}
