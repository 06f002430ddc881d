package placement

import (
	"sync"
	"testing"
)

// Concurrent placements see each other's reservations until released.
func TestInFlightCountsConcurrentPlacements(t *testing.T) {
	f := NewInFlight()
	pick := func(reserved map[string]int) (string, int, error) {
		if reserved["a"] <= reserved["b"] {
			return "a", 2, nil
		}
		return "b", 2, nil
	}
	var mu sync.Mutex
	got := map[string]int{}
	var releases []func()
	var wg sync.WaitGroup
	for _, key := range []string{"s1", "s2", "s3", "s4"} {
		wg.Go(func() {
			lb, release, err := f.Place(key, pick)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			got[lb]++
			releases = append(releases, release)
			mu.Unlock()
		})
	}
	wg.Wait()
	if got["a"] != 2 || got["b"] != 2 {
		t.Fatalf("placements %v, want 2 on each", got)
	}
	for _, r := range releases {
		r()
		r() // idempotent
	}
	if r := f.reservedExcept(""); len(r) != 0 {
		t.Fatalf("reservations left after release: %v", r)
	}
}

// A Service's own reservation is not counted against it, and a placement
// that adds no rules reserves nothing.
func TestInFlightOwnAndEmptyReservations(t *testing.T) {
	f := NewInFlight()
	_, release, _ := f.Place("s1", func(map[string]int) (string, int, error) { return "a", 3, nil })
	defer release()
	_, _, _ = f.Place("s1", func(r map[string]int) (string, int, error) {
		if r["a"] != 0 {
			t.Errorf("own reservation counted: %v", r)
		}
		return "a", 0, nil
	})
	_, _, _ = f.Place("s2", func(r map[string]int) (string, int, error) {
		if r["a"] != 3 {
			t.Errorf("reserved = %v, want a=3", r)
		}
		return "a", 0, nil
	})
}
