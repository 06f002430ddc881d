package localservice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/azlb/azlb/internal/azure"
)

// Outcome is how the updater treats a failed attempt.
type Outcome int

const (
	// OutcomeStale means the pool, its load balancer or its resource group is
	// gone (ARM not-found). Dropped quietly: no event, no metric.
	OutcomeStale Outcome = iota + 1
	// OutcomeRetriable means throttled (429, a closed throttle gate, the
	// client-side rate limiter), conflict (409, 412) or an error marked with
	// azure.MarkRetriable. Requeued while the retry budget lasts.
	OutcomeRetriable
	// OutcomeTerminal means everything else, including the statuses the Azure SDK
	// already retried (azure.RetriableStatusCodes) and a canceled or expired
	// context while the updater itself is running. Reported and dropped.
	OutcomeTerminal
	// OutcomeShutdown means the updater's context ended. Dropped quietly.
	OutcomeShutdown
)

var outcomeNames = map[Outcome]string{OutcomeStale: "Stale", OutcomeRetriable: "Retriable", OutcomeTerminal: "Terminal", OutcomeShutdown: "Shutdown"}

// String names the outcome.
func (o Outcome) String() string {
	if s, ok := outcomeNames[o]; ok {
		return s
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Classify maps the error of an attempt to its Outcome and, for a throttled
// attempt, the Retry-After time the error carries (zero when none; it may
// be in the past). ctx is the updater's context.
func Classify(ctx context.Context, err error) (Outcome, time.Time) {
	if ctx.Err() != nil {
		return OutcomeShutdown, time.Time{}
	}
	if errors.Is(err, errPoolGone) {
		return OutcomeStale, time.Time{}
	}
	switch azure.Classify(err) {
	case azure.ClassStale:
		return OutcomeStale, time.Time{}
	case azure.ClassThrottled:
		t, _ := azure.ThrottleRetryAfter(err)
		return OutcomeRetriable, t
	case azure.ClassConflict:
		return OutcomeRetriable, time.Time{}
	case azure.ClassRetriedBySDK, azure.ClassCanceled:
		return OutcomeTerminal, time.Time{}
	default:
		if azure.IsMarkedRetriable(err) {
			return OutcomeRetriable, time.Time{}
		}
		return OutcomeTerminal, time.Time{}
	}
}

// poolError names the failed step and object.
type poolError struct {
	op       string // "get" or "update"
	lb, pool string
	err      error
}

func (e *poolError) Error() string {
	return fmt.Sprintf("%s backend pool %s of load balancer %s: %v", e.op, e.pool, e.lb, e.err)
}

func (e *poolError) Unwrap() error { return e.err }

// maxEventErrorLen bounds the error text in an event message.
const maxEventErrorLen = 512

// eventError is a one-line description of err for an event: the step and
// object, then the ARM status and code (an azcore.ResponseError's text is
// many lines with the whole response), or the first line of the error.
func eventError(err error) string {
	if err == nil {
		return ""
	}
	var text string
	var pe *poolError
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &re) && re != nil && errors.As(err, &pe):
		text = fmt.Sprintf("%s backend pool %s of load balancer %s: ARM answered HTTP %d", pe.op, pe.pool, pe.lb, re.StatusCode)
		if re.ErrorCode != "" {
			text += " (" + re.ErrorCode + ")"
		}
	default:
		text, _, _ = strings.Cut(err.Error(), "\n")
	}
	if len(text) > maxEventErrorLen {
		cut := maxEventErrorLen
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "..."
	}
	return text
}
