package verify

import (
	"os/exec"
	"strings"
	"testing"
)

// The judge must not share the reconcile's code (see doc.go): none of the
// packages that implement the behaviour it checks may be among its
// dependencies.
func TestVerifyDoesNotImportTheReconcile(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{"provider", "lbstore", "backendpool", "placement", "localservice", "adminstate", "nicpool",
		"servicegateway", "compute", "status", "securitygroup", "accesscontrol"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == "github.com/azlb/azlb/internal/"+f {
				t.Errorf("internal/verify depends on %s, which implements behaviour it judges", dep)
			}
		}
	}
}
