package keymutex

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSerialisesPerKeyAndForgets(t *testing.T) {
	var k Mutex
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for range 50 {
		for _, key := range []string{"a", "b"} {
			wg.Go(func() {
				unlock := k.Lock(key)
				mu.Lock()
				inside[key]++
				if inside[key] > 1 {
					t.Errorf("two holders of key %s", key)
				}
				mu.Unlock()
				mu.Lock()
				inside[key]--
				mu.Unlock()
				unlock()
			})
		}
	}
	wg.Wait()
	if n := k.held(); n != 0 {
		t.Fatalf("%d lock entries left behind", n)
	}
}
