package securitygroup

import (
	"context"
	"errors"
	"fmt"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/azure"
	"github.com/azlb/azlb/internal/metrics"
)

// MaxConflictRetries bounds how often a round re-reads the NSG after a 412
// or 409.
const MaxConflictRetries = 2

// LockName labels the writer's queue in
// cloudprovider_azure_lock_wait_duration_seconds.
const LockName = "securitygroup"

// ErrStopped is returned for edits not written because Run ended (or had
// not started and was stopped).
var ErrStopped = errors.New("securitygroup: not writing: the writer is stopped (not leading)")

// NotFoundError reports that the NSG named in azure.json does not exist.
type NotFoundError struct{ ResourceGroup, Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("network security group %s in resource group %s (azure.json securityGroupName, securityGroupResourceGroup) does not exist", e.Name, e.ResourceGroup)
}

// Options are the collaborators of a Store.
type Options struct {
	Client        azure.SecurityGroupClient
	ResourceGroup string
	Name          string
	// Clock drives the wait metric. Default: the real clock.
	Clock clock.PassiveClock
	// Tags, when set, gives the tags the NSG should carry from those it
	// has (azure.json tags: config.ResourceTags.Apply), and whether they
	// differ. A round that writes the NSG writes them too, and a round
	// whose edits change no rule writes the NSG only for them.
	Tags func(current map[string]*string) (map[string]*string, bool)
}

// Result is what became of one Edit.
type Result struct {
	// Written: a PUT holding this edit's change succeeded.
	Written bool
	// Changed: the edit changed azlb's rules (false: the NSG already held
	// what it asks for).
	Changed bool
	// Repaired names the rules of azlb's that the round's write rewrote or
	// removed because their content was not what azlb writes under their
	// names (changed out of band); every edit of the round reports them.
	Repaired []string
}

// runState is where the writer's Run is.
type runState int

const (
	notStarted runState = iota
	running
	stopped
)

// Store is the one writer of the NSG; see the package documentation.
type Store struct {
	client azure.SecurityGroupClient
	rg     string
	name   string
	clock  clock.PassiveClock
	tags   func(map[string]*string) (map[string]*string, bool)

	mu      sync.Mutex
	pending []*request
	wake    chan struct{}
	state   runState

	// The last copy read or written, and its generation (one more for
	// every read or write); used only by rounds (the Run goroutine) but
	// for CopyGeneration.
	last    *armnetwork.SecurityGroup
	copyGen atomic.Uint64
	// known is the content of every well-formed allow rule of azlb's in
	// the last copy, or, for a rule changed out of band since, in the
	// copy before (by name; used by rounds only): what a tampered rule's
	// name stands for.
	known map[string]allowContent
	// shared is the last copy, for Check (any goroutine).
	shared atomic.Pointer[armnetwork.SecurityGroup]
	readMu sync.Mutex // one Check reads when there is no copy yet
}

// CopyGeneration is the generation of the writer's last copy of the NSG:
// an edit with FromCopy set to it (or lower) may be applied to that copy,
// or a newer one, without a read (see Edit.FromCopy).
func (s *Store) CopyGeneration() uint64 { return s.copyGen.Load() }

type request struct {
	edit    *Edit
	ctx     context.Context
	started bool
	done    chan struct{}
	res     Result
	err     error
}

// New builds a Store; call Run to let it write.
func New(o Options) (*Store, error) {
	if o.Client == nil || o.Name == "" || o.ResourceGroup == "" {
		return nil, errors.New("securitygroup: Client, ResourceGroup and Name are required")
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Store{client: o.Client, rg: o.ResourceGroup, name: o.Name, clock: clk, tags: o.Tags, wake: make(chan struct{}, 1), known: map[string]allowContent{}}, nil
}

// Name is the NSG's name and resource group, for messages.
func (s *Store) Name() (resourceGroup, name string) { return s.rg, s.name }

// GatherWindow is how long a round waits for more edits after the last
// one arrived, and MaxGather how long it waits at most: a burst of Service
// reconciles (a controller start) shares few writes, a lone edit waits
// GatherWindow.
const (
	GatherWindow = 40 * time.Millisecond
	MaxGather    = 500 * time.Millisecond
)

// Pending is a queued edit; Wait returns its outcome.
type Pending struct {
	s      *Store
	r      *request
	queued time.Time
}

// Update queues one edit and waits for the round that writes it (Begin,
// then Wait).
func (s *Store) Update(ctx context.Context, e Edit) (Result, error) {
	return s.Begin(ctx, e).Wait()
}

// Begin queues one edit and returns at once, so that the caller can do
// other work while the writer gathers edits. ctx bounds the wait: an edit
// whose ctx ends before its round starts is dropped.
func (s *Store) Begin(ctx context.Context, e Edit) *Pending {
	r := &request{edit: &e, ctx: ctx, done: make(chan struct{})}
	pd := &Pending{s: s, r: r, queued: s.clock.Now()}
	s.mu.Lock()
	if s.state == stopped {
		s.mu.Unlock()
		r.err = ErrStopped
		close(r.done)
		return pd
	}
	s.pending = append(s.pending, r)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return pd
}

// Wait waits for the edit's round (or its context) and returns its outcome.
func (pd *Pending) Wait() (Result, error) {
	s, r := pd.s, pd.r
	select {
	case <-r.done:
	case <-r.ctx.Done():
		s.mu.Lock()
		if !r.started {
			for i, p := range s.pending {
				if p == r {
					s.pending = append(s.pending[:i], s.pending[i+1:]...)
					break
				}
			}
			s.mu.Unlock()
			return Result{}, r.ctx.Err()
		}
		s.mu.Unlock()
		<-r.done
	}
	metrics.ObserveLockWait(LockName, r.edit.Service, s.clock.Since(pd.queued))
	return r.res, r.err
}

// Collect removes from azlb's rules every destination live reports gone.
func (s *Store) Collect(ctx context.Context, live func(destination string) bool) (Result, error) {
	return s.Update(ctx, Edit{Service: "(collect)", Live: live})
}

// Check reports whether an edit would fit the NSG, without writing: it
// applies the edit to the writer's last copy of the NSG (read once when
// there is none yet) and returns the *LimitError its round would give
// (a *NotFoundError for an NSG that does not exist). Edits queued or
// written since that copy are not counted, so the write checks again; a
// Service reconcile checks its change before its first write, so that a
// change over Azure's limits writes nothing at all.
func (s *Store) Check(ctx context.Context, e Edit) error {
	sg := s.shared.Load()
	if sg == nil {
		s.readMu.Lock()
		if sg = s.shared.Load(); sg == nil {
			got, err := s.client.Get(ctx, s.rg, s.name)
			if err != nil {
				s.readMu.Unlock()
				if azure.Classify(err) == azure.ClassStale {
					return &NotFoundError{ResourceGroup: s.rg, Name: s.name}
				}
				return fmt.Errorf("read network security group %s: %w", s.name, err)
			}
			s.shared.CompareAndSwap(nil, got)
			sg = got
		}
		s.readMu.Unlock()
	}
	m := newModel(sg, nil)
	m.apply(&e)
	rules, _, err := m.render(e.Service)
	if err != nil {
		return err
	}
	return checkLimits(e.Service, rules)
}

// Run writes queued edits until ctx ends.
func (s *Store) Run(ctx context.Context) {
	log := klog.FromContext(ctx).WithName("securitygroup")
	ctx = klog.NewContext(ctx, log)
	s.mu.Lock()
	if s.state != notStarted {
		s.mu.Unlock()
		log.Error(nil, "Run called twice; ignoring the second call")
		return
	}
	s.state = running
	s.mu.Unlock()
	defer s.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for {
			taken := s.take()
			if len(taken) == 0 {
				break
			}
			taken = append(taken, s.gather(ctx)...)
			s.round(ctx, taken)
			if ctx.Err() != nil {
				return
			}
		}
	}
}

func (s *Store) stop() {
	s.mu.Lock()
	s.state = stopped
	left := s.pending
	s.pending = nil
	s.mu.Unlock()
	for _, r := range left {
		r.err = ErrStopped
		close(r.done)
	}
}

// gather waits for more edits: GatherWindow after the last one arrived, at
// most MaxGather in all (real time: it only groups writes).
func (s *Store) gather(ctx context.Context) []*request {
	var out []*request
	deadline := time.Now().Add(MaxGather)
	for {
		wait := min(GatherWindow, time.Until(deadline))
		if wait <= 0 {
			return out
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return out
		}
		more := s.take()
		if len(more) == 0 {
			return out
		}
		out = append(out, more...)
	}
}

func (s *Store) take() []*request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*request
	for _, r := range s.pending {
		if r.ctx.Err() != nil {
			r.err = r.ctx.Err()
			close(r.done)
			continue
		}
		r.started = true
		out = append(out, r)
	}
	s.pending = nil
	return out
}

// round reads the NSG, applies every edit and writes it at most once (plus
// conflict retries).
func (s *Store) round(ctx context.Context, reqs []*request) {
	log := klog.FromContext(ctx)
	defer func() {
		for _, r := range reqs {
			close(r.done)
		}
	}()
	fromCopy := s.last != nil
	for _, r := range reqs {
		fromCopy = fromCopy && r.edit.FromCopy > 0 && r.edit.FromCopy <= s.copyGen.Load()
	}
	for attempt := 0; ; attempt++ {
		sg, err := s.last, error(nil)
		if attempt > 0 || !fromCopy {
			sg, err = s.client.Get(ctx, s.rg, s.name)
			s.remember(sg, err)
		}
		if err != nil {
			if azure.Classify(err) == azure.ClassStale {
				err = &NotFoundError{ResourceGroup: s.rg, Name: s.name}
			} else {
				err = fmt.Errorf("read network security group %s: %w", s.name, err)
			}
			for _, r := range reqs {
				r.err = err
			}
			return
		}
		m := newModel(sg, s.known)
		ok := make([]*request, 0, len(reqs))
		for _, r := range reqs {
			r.err, r.res = nil, Result{}
			next := m.clone()
			next.apply(r.edit)
			rules, _, err := next.render(r.edit.Service)
			if err == nil {
				err = checkLimits(r.edit.Service, rules)
			}
			if err != nil {
				r.err = err
				continue
			}
			r.res.Changed = next.fingerprint() != m.fingerprint()
			m = next
			ok = append(ok, r)
		}
		rules, changed, err := m.render("")
		tags, tagsChanged := sg.Tags, false
		if s.tags != nil {
			tags, tagsChanged = s.tags(sg.Tags)
		}
		if err != nil || (!changed && !tagsChanged) {
			if err != nil { // cannot happen: every edit kept rendered
				for _, r := range ok {
					r.err = err
				}
			}
			return
		}
		out := *sg
		out.Tags = tags
		props := *sg.Properties
		if changed {
			props.SecurityRules = rules
		}
		out.Properties = &props
		written, err := s.client.CreateOrUpdate(ctx, s.rg, s.name, out, ptr.Deref(sg.Etag, ""))
		s.remember(written, err)
		if err == nil {
			for _, r := range ok {
				r.res.Written = true
				r.res.Repaired = m.tampered
			}
			if len(m.tampered) > 0 {
				log.Info("Rewrote or removed security rules whose content was changed out of band (azlb's names, not azlb's content)",
					"name", s.name, "rules", m.tampered)
			}
			log.V(2).Info("Wrote network security group", "name", s.name, "edits", len(ok), "rules", len(rules))
			return
		}
		if azure.Classify(err) == azure.ClassConflict && attempt < MaxConflictRetries {
			log.V(2).Info("Network security group changed since read; reading it again", "name", s.name, "err", err)
			continue
		}
		err = fmt.Errorf("write network security group %s: %w", s.name, err)
		for _, r := range ok {
			r.err = err
		}
		return
	}
}

// remember keeps a copy just read or written (a failure forgets the copy:
// the next round reads), and learns what its well-formed allow rules stand
// for: a name the copy holds with other content keeps what it stood for
// before; a name it does not hold is forgotten.
func (s *Store) remember(sg *armnetwork.SecurityGroup, err error) {
	if err != nil || sg == nil || sg.Properties == nil {
		s.last = nil
		return
	}
	s.last = sg
	s.shared.Store(sg)
	s.copyGen.Add(1)
	known := make(map[string]allowContent, len(s.known))
	for _, r := range sg.Properties.SecurityRules {
		if r == nil {
			continue
		}
		name, c, ok := wellFormed(r)
		if name == "" {
			continue
		}
		if !ok {
			if old, was := s.known[name]; was {
				known[name] = old
			}
			continue
		}
		known[name] = c
	}
	s.known = known
}
