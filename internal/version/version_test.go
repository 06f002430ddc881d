package version

import (
	"runtime"
	"strings"
	"testing"

	"k8s.io/component-base/version"
)

func TestStringNamesProgramVersionAndPlatform(t *testing.T) {
	got := String("azlb-emulator")
	want := "azlb-emulator " + version.Get().GitVersion + " ("
	if !strings.HasPrefix(got, want) {
		t.Fatalf("String = %q, want prefix %q", got, want)
	}
	// An unstamped test binary has no commit: it says so instead of
	// printing the placeholder.
	if strings.Contains(got, "commit $Format") || !strings.Contains(got, "commit unknown") {
		t.Errorf("String = %q, want the placeholder commit reported as unknown", got)
	}
	if !strings.HasSuffix(got, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+")") {
		t.Errorf("String = %q, want it to end with the Go version and platform", got)
	}
}
