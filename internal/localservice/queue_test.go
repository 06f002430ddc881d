package localservice

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

func op(svc, pool string, nodes ...string) *operation {
	return &operation{service: svc, lb: "LB", pool: pool, family: v1.IPv4Protocol, nodes: sets.New(nodes...)}
}

// describe renders the queue as service@pool:nodes/retries[/parked].
func describe(ops []*operation) []string {
	var out []string
	for _, o := range ops {
		s := fmt.Sprintf("%s@%s:%v/%d", o.service, o.pool, sets.List(o.nodes), o.retryCount)
		if !o.nextEligibleAt.IsZero() {
			s += "/parked"
		}
		out = append(out, s)
	}
	return out
}

func TestQueueMergeRule(t *testing.T) {
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name string
		run  func(q *queue)
		want []string
	}{
		{"upsert appends new keys in order", func(q *queue) {
			q.upsert(op("a/x", "a-x", "n1"))
			q.upsert(op("b/y", "b-y", "n2"))
		}, []string{"a/x@a-x:[n1]/0", "b/y@b-y:[n2]/0"}},
		{"upsert replaces the target, keeps place and retry state", func(q *queue) {
			parked := op("a/x", "a-x", "n1")
			parked.retryCount, parked.nextEligibleAt = 2, t0
			q.upsert(parked)
			q.upsert(op("b/y", "b-y", "n2"))
			fresh := op("a/x", "A-X", "n3") // pool names are case-insensitive
			fresh.retryCount = 0
			q.upsert(fresh)
		}, []string{"a/x@A-X:[n3]/2/parked", "b/y@b-y:[n2]/0"}},
		{"prepend puts requeued entries first", func(q *queue) {
			q.upsert(op("c/z", "c-z", "n9"))
			r := op("a/x", "a-x", "n1")
			r.retryCount = 1
			q.prepend([]*operation{r, op("b/y", "b-y", "n2")})
		}, []string{"a/x@a-x:[n1]/1", "b/y@b-y:[n2]/0", "c/z@c-z:[n9]/0"}},
		{"prepend merges a live entry of the same key: newest target, old retry state, front", func(q *queue) {
			q.upsert(op("c/z", "c-z", "n9"))
			q.upsert(op("a/x", "a-x", "n5", "n6")) // queued while the tick ran
			r := op("a/x", "a-x", "n1")
			r.retryCount, r.nextEligibleAt = 3, t0
			q.prepend([]*operation{r})
		}, []string{"a/x@a-x:[n5 n6]/3/parked", "c/z@c-z:[n9]/0"}},
		{"the load balancer is not part of the key (it is resolved at each tick)", func(q *queue) {
			q.upsert(op("a/x", "a-x", "n1"))
			o := op("a/x", "a-x", "n2")
			o.lb = "other"
			q.upsert(o)
		}, []string{"a/x@a-x:[n2]/0"}},
		{"a fresh change merged into a retried entry restarts its own budget", func(q *queue) {
			r := op("a/x", "a-x", "n1")
			r.retryCount, r.freshRetries = 3, 3
			q.upsert(r)
			q.upsert(op("a/x", "a-x", "n2"))
			if got := q.list()[0]; got.retryCount != 3 || got.freshRetries != 0 {
				t.Errorf("after upsert: retries %d, fresh %d; want 3 and 0", got.retryCount, got.freshRetries)
			}
			// The same during a tick: the live entry's change is fresh.
			drained := q.drain()
			drained[0].freshRetries = 1
			q.upsert(op("a/x", "a-x", "n3"))
			q.prepend(drained)
			if got := q.list()[0]; got.freshRetries != 0 || !got.nodes.Has("n3") {
				t.Errorf("after prepend: %v fresh %d; want the live target with a fresh budget", got, got.freshRetries)
			}
		}, []string{"a/x@a-x:[n3]/3"}},
		{"remove drops matching entries only", func(q *queue) {
			q.upsert(op("a/x", "a-x", "n1"))
			q.upsert(op("b/y", "b-y", "n2"))
			q.upsert(op("a/x", "a-x-IPv6", "n1"))
			if n := q.remove(func(o *operation) bool { return o.service == "a/x" }); n != 2 {
				t.Errorf("removed %d, want 2", n)
			}
		}, []string{"b/y@b-y:[n2]/0"}},
		{"drain empties", func(q *queue) {
			q.upsert(op("a/x", "a-x", "n1"))
			if got := describe(q.drain()); len(got) != 1 {
				t.Errorf("drained %v", got)
			}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue()
			tc.run(q)
			if got := describe(q.list()); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("queue = %v, want %v", got, tc.want)
			}
			if q.len() != len(tc.want) {
				t.Fatalf("len = %d, want %d", q.len(), len(tc.want))
			}
		})
	}
}

func TestQueueBoundedByPools(t *testing.T) {
	q := newQueue()
	for i := range 10000 {
		svc := fmt.Sprintf("ns/s%d", i%50)
		q.upsert(op(svc, poolOf(svc, v1.IPv4Protocol), fmt.Sprintf("n%d", i)))
	}
	if q.len() != 50 {
		t.Fatalf("len = %d after 10000 changes of 50 Services, want 50", q.len())
	}
	for _, o := range q.list() {
		if o.nodes.Len() != 1 {
			t.Fatalf("entry %v holds more than the newest target", o)
		}
	}
}
