package lbstore_test

import (
	"context"
	"testing"

	"github.com/azlb/azlb/internal/lbstore"
	"github.com/azlb/azlb/internal/testutil"
)

// warm reads every managed load balancer into the store's cache (what the
// admin-state path does before it writes: PoolsWith).
func warm(t *testing.T, s *lbstore.Store) {
	t.Helper()
	if _, err := s.PoolsWith(context.Background(), []string{"10.0.0.1"}, lbstore.FromAzure); err != nil {
		t.Fatal(err)
	}
}

func fromCache() lbstore.PoolOptions { return lbstore.PoolOptions{WriteFromCache: true} }

// warmStore is a store over the two seeded pools with its cache warm.
func warmStore(t *testing.T) (*testutil.FakeARM, *lbstore.Store) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	warm(t, s)
	return f, s
}

func bothDown() []lbstore.PoolEdit {
	return []lbstore.PoolEdit{
		edit(lbName, "kubernetes", setState("10.0.0.1", down)),
		edit(lbName, "kubernetes-IPv6", setState("fd00::1", down)),
	}
}

// Two pools of one load balancer are written from the cached copy without a
// read, one after another, each with If-Match: the cached etag, then the
// one the first write returned. The cache stays coherent: the next write
// from it carries the current etag.
func TestWriteFromCacheChainsIfMatchWithoutReads(t *testing.T) {
	f, s := warmStore(t)
	before := *f.LB(lbName).Etag
	f.ResetCalls()
	res := s.UpdatePools(context.Background(), "t", bothDown(), fromCache())
	for _, r := range res {
		if r.Err != nil || !r.Written || r.Pool == nil {
			t.Fatalf("result %+v", r)
		}
	}
	puts := callsOf(f, "pool.put")
	if len(f.Calls()) != 2 || len(puts) != 2 {
		t.Fatalf("calls %v, want two PUTs and nothing else", f.Calls())
	}
	if puts[0].IfMatch != before || puts[1].IfMatch == "" || puts[1].IfMatch == before {
		t.Errorf("If-Match %q then %q, want %q then the etag the first PUT returned", puts[0].IfMatch, puts[1].IfMatch, before)
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.1") != down || f.AdminState(lbName, "kubernetes-IPv6", "fd00::1") != down ||
		f.AdminState(lbName, "kubernetes", "10.0.0.2") != "None" {
		t.Error("exactly the edited entries are Down")
	}

	cur := *f.LB(lbName).Etag
	f.ResetCalls()
	res = s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", setState("10.0.0.2", down))}, fromCache())
	if r := res[0]; r.Err != nil || !r.Written {
		t.Fatalf("result %+v", r)
	}
	if puts := callsOf(f, "pool.put"); len(f.Calls()) != 1 || puts[0].IfMatch != cur {
		t.Errorf("calls %v, want one PUT with the current etag (no 412, no read)", f.Calls())
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.1") != down || f.AdminState(lbName, "kubernetes", "10.0.0.2") != down {
		t.Error("the second write from the cache kept the first one's entry")
	}
}

// A change made behind the store's back after its read (here: another
// writer adds an entry) makes the first write from the cache fail with 412;
// no write is sent from the stale copy after it, and both pools are read
// afresh and written with If-Match, keeping the other writer's entry.
func TestWriteFromCacheStaleCopyIsReadAgain(t *testing.T) {
	f, s := warmStore(t)
	stale := *f.LB(lbName).Etag
	f.SeedPool(lbName, "kubernetes", testutil.Entry{Name: "n1", IP: "10.0.0.1"}, testutil.Entry{Name: "n2", IP: "10.0.0.2"},
		testutil.Entry{Name: "n3", IP: "10.0.0.3"})
	f.ResetCalls()
	res := s.UpdatePools(context.Background(), "t", bothDown(), fromCache())
	for _, r := range res {
		if r.Err != nil || !r.Written {
			t.Fatalf("result %+v", r)
		}
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.3") != "None" || f.AdminState(lbName, "kubernetes", "10.0.0.1") != down ||
		f.AdminState(lbName, "kubernetes-IPv6", "fd00::1") != down {
		t.Error("the other writer's entry must stay and ours be applied")
	}
	puts := callsOf(f, "pool.put")
	if len(puts) != 3 || puts[0].IfMatch != stale || puts[1].IfMatch == "" || puts[2].IfMatch == "" {
		t.Errorf("PUTs %v: want one with the stale etag (412), then two with fresh etags", puts)
	}
	for _, p := range puts[1:] {
		if p.IfMatch == stale {
			t.Errorf("PUT of %s sent with the stale etag after the 412", p.Pool)
		}
	}
	if got := f.Count("pool.get", ""); got != 2 {
		t.Errorf("%d pool GETs, want 2 (both pools read afresh)", got)
	}
}

// An edit that changes nothing on the cached copy is not trusted: the pool
// is read (the caller did not ask to trust the cache), and the write
// follows what Azure holds.
func TestWriteFromCacheReadsWhenTheCopyNeedsNoChange(t *testing.T) {
	f := testutil.NewFakeARM()
	seedTwoPools(f)
	s := newStore(t, f, nil)
	if r := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", setState("10.0.0.1", down))}, fromCache())[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	// Someone else sets the entry back to None; the cache still says Down.
	f.SeedPool(lbName, "kubernetes", testutil.Entry{Name: "n1", IP: "10.0.0.1"}, testutil.Entry{Name: "n2", IP: "10.0.0.2"})
	f.ResetCalls()
	r := s.UpdatePools(context.Background(), "t", []lbstore.PoolEdit{edit(lbName, "kubernetes", setState("10.0.0.1", down))}, fromCache())[0]
	if r.Err != nil || !r.Written {
		t.Fatalf("result %+v", r)
	}
	if f.AdminState(lbName, "kubernetes", "10.0.0.1") != down || f.Count("pool.get", "") != 1 {
		t.Errorf("calls %v: want a read, then the entry written Down again", f.Calls())
	}
}

// More than two pools of one load balancer are read and written
// concurrently: a chain would take more round trips.
func TestWriteFromCacheThreePoolsAreRead(t *testing.T) {
	f, s := warmStore(t)
	f.SeedPool(lbName, "default-web", testutil.Entry{Name: "n1", IP: "10.0.0.1"})
	warm(t, s)
	f.ResetCalls()
	res := s.UpdatePools(context.Background(), "t", append(bothDown(), edit(lbName, "default-web", setState("10.0.0.1", down))), fromCache())
	for _, r := range res {
		if r.Err != nil || !r.Written {
			t.Fatalf("result %+v", r)
		}
	}
	if f.Count("pool.get", "") != 3 || f.Count("pool.put", "") != 3 {
		t.Errorf("calls %v, want a GET and a PUT per pool", f.Calls())
	}
}
