package testutil

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/azlb/azlb/internal/emulator"
)

type throttleCount struct{ n atomic.Int64 }

func (c *throttleCount) Throttled() int64 { return c.n.Load() }

// recordingTB is a testing.TB whose Errorf and Cleanup are recorded.
type recordingTB struct {
	testing.TB
	errs     []string
	cleanups []func()
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestNotThrottled: a test that keeps the emulator's default limits fails
// when a request of its own was answered 429; one that chose its limits
// does not; 429s before the test started are not its.
func TestNotThrottled(t *testing.T) {
	for _, c := range []struct {
		name    string
		eo      emulator.Options
		before  int64
		during  int64
		wantErr bool
	}{
		{"default, within", emulator.Options{}, 3, 0, false},
		{"default, throttled", emulator.Options{}, 3, 2, true},
		{"unlimited chosen", emulator.Options{Throttle: emulator.NoThrottle}, 0, 0, false},
		{"Azure's chosen", emulator.Options{Throttle: emulator.Throttle{Mode: emulator.ThrottleAzure}}, 0, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cnt throttleCount
			cnt.n.Store(c.before)
			r := &recordingTB{TB: t}
			NotThrottled(r, &cnt, c.eo)
			cnt.n.Add(c.during)
			r.end()
			if got := len(r.errs) > 0; got != c.wantErr {
				t.Fatalf("errors %q, want an error: %v", r.errs, c.wantErr)
			}
			if c.wantErr && !strings.Contains(r.errs[0], "answered 2 requests 429") {
				t.Fatalf("error %q does not say how many", r.errs[0])
			}
		})
	}
}
