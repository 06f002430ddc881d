// Package e2e runs the real azlb-controller-manager binary against a real
// kube-apiserver v1.37.1 + etcd on loopback and the ARM emulator, and checks
// the outcome through the Kubernetes API and the emulator's state.
//
// The controller runs as the Helm chart deploys it: the suite renders
// deploy/helm/azlb with helm, applies its ServiceAccounts and RBAC, and
// starts the binary with the container arguments of the rendered
// Deployment (--use-service-account-credentials among them), so every
// controller calls the API server as its own identity with exactly the
// chart's rules; a missing rule fails the suite.
//
// Run it with `make test-e2e` (it builds the binaries first).
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
)

// suite is the shared control plane and emulator.
var suite struct {
	root, work string
	ccmBinary  string
	// chartArgs are the controller's arguments in the chart's Deployment.
	chartArgs []string
	env       *devenv.Env
	kube      *devenv.Kube
	cs        kubernetes.Interface
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	suite.root = filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	work, err := os.MkdirTemp("", "azlb-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("AZLB_E2E_KEEP") == "" {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "e2e: keeping", work)
	}
	suite.work = work
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		teardown()
		return 1
	}
	code := m.Run()
	teardown()
	return code
}

// e2eVersion is the version the suite stamps into the controller.
const e2eVersion = "v0.0.0-e2e"

func setup() error {
	ctx := context.Background()
	suite.ccmBinary = filepath.Join(suite.work, "azlb-controller-manager")
	// Stamped as make build stamps it, with a version the tests look for.
	args := []string{"build", "-o", suite.ccmBinary, "-ldflags", "-X k8s.io/component-base/version.gitVersion=" + e2eVersion}
	if os.Getenv("AZLB_E2E_RACE") != "" {
		args = append(args, "-race") // make test-e2e runs the controller with the race detector
	}
	build := exec.Command("go", append(args, "./cmd/azlb-controller-manager")...)
	build.Dir = suite.root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build controller: %w", err)
	}
	env, err := devenv.Start(ctx, suite.work, emulator.Options{}, nil)
	if err != nil {
		return err
	}
	suite.env = env
	logs, err := os.Create(filepath.Join(suite.work, "kube.log"))
	if err != nil {
		return err
	}
	kube, err := devenv.StartKube(ctx, filepath.Join(suite.work, "kube"), devenv.KubeOptions{BinDir: filepath.Join(suite.root, "bin"), Logs: logs})
	if err != nil {
		return err
	}
	suite.kube = kube
	rc, err := kube.RestConfig()
	if err != nil {
		return err
	}
	suite.cs = kubernetes.NewForConfigOrDie(rc)
	return applyChart(ctx)
}

// applyChart renders the chart with its defaults, applies its identities
// and keeps its Deployment's container arguments.
func applyChart(ctx context.Context) error {
	args, err := devenv.ApplyChartIdentities(ctx, suite.cs, filepath.Join(suite.root, "bin"), filepath.Join(suite.root, "deploy", "helm", "azlb"),
		"--set", "image.registry=e2e.invalid")
	suite.chartArgs = args
	return err
}

func teardown() {
	if suite.kube != nil {
		suite.kube.Stop()
	}
	if suite.env != nil {
		_ = suite.env.Close()
	}
}
