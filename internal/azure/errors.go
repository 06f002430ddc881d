package azure

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
)

// ErrorClass is the retry classification every controller applies to errors
// returned by this package.
type ErrorClass int

const (
	// ClassNone means no error.
	ClassNone ErrorClass = iota
	// ClassStale means the resource (or its parent, or its resource group) does
	// not exist any more. Drop the work quietly.
	ClassStale
	// ClassThrottled means ARM answered 429, a throttle gate is closed, or the
	// client-side rate limiter rejected the call. Retry after
	// ThrottleRetryAfter(err) when it is known and in the future, else at the
	// caller's next normal retry.
	ClassThrottled
	// ClassConflict means 409, 412, or an ARM code saying another operation won
	// or the operation may simply be retried. Retry after a fresh GET (the
	// etag or the resource changed underneath us).
	ClassConflict
	// ClassRetriedBySDK means a status in RetriableStatusCodes. The Azure SDK
	// retry policy already retried it; callers treat it as terminal.
	ClassRetriedBySDK
	// ClassCanceled means context.Canceled or context.DeadlineExceeded. Terminal
	// (the caller is shutting down or gave up).
	ClassCanceled
	// ClassOther means anything else. Terminal unless wrapped by MarkRetriable.
	ClassOther
)

var classNames = [...]string{"None", "Stale", "Throttled", "Conflict", "RetriedBySDK", "Canceled", "Other"}

// String returns the class name, e.g. "Throttled".
func (c ErrorClass) String() string {
	if c >= 0 && int(c) < len(classNames) {
		return classNames[c]
	}
	return "ErrorClass(" + strconv.Itoa(int(c)) + ")"
}

// ARM error codes used by Classify (compared case-insensitively).
const (
	CodeResourceNotFound                           = "ResourceNotFound"
	CodeNotFound                                   = "NotFound"
	CodeResourceGroupNotFound                      = "ResourceGroupNotFound"
	CodeParentResourceNotFound                     = "ParentResourceNotFound"
	CodeAnotherOperationInProgress                 = "AnotherOperationInProgress"
	CodePreconditionFailed                         = "PreconditionFailed"
	CodeCanceledAndSupersededDueToAnotherOperation = "CanceledAndSupersededDueToAnotherOperation"
	CodeRetryableError                             = "RetryableError"
	// CodeModificationOfNICIpConfigBackendPool: a pool write changed a
	// NIC-based member, which happens when a NIC joined or left the pool
	// since it was read: another writer won, like a 412.
	CodeModificationOfNICIpConfigBackendPool = "ModificationOfNICIpConfigBackendPoolNotSupported"
	// CodeLoadBalancerInUseByScaleSet: a load balancer (or pool) delete
	// refused while a scale set model lists one of its pools.
	CodeLoadBalancerInUseByScaleSet = "LoadBalancerInUseByVirtualMachineScaleSet"
)

var (
	staleCodes    = []string{CodeResourceNotFound, CodeNotFound, CodeResourceGroupNotFound, CodeParentResourceNotFound}
	conflictCodes = []string{CodeAnotherOperationInProgress, CodePreconditionFailed, CodeCanceledAndSupersededDueToAnotherOperation, CodeRetryableError,
		CodeModificationOfNICIpConfigBackendPool}
)

func hasCode(codes []string, code string) bool {
	return slices.ContainsFunc(codes, func(c string) bool { return strings.EqualFold(c, code) })
}

// Classify maps an error returned by this package (possibly wrapped) to its
// ErrorClass. Rules, first match wins:
//
//  1. nil -> ClassNone.
//  2. context.Canceled / context.DeadlineExceeded anywhere in the chain ->
//     ClassCanceled.
//  3. *ThrottleError, ErrTooManyRequest or *RateLimitedError -> ClassThrottled.
//  4. *azcore.ResponseError:
//     status 429 -> ClassThrottled;
//     code ResourceNotFound, NotFound, ResourceGroupNotFound,
//     ParentResourceNotFound -> ClassStale;
//     code AnotherOperationInProgress, PreconditionFailed,
//     CanceledAndSupersededDueToAnotherOperation, RetryableError,
//     ModificationOfNICIpConfigBackendPoolNotSupported ->
//     ClassConflict (RetryableError is how ARM marks a failed long-running
//     operation that may be retried; the SDK does not retry LRO failures;
//     a pool write meets ModificationOfNICIpConfigBackendPoolNotSupported
//     when a NIC joined or left the pool since it was read);
//     status 404 -> ClassStale; 409 and 412 -> ClassConflict;
//     status in RetriableStatusCodes -> ClassRetriedBySDK;
//     anything else -> ClassOther.
//  5. anything else -> ClassOther.
//
// Error codes are matched before statuses so that, for example, a failed
// long-running operation (HTTP 200 on the poll, code in the body) is still
// recognised.
func Classify(err error) ErrorClass {
	if err == nil {
		return ClassNone
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ClassCanceled
	}
	var rl *RateLimitedError
	if errors.Is(err, ErrTooManyRequest) || errors.As(err, &rl) {
		return ClassThrottled
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && re != nil {
		return classifyResponse(re.StatusCode, re.ErrorCode)
	}
	return ClassOther
}

func classifyResponse(status int, code string) ErrorClass {
	switch {
	case status == http.StatusTooManyRequests:
		return ClassThrottled
	case hasCode(staleCodes, code):
		return ClassStale
	case hasCode(conflictCodes, code):
		return ClassConflict
	case status == http.StatusNotFound:
		return ClassStale
	case status == http.StatusConflict, status == http.StatusPreconditionFailed:
		return ClassConflict
	case slices.Contains(retriableStatusCodes, status):
		return ClassRetriedBySDK
	default:
		return ClassOther
	}
}

// Retriable reports whether the caller should retry the work later: the
// class is ClassThrottled or ClassConflict, or the error was marked with
// MarkRetriable. Canceled errors are never retriable, even when marked.
func Retriable(err error) bool {
	switch Classify(err) {
	case ClassThrottled, ClassConflict:
		return true
	case ClassNone, ClassCanceled:
		return false
	default:
		return IsMarkedRetriable(err)
	}
}

// ThrottleRetryAfter returns the time after which a throttled call may be
// retried: the RetryAfter of a *ThrottleError or *RateLimitedError in err's
// chain. ok is false when err carries no such time (for example a raw ARM
// 429 that did not pass through the throttle policy). The time may be in the
// past.
func ThrottleRetryAfter(err error) (time.Time, bool) {
	var te *ThrottleError
	if errors.As(err, &te) && te != nil {
		return te.RetryAfter, true
	}
	var rl *RateLimitedError
	if errors.As(err, &rl) && rl != nil {
		return rl.RetryAfter, true
	}
	return time.Time{}, false
}

// retriableError marks a non-ARM error as worth retrying.
type retriableError struct{ err error }

func (e *retriableError) Error() string { return e.err.Error() }
func (e *retriableError) Unwrap() error { return e.err }

// MarkRetriable wraps err so that IsMarkedRetriable (and Retriable) report
// true for it and for any error wrapping it. Error text and errors.Is/As
// through the wrapper are unchanged. MarkRetriable(nil) is nil.
func MarkRetriable(err error) error {
	if err == nil {
		return nil
	}
	return &retriableError{err: err}
}

// IsMarkedRetriable reports whether err's chain contains an error wrapped by
// MarkRetriable.
func IsMarkedRetriable(err error) bool {
	var re *retriableError
	return errors.As(err, &re)
}

// StatusCode returns the HTTP status of the ARM response error in err's
// chain, or 0 when there is none.
func StatusCode(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re != nil {
		return re.StatusCode
	}
	return 0
}

// scaleSetInMessage finds the scale set id in the message of
// LoadBalancerInUseByVirtualMachineScaleSet (the id is followed by a full
// stop).
var scaleSetInMessage = regexp.MustCompile(`(?i)(/subscriptions/[^/\s]+/resourceGroups/[^/\s]+/providers/Microsoft\.Compute/virtualMachineScaleSets/[^/\s"]+?)\.(\s|"|$)`)

// ScaleSetInUse returns the scale set named by a
// LoadBalancerInUseByVirtualMachineScaleSet error in err's chain.
func ScaleSetInUse(err error) (string, bool) {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re == nil || !strings.EqualFold(re.ErrorCode, CodeLoadBalancerInUseByScaleSet) {
		return "", false
	}
	m := scaleSetInMessage.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return m[1], true
}
