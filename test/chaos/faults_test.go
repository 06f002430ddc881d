package chaos

import (
	"fmt"
	"net/http"
	"strings"
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
// read can get, writes all of them. The faults match by method only (no
// path): every ARM path is a target alike, the network security group's
// GETs and PUTs (networkSecurityGroups, written for every LoadBalancer
// Service) as much as load balancers, pools and public IPs, and
// TestFaultMix checks that they were hit (nsgTally).
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

// armTarget names the ARM resource type a request path addresses: the
// resource types after the provider namespace, joined with '/'
// ("loadBalancers", "networkSecurityGroups",
// "loadBalancers/backendAddressPools", "locations/operations").
func armTarget(path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := len(segs) - 2; i >= 0; i-- {
		if strings.EqualFold(segs[i], "providers") {
			var types []string
			for j := i + 2; j < len(segs); j += 2 {
				types = append(types, segs[j])
			}
			return strings.Join(types, "/")
		}
	}
	if len(segs) >= 4 && strings.EqualFold(segs[2], "resourceGroups") {
		return "resourceGroups"
	}
	return "other"
}

// targetCalls are one resource type's ARM calls under faults.
type targetCalls struct {
	Calls   int `json:"calls"`
	Faulted int `json:"faulted"`
	// Answers counts the faulted calls by method and answer
	// ("PUT 409"; status 0: the connection was reset; a 2xx write whose
	// operation ended Failed shows as its status).
	Answers map[string]int `json:"faultedByAnswer,omitempty"`
}

// armTargets counts the ARM calls in [from, to) by resource type and
// method ("networkSecurityGroups PUT").
func armTargets(from, to time.Time) map[string]*targetCalls {
	out := map[string]*targetCalls{}
	for _, rec := range suite.env.Emulator().Requests() {
		if rec.Kind != "arm" || rec.Time.Before(from) || !rec.Time.Before(to) {
			continue
		}
		key := armTarget(rec.Path) + " " + rec.Method
		tc := out[key]
		if tc == nil {
			tc = &targetCalls{Answers: map[string]int{}}
			out[key] = tc
		}
		tc.Calls++
		if rec.Faulted {
			tc.Faulted++
			tc.Answers[fmt.Sprintf("%s %d", rec.Method, rec.Status)]++
		}
	}
	return out
}

// nsgTally adds up, over a run's seeds, the network security group's
// calls under faults, its calls from the churn's start until the cluster
// was clean again, and the churn events that call for NSG writes.
type nsgTally struct {
	calls, faulted map[string]int // by method, while the faults were on
	reached        map[string]int // by method, from the churn's start until clean
	changes        int            // Services created and access changes
}

// add counts one seed: underFaults covers the churn and the fault tail,
// untilClean the churn until verify came clean. A write the faults held
// back until they stopped still shows that the churn reached the NSG.
func (n *nsgTally) add(underFaults, untilClean map[string]*targetCalls, w *world) {
	if n.calls == nil {
		n.calls, n.faulted, n.reached = map[string]int{}, map[string]int{}, map[string]int{}
	}
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		if tc := underFaults["networkSecurityGroups "+method]; tc != nil {
			n.calls[method] += tc.Calls
			n.faulted[method] += tc.Faulted
		}
		if tc := untilClean["networkSecurityGroups "+method]; tc != nil {
			n.reached[method] += tc.Calls
		}
	}
	n.changes += w.counts[evSvcCreate] + w.counts[evAccess]
}

// nsgFaultFloor is how many NSG calls of one method make it certain enough
// that the mix hit some (at 20%, none in 60 calls has a probability of
// 1.5e-6). A short run makes fewer (the writer puts the changes made at
// the same time into one PUT); the full run makes several hundred.
const nsgFaultFloor = 60

// check fails the test unless the churn made the controller read and
// write the network security group, and the mix faulted the calls made
// while it was on as it faults every ARM call. (The PUTs may all come
// after the faults stop: three faulted GETs with their back-off can fill
// a short run's fault window.)
func (n *nsgTally) check(t *testing.T) {
	t.Helper()
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		switch {
		case n.changes > 0 && n.reached[method] == 0:
			t.Errorf("no network security group %s from the churn's start until clean, after %d Service creations and access changes: the churn did not reach the NSG",
				method, n.changes)
		case n.calls[method] >= nsgFaultFloor && n.faulted[method] == 0:
			t.Errorf("none of %d network security group %ss was faulted: the NSG is not among the fault mix's targets", n.calls[method], method)
		}
	}
}
