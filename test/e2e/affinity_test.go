package e2e

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/azlb/azlb/internal/testutil"
)

// TestSessionAffinityClientIP: sessionAffinity ClientIP keeps a client on
// one node. A TCP Service with ClientIP over three ready nodes, and a
// control without: one client (one source address, a new source port per
// connection) opens 100 connections to each. Every answer of the ClientIP
// Service names the same node (its rules distribute by SourceIP, which the
// data plane hashes without ports); the control's answers name more than one
// (Default hashes the 5-tuple, so the source port spreads them).
func TestSessionAffinityClientIP(t *testing.T) {
	c := startDataPlaneCluster(t, "aff", 3)
	client := netip.MustParseAddr("127.0.0.1") // the Internet, which azlb's rules admit
	tcpService := func(name string, affinity v1.ServiceAffinity) netip.AddrPort {
		t.Helper()
		svc := loadBalancerService(c.ns, name, int32(testutil.FreePort(t, testutil.Nth(c.public, 1))))
		svc.Spec.SessionAffinity = affinity
		return c.frontend(t, c.createService(t, svc, c.nodes...))
	}
	sticky, spread := tcpService("sticky", v1.ServiceAffinityClientIP), tcpService("spread", v1.ServiceAffinityNone)
	for _, fe := range []netip.AddrPort{sticky, spread} {
		c.waitAllEligible(t, fe) // no member joins later and takes the client over
	}

	got := c.tcpAnswers(t, client, sticky, 100)
	if len(got) != 1 {
		t.Errorf("ClientIP: one client's 100 connections answered by %v, want one node", got)
	}
	got = c.tcpAnswers(t, client, spread, 100)
	if len(got) < 2 {
		t.Errorf("None: one client's 100 connections answered by %v, want more than one node", got)
	}
	for fe, want := range map[netip.AddrPort]string{sticky: "SourceIP", spread: "Default"} {
		st, _ := c.env.Emulator().DataPlaneStatus()
		for _, r := range st.Rules {
			if r.Frontend == fe.String() && r.Distribution != want {
				t.Errorf("rule on %s: loadDistribution %s, want %s", fe, r.Distribution, want)
			}
		}
	}
}

// waitAllEligible waits until the rules on fe are served and every member
// may take new flows (probed up).
func (c *dataPlaneCluster) waitAllEligible(t *testing.T, fe netip.AddrPort) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		st, _ := c.env.Emulator().DataPlaneStatus()
		rules := 0
		for _, r := range st.Rules {
			if r.Frontend != fe.String() {
				continue
			}
			rules++
			if !r.Served || len(r.Members) != len(c.nodes) {
				return false, nil
			}
			for _, m := range r.Members {
				if !m.Eligible {
					return false, nil
				}
			}
		}
		return rules > 0, nil
	})
	if err != nil {
		t.Fatalf("every node eligible on %s: %v; data plane: %s", fe, err, c.ruleStatus(fe))
	}
}

// tcpAnswers opens n new connections from src to fe (GET /, each from a
// new source port) and counts the nodes that answered. Every connection
// must be answered by a node of the cluster.
func (c *dataPlaneCluster) tcpAnswers(t *testing.T, src netip.Addr, fe netip.AddrPort, n int) map[string]int {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, last = testutil.HelloFrom(src, fe, 2*time.Second)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("no answer from %s in 60s: %v; data plane: %s", fe, last, c.ruleStatus(fe))
	}
	seen := map[string]int{}
	for i := range n {
		name, err := testutil.HelloFrom(src, fe, 2*time.Second)
		if err != nil {
			t.Fatalf("connection %d to %s: %v; data plane: %s", i, fe, err, c.ruleStatus(fe))
		}
		if !slices.Contains(c.nodes, name) {
			t.Fatalf("connection %d to %s answered by %q, not a node of the cluster", i, fe, name)
		}
		seen[name]++
	}
	t.Logf("%d connections from %s to %s: %v", n, src, fe, seen)
	return seen
}
