// Package cputime reports the CPU time (user and system, every thread of
// the process, so the garbage collector's too) a benchmark spends per
// operation. On a shared machine a benchmark's wall time per operation
// grows with the other processes' load; its CPU time barely moves, which
// makes before/after comparisons of code changes meaningful there. It is
// imported by benchmarks only.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Timer is the process's CPU time when it was started.
type Timer struct{ start time.Duration }

// Start reads the process's CPU time.
func Start() Timer { return Timer{start: used()} }

// Report adds the CPU time since Start, per operation, to b's results as
// "cpu-ns/op". Call it right after the measured loop (b.Loop runs the
// benchmark function once, so Start before the loop and Report after it
// cover exactly the measured operations and their garbage collection).
func (t Timer) Report(b *testing.B) {
	b.Helper()
	if b.N > 0 {
		b.ReportMetric(float64(t.Elapsed())/float64(b.N), "cpu-ns/op")
	}
}

// Elapsed is the process's CPU time since Start.
func (t Timer) Elapsed() time.Duration { return used() - t.start }

func used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
