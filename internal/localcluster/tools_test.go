package localcluster

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/azlb/azlb/internal/testutil"
)

// TestToolModulesAgree: e2e.test and agnhost (hack/tools/e2e) are built
// from the Kubernetes the cluster's binaries are (hack/tools/kubernetes):
// the same k8s.io/kubernetes and the same replace directives.
func TestToolModulesAgree(t *testing.T) {
	read := func(m string) string {
		b, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "hack", "tools", m, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	k8s, e2e := read("kubernetes"), read("e2e")
	replace := regexp.MustCompile(`(?s)\nreplace \(\n.*?\n\)\n`)
	require := regexp.MustCompile(`\n\s*(?:require )?k8s\.io/kubernetes (v\S+)\n`)
	if a, b := replace.FindString(k8s), replace.FindString(e2e); a == "" || a != b {
		t.Errorf("replace directives differ:\nhack/tools/kubernetes:%s\nhack/tools/e2e:%s", a, b)
	}
	if a, b := require.FindStringSubmatch(k8s), require.FindStringSubmatch(e2e); a == nil || b == nil || a[1] != b[1] || a[1] != "v1.37.1" {
		t.Errorf("k8s.io/kubernetes: %v in hack/tools/kubernetes, %v in hack/tools/e2e; want v1.37.1 in both", a, b)
	}
}
