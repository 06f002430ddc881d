package emulator

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

func TestTokenBucket(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newTokenBucket(1000, 5*time.Minute, now)
	for i := 0; i < 1000; i++ {
		if ok, _ := b.take(now); !ok {
			t.Fatalf("token %d refused", i)
		}
	}
	ok, retry := b.take(now)
	if ok || retry != 1 {
		t.Fatalf("exhausted bucket: ok=%v retry=%d (0.3s per token rounds up to 1)", ok, retry)
	}
	if b.remaining(now) != 0 {
		t.Fatal("remaining should be 0")
	}
	now = now.Add(3 * time.Second) // 10 tokens
	if got := b.remaining(now); got != 10 {
		t.Fatalf("refilled %d, want 10", got)
	}
	now = now.Add(time.Hour)
	if got := b.remaining(now); got != 1000 {
		t.Fatalf("refill capped at %d, want 1000", got)
	}
	slow := newTokenBucket(2, time.Minute, now)
	slow.take(now)
	slow.take(now)
	if _, retry := slow.take(now); retry != 30 {
		t.Fatalf("retry %d, want 30", retry)
	}
}

func TestAddressAllocation(t *testing.T) {
	p := newPublicIPs(netip.MustParsePrefix("20.40.0.0/29"), netip.MustParsePrefix("2603:1030:40::/120"))
	var got []string
	for {
		a, ok := p.v4.alloc()
		if !ok {
			break
		}
		got = append(got, a.String())
	}
	// .0 (network) and .7 (broadcast) are never handed out.
	if len(got) != 6 || got[0] != "20.40.0.1" || got[5] != "20.40.0.6" {
		t.Fatalf("allocated %v", got)
	}
	p.v4.release(netip.MustParseAddr("20.40.0.3"))
	if a, ok := p.v4.alloc(); !ok || a.String() != "20.40.0.3" {
		t.Fatalf("released address not reused: %v %v", a, ok)
	}
	q := newPublicIPs(netip.MustParsePrefix("20.40.0.0/24"), netip.MustParsePrefix("2603:1030:40::/120"))
	b1, ok := q.v4.allocPrefix(30)
	if !ok || b1.String() != "20.40.0.252/30" {
		t.Fatalf("first /30: %v", b1)
	}
	b2, _ := q.v4.allocPrefix(28)
	if b2.String() != "20.40.0.224/28" {
		t.Fatalf("first /28 after a /30: %v", b2)
	}
	if a, _ := q.v4.allocIn(b1); a.String() != "20.40.0.252" {
		t.Fatalf("address in prefix: %v", a)
	}
	for i := 0; i < 200; i++ {
		a, ok := q.v4.alloc()
		if ok && (b1.Contains(a) || b2.Contains(a)) {
			t.Fatalf("single allocation %v inside a reserved prefix", a)
		}
	}
	if a, ok := q.v6.alloc(); !ok || a.String() != "2603:1030:40::1" {
		t.Fatalf("v6: %v", a)
	}
	sp := netip.MustParsePrefix("10.0.0.0/29")
	used := map[netip.Addr]bool{netip.MustParseAddr("10.0.0.4"): true}
	if a, ok := privateAlloc(sp, used); !ok || a.String() != "10.0.0.5" {
		t.Fatalf("private: %v", a)
	}
	used[netip.MustParseAddr("10.0.0.5")] = true
	used[netip.MustParseAddr("10.0.0.6")] = true
	if _, ok := privateAlloc(sp, used); ok {
		t.Fatal("a full subnet allocated an address")
	}
}

func TestOperationEvictionKeepsRecentAndRunning(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &subscription{ops: map[string]*operation{}}
	running := &operation{id: "running", start: now, end: now.Add(time.Hour)}
	s.addOp(running, now)
	for i := 0; i < maxOps+10; i++ {
		s.addOp(&operation{id: fmt.Sprintf("op-%d", i), start: now, end: now}, now)
	}
	if len(s.ops) > maxOps {
		t.Fatalf("%d operations kept, bound %d", len(s.ops), maxOps)
	}
	if s.ops["running"] == nil {
		t.Fatal("an operation still running was evicted")
	}
	if s.ops[fmt.Sprintf("op-%d", maxOps+9)] == nil || s.ops["op-0"] != nil {
		t.Fatal("eviction did not drop the oldest completed operations first")
	}
	if len(s.opOrder) != len(s.ops) {
		t.Fatalf("order has %d entries for %d operations", len(s.opOrder), len(s.ops))
	}
}
