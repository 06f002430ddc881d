package testutil

import "strings"

// Forbidden returns the log lines of requests the API server's RBAC
// refused: the chart's identities must grant everything the controllers do.
func Forbidden(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "is forbidden: User \"system:serviceaccount:") {
			out = append(out, line)
		}
	}
	return out
}

// OurRaces returns the race detector reports in a log whose stacks touch
// azlb's own code. Reports entirely inside dependencies are logged by the
// race detector too; k8s.io/cloud-provider v0.37.1's service controller has
// one (serviceCache.allServices reads a cached Service while a sync writes
// it) that azlb cannot fix and that must not fail azlb's suites.
func OurRaces(log string) []string {
	var out []string
	const start, end = "WARNING: DATA RACE", "=================="
	for {
		i := strings.Index(log, start)
		if i < 0 {
			return out
		}
		log = log[i:]
		j := strings.Index(log, end)
		if j < 0 {
			j = len(log)
		}
		report := log[:j]
		if strings.Contains(report, "github.com/azlb/azlb/") {
			out = append(out, report)
		}
		log = log[j:]
		if len(log) > 0 {
			log = log[1:]
		}
	}
}
