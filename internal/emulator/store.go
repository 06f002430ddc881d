package emulator

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// phase is the provisioning phase a resource shows at a given instant.
type phase int

const (
	phaseSucceeded phase = iota
	phaseUpdating
	phaseDeleting
	phaseFailed
	phaseGone // a completed delete: the resource no longer exists
	numPhases
)

func (p phase) String() string {
	switch p {
	case phaseUpdating:
		return "Updating"
	case phaseDeleting:
		return "Deleting"
	case phaseFailed:
		return "Failed"
	default:
		return "Succeeded"
	}
}

// Operation results.
const (
	resultSucceeded = "Succeeded"
	resultFailed    = "Failed"
	resultCanceled  = "Canceled"
)

// operation is an asynchronous ARM operation. Its status is a pure function
// of the clock: InProgress before end, result from end on.
type operation struct {
	id         string
	sub        string
	location   string
	apiVersion string
	start, end time.Time
	result     string
	errCode    string
	errMessage string
	// rgDelete marks a resource-group deletion job (polled through
	// /subscriptions/{sub}/operationresults/{token}).
	rgDelete bool
	// delete marks a resource delete (operationResults answers 204).
	delete bool
	// compute marks a Microsoft.Compute operation (its own polling URLs and
	// status document).
	compute bool
}

func (op *operation) done(now time.Time) bool { return op == nil || !now.Before(op.end) }

// status is the Azure-AsyncOperation status string at now.
func (op *operation) status(now time.Time) string {
	if !op.done(now) {
		return "InProgress"
	}
	return op.result
}

// version is one immutable revision of a top-level resource. A write
// replaces the version; readers holding the previous one are unaffected.
type version struct {
	doc  obj // normalized resource document without etag and provisioningState
	etag string
	op   *operation // the last operation on the resource, nil if none
	// deleting marks a version whose op deletes the resource.
	deleting bool
	// creating marks a version whose op creates the resource (Compute shows
	// provisioningState Creating rather than Updating while it runs).
	creating bool
	// ext is kind-specific state that is not part of the document (a
	// Compute VM's power state and private addresses). Like doc it is never
	// modified once published.
	ext any
	// cache holds rendered forms per phase (filled by readers concurrently).
	cache [numPhases]atomic.Pointer[rendered]
}

// rendered is a rendered resource document at one phase.
type rendered struct {
	build    func() obj
	treeOnce sync.Once
	t        obj
	once     sync.Once
	encoded  []byte
	children sync.Map // lower(collection)+"/"+lower(name) -> []byte
}

// tree is the rendered document, rendered on first use (a child's read
// answered from children needs none).
func (r *rendered) tree() obj {
	r.treeOnce.Do(func() { r.t = r.build() })
	return r.t
}

// bytes is the tree's JSON, encoded on first use (a child's read needs
// only the child's).
func (r *rendered) bytes() []byte {
	r.once.Do(func() { r.encoded = mustMarshal(r.tree()) })
	return r.encoded
}

// phaseAt reports the provisioning phase of v at now.
func (v *version) phaseAt(now time.Time) phase {
	if v.op == nil {
		return phaseSucceeded
	}
	if !v.op.done(now) {
		if v.deleting {
			return phaseDeleting
		}
		return phaseUpdating
	}
	if v.op.result != resultSucceeded {
		return phaseFailed
	}
	if v.deleting {
		return phaseGone
	}
	return phaseSucceeded
}

// busy reports whether an operation on v is in flight at now.
func (v *version) busy(now time.Time) bool { return v.op != nil && !v.op.done(now) }

// entry is the slot of one top-level resource in a resource group.
type entry struct {
	kind *kindSpec
	cur  *version
	// ext is kind-specific state kept outside the document (a service
	// gateway's services and address locations); it ends with the entry.
	ext any
}

// group is a resource group.
type group struct {
	name      string
	location  string
	tags      obj
	managedBy string
	deleteOp  *operation
	resources map[string]*entry // lower(type)+"/"+lower(name)
}

// goneAt reports whether the group's deletion has completed at now.
func (g *group) goneAt(now time.Time) bool {
	return g.deleteOp != nil && g.deleteOp.done(now) && g.deleteOp.result == resultSucceeded
}

// deletingAt reports whether the group is being deleted at now.
func (g *group) deletingAt(now time.Time) bool {
	return g.deleteOp != nil && !g.deleteOp.done(now)
}

// subscription holds the state of one subscription.
type subscription struct {
	id     string
	groups map[string]*group
	ops    map[string]*operation // operation id (lower) -> op
	// opOrder lists the operations in creation order, for eviction.
	opOrder []*operation
}

func resourceKey(typ, name string) string {
	return strings.ToLower(typ) + "/" + strings.ToLower(name)
}

// liveGroup returns the group if it exists (and is not fully deleted) at now.
func (s *subscription) liveGroup(name string, now time.Time) *group {
	g := s.groups[strings.ToLower(name)]
	if g == nil || g.goneAt(now) {
		return nil
	}
	return g
}

// liveEntry returns the entry and its current version if the resource
// exists at now.
func (g *group) liveEntry(typ, name string, now time.Time) (*entry, *version) {
	en := g.resources[resourceKey(typ, name)]
	if en == nil || en.cur == nil {
		return nil, nil
	}
	if en.cur.phaseAt(now) == phaseGone {
		return nil, nil
	}
	return en, en.cur
}

// maxOps bounds the operations kept per subscription. Beyond it the oldest
// completed operations are forgotten first (clients poll an operation right
// after starting it, so the oldest are the least likely to be polled).
const maxOps = 100000

func (s *subscription) addOp(op *operation, now time.Time) {
	s.ops[strings.ToLower(op.id)] = op
	s.opOrder = append(s.opOrder, op)
	if len(s.ops) <= maxOps {
		return
	}
	kept := s.opOrder[:0]
	excess := len(s.ops) - maxOps*9/10
	for _, o := range s.opOrder {
		if excess > 0 && o.done(now) && o != op {
			delete(s.ops, strings.ToLower(o.id))
			excess--
			continue
		}
		kept = append(kept, o)
	}
	clear(s.opOrder[len(kept):])
	s.opOrder = kept
}
