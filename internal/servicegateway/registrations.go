package servicegateway

import (
	"context"
	"errors"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/names"
)

// Registrations (updateServices) are batched: a Service operation that
// needs one queues its entry and returns errQueued; the registrar sends
// what is queued in calls of at most the configured batch size, one call at
// a time, records each Service's answer and queues the Services again,
// whose operations then go on from the step they had reached.
const (
	registrationsQueueName = "servicegateway_registrations"
	// registrationsKey is the one key of the registrar's queue.
	registrationsKey = "updateServices"
	// registrationDelay is how long a queued entry may wait for others to
	// join its call while other Service operations are still running; with
	// none running, or a full batch, the call goes at once.
	registrationDelay = 500 * time.Millisecond
)

// errQueued: the operation waits for the registrar to send its
// updateServices entry; the registrar queues the Service again once it has
// the answer.
var errQueued = errors.New("waiting for the service gateway registrations to be sent")

// regKind is what a Service's updateServices entry does.
type regKind int8

const (
	// regRegister registers the Inbound service pointing at its pool.
	regRegister regKind = iota + 1
	// regUnlink leaves the service without pool (first step of a deletion).
	regUnlink
	// regUnregister removes the service (isDelete).
	regUnregister
)

func (k regKind) String() string {
	switch k {
	case regRegister:
		return "register"
	case regUnlink:
		return "unlink"
	default:
		return "unregister"
	}
}

// regEntry is one Service's entry of an updateServices call.
type regEntry struct {
	uid  string
	kind regKind
	req  *armnetwork.ServiceGatewayServiceRequest
	at   time.Time // when it was queued
}

// regFailure is the answer the gateway gave to a Service's entry, kept
// until its operation reads it.
type regFailure struct {
	kind regKind
	err  error
}

// updateService runs one Service's updateServices entry through the
// registrar. The first call queues it and returns errQueued; after the
// answer the Service is queued again: a success is in the tracker (the
// caller's step is then found done), a failure is returned by the next call
// of the same kind. It never returns nil. Call it without e.mu held.
func (e *Controller) updateService(uid string, kind regKind) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f, ok := e.regFailures[uid]; ok {
		delete(e.regFailures, uid)
		if f.kind == kind {
			return f.err
		}
	}
	if _, waiting := e.regWaiting[uid]; !waiting {
		e.regWaiting[uid] = kind
		e.regPending = append(e.regPending, regEntry{uid: uid, kind: kind, req: e.serviceRequest(uid, kind), at: e.clock.Now()})
	}
	e.regQueue.Add(registrationsKey)
	return errQueued
}

// registrationWaitingLocked reports whether an entry of the Service is queued or
// in flight (its operations wait for the answer). Call it with e.mu held.
func (e *Controller) registrationWaitingLocked(uid string) bool {
	_, ok := e.regWaiting[uid]
	return ok
}

// pokeRegistrar lets the registrar look again at what is queued (a Service
// operation ended: its batch may now be complete).
func (e *Controller) pokeRegistrar() {
	e.mu.Lock()
	n := len(e.regPending)
	e.mu.Unlock()
	if n > 0 {
		e.regQueue.Add(registrationsKey)
	}
}

// registrationsPending reports whether entries wait to be sent or answered.
func (e *Controller) registrationsPending() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.regWaiting) > 0
}

// processNextRegistrations is the registrar: it sends the next batch, if
// one is due, and hands each Service its answer.
func (e *Controller) processNextRegistrations(ctx context.Context) bool {
	key, quit := e.regQueue.Get()
	if quit {
		return false
	}
	defer e.regQueue.Done(key)
	e.working.Add(1)
	defer e.working.Add(-1)
	done := e.health.Busy()
	defer done()
	batch := e.nextRegistrations()
	if len(batch) == 0 {
		return true
	}
	errs := make([]error, len(batch))
	calls := e.sendRegistrations(ctx, batch, errs)
	e.recordRegistrations(ctx, batch, errs, calls)
	return true
}

// nextRegistrations takes the next batch to send: up to the batch size,
// once the batch is full, no other Service operation is running, queued or
// waiting for the address updater to drain it (none could join it), or its
// oldest entry has waited registrationDelay.
// Otherwise it schedules another look and returns nothing.
func (e *Controller) nextRegistrations() []regEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.regPending)
	if n == 0 {
		return nil
	}
	if n < e.regBatch && (e.svcQueue.Len() > 0 || e.svcBusy.Load() > 0 || e.egQueue.Len() > 0 || e.egBusy.Load() > 0 ||
		e.deletionWaitsLocked()) {
		if wait := e.regPending[0].at.Add(registrationDelay).Sub(e.clock.Now()); wait > 0 {
			e.regQueue.AddAfter(registrationsKey, wait)
			return nil
		}
	}
	k := min(n, e.regBatch)
	batch := e.regPending[:k:k]
	e.regPending = append([]regEntry(nil), e.regPending[k:]...)
	return batch
}

// sendRegistrations sends a batch in one updateServices. A batch the
// gateway refuses (400/422) is split in halves until the refused entries
// are alone, so that one Service's bad entry does not lose the others'; any
// other failure is every entry's. It fills errs (one per entry) and returns
// the number of calls made.
func (e *Controller) sendRegistrations(ctx context.Context, batch []regEntry, errs []error) int {
	reqs := make([]*armnetwork.ServiceGatewayServiceRequest, len(batch))
	for i, r := range batch {
		reqs[i] = r.req
	}
	cctx, cancel := context.WithTimeout(ctx, e.opTimeout)
	err := e.gw.UpdateServices(cctx, e.rg, names.ServiceGateway, armnetwork.ServiceGatewayUpdateServicesRequest{
		Action:          to.Ptr(armnetwork.ServiceUpdateActionPartialUpdate),
		ServiceRequests: reqs,
	})
	cancel()
	if err == nil || len(batch) == 1 || !refused(err) {
		for i := range errs {
			errs[i] = err
		}
		return 1
	}
	klog.FromContext(ctx).V(2).Info("The service gateway refused a batch of registrations; splitting it", "services", len(batch), "err", err)
	half := len(batch) / 2
	return 1 + e.sendRegistrations(ctx, batch[:half], errs[:half]) + e.sendRegistrations(ctx, batch[half:], errs[half:])
}

// refused reports whether the gateway refused a request for what it
// holds (400/422, or a service still mapped by addresses), as opposed to a
// failure of the call.
func refused(err error) bool {
	var re *azcore.ResponseError
	return isOverlayMappings(err) || errors.As(err, &re) && re != nil && (re.StatusCode == 400 || re.StatusCode == 422)
}

// recordRegistrations updates the mirror with what the gateway accepted,
// keeps the failures for the Services' operations and queues the Services
// again (and the registrar when more is queued).
func (e *Controller) recordRegistrations(ctx context.Context, batch []regEntry, errs []error, calls int) {
	failed := 0
	e.mu.Lock()
	for i, r := range batch {
		delete(e.regWaiting, r.uid)
		if errs[i] != nil {
			failed++
			if e.states[r.uid] != nil || e.egress[identityOfKey(r.uid)] != nil {
				e.regFailures[r.uid] = regFailure{kind: r.kind, err: errs[i]}
			}
			if st := e.egress[identityOfKey(r.uid)]; st != nil {
				st.regUnsure = true // ARM may have applied it; whichever sync comes next redoes it
			}
			continue
		}
		if id := identityOfKey(r.uid); id != "" {
			e.egressRegisteredLocked(id, r.kind == regRegister)
			continue
		}
		klog.FromContext(ctx).V(3).Info("Service gateway accepted the entry", "uid", r.uid, "entry", r.kind.String())
		switch r.kind {
		case regRegister:
			e.tracker.SetRegistered(r.uid, []string{e.poolID(r.uid)})
			e.updateReadyLocked(r.uid)
		case regUnlink:
			e.tracker.SetRegistered(r.uid, []string{})
		case regUnregister:
			e.tracker.SetRegistered(r.uid, nil)
		}
	}
	more := len(e.regPending) > 0
	e.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Sent service gateway registrations", "services", len(batch), "calls", calls, "failed", failed)
	for _, r := range batch {
		if id := identityOfKey(r.uid); id != "" {
			e.egQueue.Add(id)
			continue
		}
		e.svcQueue.Add(r.uid)
	}
	if more {
		e.regQueue.Add(registrationsKey)
	}
}

// serviceRequest is the updateServices entry of a Service.
func (e *Controller) serviceRequest(uid string, kind regKind) *armnetwork.ServiceGatewayServiceRequest {
	if id := identityOfKey(uid); id != "" {
		return e.outboundRequest(id, kind == regUnregister)
	}
	if kind == regUnregister {
		return e.unregistration(uid).ServiceRequests[0]
	}
	return e.registration(uid, kind == regRegister).ServiceRequests[0]
}
