package azure

import (
	"bytes"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// poolMemo remembers, per backend pool, the last answer the client decoded
// (a GET, or a PUT ARM completed at once) in its mirror form. An answer
// byte for byte equal to the remembered one is not decoded again: the pool
// is rebuilt from the mirror, which costs a fraction of the decoding.
//
// Why: the write path reads a pool afresh before each write, and that read
// returns what the previous write answered (nothing changed in between), so
// without the memo every pool write decoded the same pool twice. For a pool
// of 1,000 addresses a decode is ~3 ms of CPU.
//
// The answer is compared whole, so the memo never changes what a call
// returns: the same bytes decode to the same pool. Only answers of at least
// memoMinBody bytes are kept (smaller pools decode in well under a
// millisecond), and at most memoMaxBytes of answers in all: beyond that,
// arbitrary entries are dropped.
type poolMemo struct {
	mu      sync.Mutex
	entries map[string]memoEntry
	size    int
}

type memoEntry struct {
	body []byte // not modified once remembered
	wire *poolWire
}

const (
	memoMinBody  = 16 << 10
	memoMaxBytes = 32 << 20
)

// decode decodes a pool's answer, from the memo when body is the answer
// remembered under key.
func (m *poolMemo) decode(key string, body []byte) (armnetwork.BackendAddressPool, error) {
	if len(body) < memoMinBody {
		return decodePool(body)
	}
	key = strings.ToLower(key)
	m.mu.Lock()
	e, ok := m.entries[key]
	m.mu.Unlock()
	if ok && bytes.Equal(e.body, body) {
		return e.wire.pool()
	}
	w, err := decodeWire(body)
	if err != nil {
		return armnetwork.BackendAddressPool{}, wireError(err)
	}
	p, err := w.pool()
	if err != nil {
		return p, err
	}
	m.remember(key, memoEntry{body: body, wire: &w})
	return p, nil
}

func (m *poolMemo) remember(key string, e memoEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.entries == nil {
		m.entries = map[string]memoEntry{}
	}
	if old, ok := m.entries[key]; ok {
		delete(m.entries, key)
		m.size -= len(old.body)
	}
	for k, old := range m.entries {
		if m.size+len(e.body) <= memoMaxBytes {
			break
		}
		delete(m.entries, k)
		m.size -= len(old.body)
	}
	m.entries[key] = e
	m.size += len(e.body)
}
