package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// RepoRoot is the repository's top directory (from this file's place).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// RunSuite is the body of a process-level suite's TestMain (test/e2e,
// test/chaos): it makes a work directory (removed afterwards unless the
// environment variable keepVar is set), runs setup in it, then the tests,
// then teardown (also when setup fails), and returns the exit code.
func RunSuite(m *testing.M, name, keepVar string, setup func(work string) error, teardown func()) int {
	work, err := os.MkdirTemp("", "azlb-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv(keepVar) == "" {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, name+": keeping", work)
	}
	if err := setup(work); err != nil {
		fmt.Fprintln(os.Stderr, name+" setup:", err)
		teardown()
		return 1
	}
	code := m.Run()
	teardown()
	return code
}

// GoBuild runs `go build -o out args... pkg` in the repository root.
func GoBuild(out, pkg string, args ...string) error {
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, args...), pkg)...)
	cmd.Dir = RepoRoot()
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// KubeSuite is what a process-level suite runs the controller against: the
// ARM emulator, a real kube-apiserver with etcd (binaries from bin/), a
// client, and the container arguments of the Helm chart's Deployment with
// the chart's identities (ServiceAccounts, RBAC) applied.
type KubeSuite struct {
	Env       *devenv.Env
	Kube      *devenv.Kube
	Client    kubernetes.Interface
	ChartArgs []string
}

// KubeSuiteOptions configure StartKubeSuite.
type KubeSuiteOptions struct {
	Work     string           // the suite's work directory
	Emulator emulator.Options // the emulator's options
	// Registry is the chart's image.registry (never pulled from).
	Registry string
	// QPS and Burst of the suite's client; 0: client-go's defaults.
	QPS   float32
	Burst int
}

// StartKubeSuite starts the emulator and the API server in o.Work and
// applies the chart. On error, what started is still returned for Close.
func StartKubeSuite(ctx context.Context, o KubeSuiteOptions) (*KubeSuite, error) {
	s := &KubeSuite{}
	env, err := devenv.Start(ctx, o.Work, o.Emulator, nil)
	if err != nil {
		return s, err
	}
	s.Env = env
	logs, err := os.Create(filepath.Join(o.Work, "kube.log"))
	if err != nil {
		return s, err
	}
	root := RepoRoot()
	kube, err := devenv.StartKube(ctx, filepath.Join(o.Work, "kube"), devenv.KubeOptions{BinDir: filepath.Join(root, "bin"), Logs: logs})
	if err != nil {
		return s, err
	}
	s.Kube = kube
	rc, err := kube.RestConfig()
	if err != nil {
		return s, err
	}
	if o.QPS > 0 {
		rc.QPS, rc.Burst = o.QPS, o.Burst
	}
	if s.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return s, err
	}
	s.ChartArgs, err = devenv.ApplyChartIdentities(ctx, s.Client, filepath.Join(root, "bin"),
		filepath.Join(root, "deploy", "helm", "azlb"), "--set", "image.registry="+o.Registry)
	return s, err
}

// Close stops the API server and the emulator. Safe on a nil or partly
// started suite.
func (s *KubeSuite) Close() {
	if s == nil {
		return
	}
	if s.Kube != nil {
		s.Kube.Stop()
	}
	if s.Env != nil {
		_ = s.Env.Close()
	}
}

// FreeLoopbackPort returns a TCP port free on 127.0.0.1 right now.
func FreeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}

// CheckControllerLog fails the test for every data race in azlb code and
// every RBAC refusal in a controller process's log.
func CheckControllerLog(t testing.TB, name, log string) {
	t.Helper()
	for _, race := range OurRaces(log) {
		t.Errorf("%s hit a data race in azlb code:\n%s", name, race)
	}
	for _, line := range Forbidden(log) {
		t.Errorf("%s was refused by RBAC (deploy/helm/azlb/files/identities.yaml lacks a rule):\n%s", name, line)
	}
}
