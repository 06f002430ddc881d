package provider

import (
	"sync"
	"testing"
)

func TestKeyMutexSerialisesPerKeyAndForgets(t *testing.T) {
	var k keyMutex
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := 0; i < 50; i++ {
		for _, key := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				unlock := k.lock(key)
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
			}()
		}
	}
	wg.Wait()
	if len(k.locks) != 0 {
		t.Fatalf("%d lock entries left behind", len(k.locks))
	}
}
