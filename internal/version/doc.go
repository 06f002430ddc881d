// Package version says which build of azlb is running. The Makefile stamps
// k8s.io/component-base/version at link time (-ldflags -X, see VERSION and
// LDFLAGS there); that one stamp feeds the binaries' --version output
// (String) and the kubernetes_build_info metric the controller manager
// serves on /metrics. An unstamped build (go build, go test) reports
// component-base's placeholder version.
package version
