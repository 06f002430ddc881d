package provider

import "sync"

// keyMutex serialises work per key (a Service UID). The service controller
// may call EnsureLoadBalancer from a Service sync and UpdateLoadBalancer from
// a node sync for the same Service at once; doing both at once would only
// create the same public IP twice. Entries live only while someone holds or
// waits for them.
type keyMutex struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	refs int
}

func (k *keyMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
