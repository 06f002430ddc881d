package annotations

import (
	"container/list"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// MaxReported bounds how many Services a Reported memory holds; past it
// the least recently reported one is forgotten (at worst it is told
// again).
const MaxReported = 10000

// Reported remembers, per Service UID, the generation and the
// unsupported annotation keys last reported in an UnsupportedAnnotation
// event, so a resync does not repeat the event. It is bounded (least
// recently reported first out) and safe for concurrent use.
type Reported struct {
	mu      sync.Mutex
	max     int
	entries map[types.UID]*list.Element // of *reportedEntry
	order   *list.List                  // front: most recently reported
}

type reportedEntry struct {
	uid        types.UID
	generation int64
	keys       string
}

// NewReported returns an empty memory of at most maxEntries Services (0:
// unbounded).
func NewReported(maxEntries int) *Reported {
	return &Reported{max: maxEntries, entries: map[types.UID]*list.Element{}, order: list.New()}
}

// ShouldReport reports whether the Service's unsupported keys (sorted) are
// news: not reported yet for this generation of the Service, or not this
// set of keys. It records them as reported. No keys: nothing to report, and
// the Service is forgotten, so keys added later are reported.
func (r *Reported) ShouldReport(svc *v1.Service, keys []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(keys) == 0 {
		r.forgetLocked(svc.UID)
		return false
	}
	joined := strings.Join(keys, "\n")
	if el, ok := r.entries[svc.UID]; ok {
		e := el.Value.(*reportedEntry)
		if e.generation == svc.Generation && e.keys == joined {
			return false
		}
		e.generation, e.keys = svc.Generation, joined
		r.order.MoveToFront(el)
		return true
	}
	r.entries[svc.UID] = r.order.PushFront(&reportedEntry{uid: svc.UID, generation: svc.Generation, keys: joined})
	for r.max > 0 && r.order.Len() > r.max {
		oldest := r.order.Back()
		r.order.Remove(oldest)
		delete(r.entries, oldest.Value.(*reportedEntry).uid)
	}
	return true
}

// Forget drops what was reported for a Service (it was deleted).
func (r *Reported) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(uid)
}

func (r *Reported) forgetLocked(uid types.UID) {
	if el, ok := r.entries[uid]; ok {
		r.order.Remove(el)
		delete(r.entries, uid)
	}
}

// Len is how many Services it remembers.
func (r *Reported) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.order.Len()
}
