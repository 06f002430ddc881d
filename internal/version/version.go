package version

import (
	"fmt"

	"k8s.io/component-base/version"
)

// String is the --version line of program: its version, commit, tree state,
// build date and Go platform.
func String(program string) string {
	v := version.Get()
	commit := v.GitCommit
	if commit == "" || commit == "$Format:%H$" {
		commit = "unknown"
	}
	tree := v.GitTreeState
	if tree == "" {
		tree = "unknown"
	}
	return fmt.Sprintf("%s %s (commit %s, tree %s, built %s, %s %s)", program, v.GitVersion, commit, tree, v.BuildDate, v.GoVersion, v.Platform)
}
