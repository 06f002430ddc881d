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
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/testutil"
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
	ks        *testutil.KubeSuite
}

func TestMain(m *testing.M) {
	suite.root = testutil.RepoRoot()
	throttled := false
	code := testutil.RunSuite(m, "e2e", "AZLB_E2E_KEEP", setup, func() {
		// The suite's emulator throttles as Azure does (its default
		// limits): the tests stay within them, or a test's wait on
		// Retry-After would make the suite slow and its timing depend on
		// the machine.
		if suite.env != nil {
			if n := suite.env.Emulator().Throttled(); n > 0 {
				fmt.Fprintf(os.Stderr, "e2e: the suite's emulator answered %d requests 429 under Azure's limits (docs/emulator.md, Throttling); a test that means to be throttled starts an emulator of its own with its limits\n", n)
				throttled = true
			}
		}
		suite.ks.Close()
	})
	if throttled && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// e2eVersion is the version the suite stamps into the controller.
const e2eVersion = "v0.0.0-e2e"

func setup(work string) error {
	suite.work = work
	suite.ccmBinary = filepath.Join(work, "azlb-controller-manager")
	// Stamped as make build stamps it, with a version the tests look for.
	args := []string{"-ldflags", "-X k8s.io/component-base/version.gitVersion=" + e2eVersion}
	if os.Getenv("AZLB_E2E_RACE") != "" {
		args = append(args, "-race") // make test-e2e runs the controller with the race detector
	}
	if err := testutil.GoBuild(suite.ccmBinary, "./cmd/azlb-controller-manager", args...); err != nil {
		return err
	}
	// The chart is rendered with its defaults.
	// The emulator's limits are Azure's (Throttle's zero value): the
	// controller binary runs as it would against a subscription.
	ks, err := testutil.StartKubeSuite(context.Background(), testutil.KubeSuiteOptions{Work: work, Registry: "e2e.invalid",
		Emulator: emulator.Options{Throttle: emulator.Throttle{Mode: emulator.ThrottleAzure}}})
	suite.ks = ks
	suite.env, suite.kube, suite.cs, suite.chartArgs = ks.Env, ks.Kube, ks.Client, ks.ChartArgs
	return err
}
