package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestVersionAndBuildInfo: the stamped version is what --version prints
// and what /metrics reports as kubernetes_build_info, read with a token the
// controller authorizes through the API server.
func TestVersionAndBuildInfo(t *testing.T) {
	// stdout only: a race-enabled build logs a line to stderr first.
	out, err := exec.Command(suite.ccmBinary, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "azlb-controller-manager " + e2eVersion + " ("; !strings.HasPrefix(string(out), want) {
		t.Errorf("--version printed %q, want it to start with %q", out, want)
	}

	c := startController(t, "a", writeConfig(t, nil), false)
	rc, err := suite.kube.RestConfig()
	if err != nil {
		t.Fatal(err)
	}
	// The controller serves a self-signed certificate it made at start.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	want := `git_version="` + e2eVersion + `"`
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:"+strconv.Itoa(c.port)+"/metrics", nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+rc.BearerToken)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return false, nil
		}
		last = resp.Status
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "kubernetes_build_info{") && strings.Contains(line, want) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("/metrics never reported kubernetes_build_info with %s (last: %s): %v", want, last, err)
	}
}
