package chaos

import (
	"net/http"
	"testing"
	"time"

	"github.com/azlb/azlb/internal/emulator"
)

// A fault kind of the mix and its weight per method.
type faultKind struct {
	name  string
	fault emulator.Fault
	// weights per HTTP method; a method without one never gets the kind.
	weights map[string]int
}

// The mix. Every ARM request of the matching method fails with the kind's
// answer at the weight's share of the total rate; reads get the kinds a
// read can get, writes all of them.
var faultKinds = []faultKind{
	{"429-retry-after", emulator.Fault{Status: http.StatusTooManyRequests, Code: "SubscriptionRequestsThrottled", RetryAfter: "1"},
		map[string]int{"GET": 6, "PUT": 4, "DELETE": 4}},
	{"409-another-operation", emulator.Fault{Status: http.StatusConflict, Code: "AnotherOperationInProgress",
		Message: "Another operation on this or dependent resource is in progress."},
		map[string]int{"PUT": 4, "DELETE": 4}},
	{"412-precondition", emulator.Fault{Status: http.StatusPreconditionFailed, Code: "PreconditionFailed"},
		map[string]int{"PUT": 3}},
	{"500-internal", emulator.Fault{Status: http.StatusInternalServerError, Code: "InternalServerError"},
		map[string]int{"GET": 3, "PUT": 2, "DELETE": 2}},
	{"503-unavailable", emulator.Fault{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailable", RetryAfter: "1"},
		map[string]int{"GET": 2, "PUT": 1, "DELETE": 1}},
	{"connection-reset", emulator.Fault{ResetConnection: true},
		map[string]int{"GET": 4, "PUT": 2, "DELETE": 2}},
	// ARM's answer when the resource provider does not answer in time.
	{"timeout-504", emulator.Fault{Status: http.StatusGatewayTimeout, Code: "GatewayTimeout", Latency: 2 * time.Second},
		map[string]int{"GET": 5, "PUT": 2, "DELETE": 2}},
	{"lro-failed", emulator.Fault{LROResult: "Failed"},
		map[string]int{"PUT": 2, "DELETE": 2}},
}

// faultMix is an installed mix.
type faultMix struct {
	kinds map[string]string // fault id -> kind
}

// installFaults makes rate of every ARM GET, PUT and DELETE fail, split
// over the kinds by weight. The emulator tries faults in order, each with
// its own draw, so each gets the probability that leaves the wanted share
// to it: p_i = rate*w_i/W / (1 - rate*(w_1+...+w_{i-1})/W).
func installFaults(t *testing.T, rate float64) *faultMix {
	t.Helper()
	emu := suite.env.Emulator()
	m := &faultMix{kinds: map[string]string{}}
	for _, method := range []string{"GET", "PUT", "DELETE"} {
		total := 0
		for _, k := range faultKinds {
			total += k.weights[method]
		}
		used := 0.0
		for _, k := range faultKinds {
			w := k.weights[method]
			if w == 0 {
				continue
			}
			share := rate * float64(w) / float64(total)
			f := k.fault
			f.Method = method
			f.Probability = share / (1 - used)
			used += share
			id, err := emu.AddFault(f)
			if err != nil {
				t.Fatalf("fault %s %s: %v", k.name, method, err)
			}
			m.kinds[id] = k.name
		}
	}
	return m
}

// stop removes the faults and returns how often each kind fired.
func (m *faultMix) stop() map[string]int {
	emu := suite.env.Emulator()
	out := map[string]int{}
	for _, f := range emu.Faults() {
		out[m.kinds[f.ID]] += f.Fired
	}
	emu.ClearFaults()
	return out
}
