package localservice

import (
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// opKey identifies one desired state: one pool of one Service. ARM names
// are case-insensitive, so pool is lower-cased. The load balancer is not
// part of it: it is where the store has the pool when the entry is applied.
type opKey struct {
	service string // namespace/name
	pool    string
}

// groupKey identifies the ARM object a tick writes: one pool of one load
// balancer.
type groupKey struct {
	lb   string
	pool string
}

// operation is the desired membership of one Service's pool on one load
// balancer, with the retry state of the attempt to apply it.
type operation struct {
	service string // namespace/name
	lb      string // where the pool is, resolved at each tick (ARM name)
	pool    string
	family  v1.IPFamily
	// nodes are the names of the nodes running the Service's endpoints,
	// from all its EndpointSlices, when the entry was (last) enqueued.
	nodes sets.Set[string]

	// retryCount is how many retriable failures this entry has consumed:
	// the retries of the oldest unfinished desired state it carries.
	retryCount int
	// freshRetries is the retry count of the newest desired state merged
	// into the entry (a fresh change starts at 0 with its own budget); it
	// equals retryCount when nothing was merged since the entry's first
	// attempt. When retryCount runs out, the entry lives on with this count
	// if the newest change still has budget (design case 10).
	freshRetries int
	// nextEligibleAt, when in the future, parks the entry (and its whole
	// group) until then: the Retry-After of a throttled attempt.
	nextEligibleAt time.Time
}

func (o *operation) key() opKey {
	return opKey{service: o.service, pool: strings.ToLower(o.pool)}
}

func (o *operation) group() groupKey {
	return groupKey{lb: strings.ToLower(o.lb), pool: strings.ToLower(o.pool)}
}

// parked reports whether the entry may not be attempted at now.
func (o *operation) parked(now time.Time) bool { return o.nextEligibleAt.After(now) }

// queue holds at most one entry per opKey, in order. It is the
// desired-state form of the design's operation list; the merge rule:
//
//   - upsert (an EndpointSlice change, fresh desired state): an entry with
//     the same key gets the new node set and keeps its place and its retry
//     state (retryCount, nextEligibleAt), and its freshRetries restart at 0:
//     the fresh change has its own budget; otherwise the entry is appended
//     with retryCount 0 and no nextEligibleAt.
//   - prepend (entries requeued by a tick: retried or parked): they go
//     before every entry, in their order. A live entry with the same key
//     was enqueued while the tick ran, so its node set is newer: the
//     requeued entry takes that node set, keeps its own retry state, and
//     the live entry is removed.
//
// So the target is always the newest desired state seen for the key, and
// the retry state always belongs to the oldest unfinished attempt: a newer
// target never resets the retry budget or the Retry-After parking.
// The queue is not safe for concurrent use (the Updater guards it).
type queue struct {
	order []opKey
	items map[opKey]*operation
}

func newQueue() *queue { return &queue{items: map[opKey]*operation{}} }

func (q *queue) len() int { return len(q.items) }

// upsert adds a fresh desired state (retry state of op is ignored unless
// the key is new, in which case op is stored as is).
func (q *queue) upsert(op *operation) {
	k := op.key()
	if cur, ok := q.items[k]; ok {
		cur.nodes = op.nodes
		cur.pool, cur.family = op.pool, op.family
		cur.freshRetries = 0
		return
	}
	q.items[k] = op
	q.order = append(q.order, k)
}

// drain removes and returns every entry, in order.
func (q *queue) drain() []*operation {
	out := make([]*operation, 0, len(q.order))
	for _, k := range q.order {
		out = append(out, q.items[k])
	}
	q.order = nil
	q.items = map[opKey]*operation{}
	return out
}

// prepend puts requeued entries before the live ones; see the merge rule.
func (q *queue) prepend(ops []*operation) {
	if len(ops) == 0 {
		return
	}
	order := make([]opKey, 0, len(ops)+len(q.order))
	items := make(map[opKey]*operation, len(ops)+len(q.items))
	for _, op := range ops {
		k := op.key()
		if _, dup := items[k]; dup {
			continue // cannot happen: a drained snapshot has unique keys
		}
		if live, ok := q.items[k]; ok {
			op.nodes = live.nodes
			op.freshRetries = 0 // a fresh change arrived during the tick
		}
		items[k] = op
		order = append(order, k)
	}
	for _, k := range q.order {
		if _, ok := items[k]; ok {
			continue
		}
		items[k] = q.items[k]
		order = append(order, k)
	}
	q.order, q.items = order, items
}

// remove drops every entry drop reports true for and returns how many.
func (q *queue) remove(drop func(*operation) bool) int {
	n := 0
	keep := q.order[:0]
	for _, k := range q.order {
		if drop(q.items[k]) {
			delete(q.items, k)
			n++
			continue
		}
		keep = append(keep, k)
	}
	q.order = keep
	return n
}

// list returns the entries in order (the queue keeps them).
func (q *queue) list() []*operation {
	out := make([]*operation, 0, len(q.order))
	for _, k := range q.order {
		out = append(out, q.items[k])
	}
	return out
}
