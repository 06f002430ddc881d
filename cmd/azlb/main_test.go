package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/azlb/azlb/internal/devenv"
	"github.com/azlb/azlb/internal/testutil"
)

// `azlb sandbox restart` with a controller that dies at once on a bad
// azure.json exits 1 with the controller's last log entry, and does not
// say "restarted" (the audit's reproduction: it printed "restarted" and
// exited 0).
func TestSandboxRestartFailsWhenTheControllerDies(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The controller as it dies on an invalid azure.json: a klog fatal
	// line continued by the list of invalid fields, exit 255.
	ctl := filepath.Join(dir, "azlb-controller-manager")
	script := "#!/bin/sh\n" +
		"echo 'I1127 00:11:50.700000    2316 flags.go:64] FLAG: --v=\"2\"'\n" +
		"echo 'F1127 00:11:50.746674    2316 main.go:87] Cloud provider could not be initialized: could not init cloud provider \"azure\": cloud provider azure: subscriptionId: required'\n" +
		"echo 'loadBalancerSku: must be one of basic, standard, service; got \"nope\"'\n" +
		"exit 255\n"
	if err := os.WriteFile(ctl, []byte(script), 0o755); err != nil { //nolint:gosec // an executable stand-in
		t.Fatal(err)
	}
	port, err := testutil.FreeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"bin": ctl, "args": []string{"--cloud-config", filepath.Join(dir, "azure.json"), "--secure-port", strconv.Itoa(port)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "controller.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devenv.StopPIDFile(filepath.Join(dir, "azlb-controller-manager.pid")) })

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"sandbox", "restart", "--dir", dir, "--timeout", "30s"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	if strings.Contains(stdout.String(), "restarted") {
		t.Errorf("stdout says restarted: %s", stdout.String())
	}
	for _, want := range []string{"exited before serving /healthz", "main.go:87] Cloud provider could not be initialized", `loadBalancerSku: must be one of basic, standard, service; got "nope"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "FLAG: --v") {
		t.Errorf("stderr has more than the last log entry:\n%s", stderr.String())
	}
}
