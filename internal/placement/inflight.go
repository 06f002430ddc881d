package placement

import "sync"

// InFlight counts the rules of Services placed on a load balancer whose
// write has not landed yet, so that concurrent placements count each other:
// three Services created in one apply must not all read the same rule
// counts and pick the same load balancer. Safe for concurrent use.
//
// Place holds a lock across reading counts, choosing and reserving; a
// reservation lasts until its release is called (after the write, whatever
// its outcome: on success the load balancer's own rule count shows it).
type InFlight struct {
	place sync.Mutex                // serialises count-choose-reserve
	mu    sync.Mutex                // guards rules
	rules map[string]map[string]int // load balancer -> Service key -> rules
}

// NewInFlight returns an empty InFlight.
func NewInFlight() *InFlight {
	return &InFlight{rules: map[string]map[string]int{}}
}

// Place runs choose with the placement lock held, passing it the rules
// reserved per load balancer by Services other than key. choose returns the
// load balancer picked, the rules the Service adds to it (0: it is already
// there, nothing to reserve) and an error. The returned release ends the
// reservation; it is never nil and may be called more than once.
func (f *InFlight) Place(key string, choose func(reserved map[string]int) (lb string, rules int, err error)) (string, func(), error) {
	f.place.Lock()
	defer f.place.Unlock()
	lb, rules, err := choose(f.reservedExcept(key))
	if err != nil || rules <= 0 {
		return lb, func() {}, err
	}
	f.mu.Lock()
	if f.rules[lb] == nil {
		f.rules[lb] = map[string]int{}
	}
	f.rules[lb][key] = rules
	f.mu.Unlock()
	var once sync.Once
	return lb, func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			delete(f.rules[lb], key)
			if len(f.rules[lb]) == 0 {
				delete(f.rules, lb)
			}
		})
	}, nil
}

func (f *InFlight) reservedExcept(key string) map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for lb, byKey := range f.rules {
		for k, n := range byKey {
			if k != key {
				out[lb] += n
			}
		}
	}
	return out
}
