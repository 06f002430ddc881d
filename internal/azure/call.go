package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"

	"github.com/azlb/azlb/internal/metrics"
)

// Operation names; with the client's metric name they form the request
// label, e.g. "loadbalancer_create_or_update". LRO polling requests of a
// write carry the write's label plus "_poll".
const (
	opGet            = "get"
	opList           = "list"
	opCreateOrUpdate = "create_or_update"
	opDelete         = "delete"
	pollSuffix       = "_poll"
)

// base is what every resource client shares: its name, its rate limiter and
// the settings of its calls.
type base struct {
	client        string
	metricName    string
	limiter       *rateLimiter
	pollFrequency time.Duration
	apiLabels     metrics.APIRequest
	secrets       []string
}

// admit takes a token from the read or write bucket and returns the context
// the SDK call runs with. It takes one token per method call: pages of a List
// and LRO polls are not charged.
func (b *base) admit(ctx context.Context, op, resourceGroup string, write bool) (context.Context, error) {
	request := b.metricName + "_" + op
	if err := b.limiter.tryAccept(write); err != nil {
		l := b.apiLabels
		l.Request, l.ResourceGroup = request, resourceGroup
		metrics.CountAPIRequestRateLimited(l)
		klog.FromContext(ctx).V(4).Info("Azure call rejected by client-side rate limiter",
			"client", b.client, "request", request, "resourceGroup", resourceGroup)
		return nil, err
	}
	return withRequestInfo(ctx, request, resourceGroup), nil
}

// wrap names the failed call and object; errors.Is/As see through it.
func (b *base) wrap(op, object string, err error) error {
	return redactError(fmt.Errorf("azure %s %s %s: %w", b.client, op, object, err), b.secrets...)
}

// withIfMatch sets If-Match on the request(s) issued with ctx when etag is
// non-empty.
func withIfMatch(ctx context.Context, etag string) context.Context {
	if etag == "" {
		return ctx
	}
	return policy.WithHTTPHeader(ctx, http.Header{"If-Match": []string{etag}})
}

// write runs a long-running write: the initial request (with If-Match) and
// then polling until done (without If-Match). op is opCreateOrUpdate or
// opDelete.
func write[T any](ctx context.Context, b *base, op, resourceGroup, object, etag string,
	begin func(context.Context) (*runtime.Poller[T], error)) (T, error) {
	return writeOrDone(ctx, b, op, resourceGroup, object, etag, func(ctx context.Context) (*T, *runtime.Poller[T], error) {
		p, err := begin(ctx)
		return nil, p, err
	})
}

// writeOrDone is write for a begin that returns either the final resource
// (it saw ARM complete the write synchronously and decoded the answer) or a
// poller.
func writeOrDone[T any](ctx context.Context, b *base, op, resourceGroup, object, etag string,
	begin func(context.Context) (*T, *runtime.Poller[T], error)) (T, error) {
	wait, err := startWrite(ctx, b, op, resourceGroup, object, etag, begin)
	if err != nil {
		var zero T
		return zero, err
	}
	return wait(ctx)
}

// startWrite sends a long-running write and returns once ARM accepted it;
// wait polls its operation to the end (at once when ARM completed it
// synchronously). Callers that send many writes let the operations of the
// earlier ones run while they send the next.
func startWrite[T any](ctx context.Context, b *base, op, resourceGroup, object, etag string,
	begin func(context.Context) (*T, *runtime.Poller[T], error)) (wait func(context.Context) (T, error), err error) {
	callCtx, err := b.admit(ctx, op, resourceGroup, true)
	if err != nil {
		return nil, b.wrap(op, object, err)
	}
	var initial *http.Response
	done, poller, err := begin(policy.WithCaptureResponse(withIfMatch(callCtx, etag), &initial))
	if err != nil {
		return nil, b.wrap(op, object, err)
	}
	if done != nil {
		return func(context.Context) (T, error) { return *done, nil }, nil
	}
	// A write ARM completed synchronously (200/201 with a terminal
	// provisioningState, as updates of load balancers and pools are) carries
	// the final resource in its body: decode it instead of letting the
	// poller GET the resource again, which would cost one more round trip.
	if poller.Done() {
		if out, ok := synchronousResult(initial, sdkResult[T]); ok {
			return func(context.Context) (T, error) { return out, nil }, nil
		}
	}
	return func(ctx context.Context) (T, error) {
		pollCtx := withRequestInfo(ctx, b.metricName+"_"+op+pollSuffix, resourceGroup)
		resp, err := poller.PollUntilDone(pollCtx, &runtime.PollUntilDoneOptions{Frequency: b.pollFrequency})
		if err != nil {
			var zero T
			return zero, b.wrap(op, object, err)
		}
		return resp, nil
	}, nil
}

// list collects every page of a pager, skipping nil items.
func list[P, T any](ctx context.Context, b *base, resourceGroup, object string,
	newPager func() *runtime.Pager[P], items func(P) []*T) ([]*T, error) {
	return listOp(ctx, b, opList, resourceGroup, object, newPager, items)
}

// listOp is list under another operation name.
func listOp[P, T any](ctx context.Context, b *base, op, resourceGroup, object string,
	newPager func() *runtime.Pager[P], items func(P) []*T) ([]*T, error) {
	callCtx, err := b.admit(ctx, op, resourceGroup, false)
	if err != nil {
		return nil, b.wrap(op, object, err)
	}
	var out []*T
	pager := newPager()
	for pager.More() {
		page, err := pager.NextPage(callCtx)
		if err != nil {
			return nil, b.wrap(op, object, err)
		}
		for _, it := range items(page) {
			if it != nil {
				out = append(out, it)
			}
		}
	}
	return out, nil
}

// get runs a single read.
func get[R, T any](ctx context.Context, b *base, resourceGroup, object string,
	call func(context.Context) (R, error), value func(*R) *T) (*T, error) {
	callCtx, err := b.admit(ctx, opGet, resourceGroup, false)
	if err != nil {
		return nil, b.wrap(opGet, object, err)
	}
	var raw *http.Response
	resp, err := call(policy.WithCaptureResponse(callCtx, &raw))
	if err != nil {
		return nil, b.wrap(opGet, object, err)
	}
	// The SDK's generated clients take a 200 without a body for an empty
	// resource; ARM never sends one, so it is an error, not a value.
	if raw != nil && raw.StatusCode == http.StatusOK {
		if body, err := runtime.Payload(raw); err != nil || len(bytes.TrimSpace(body)) == 0 {
			return nil, b.wrap(opGet, object, fmt.Errorf("ARM answered 200 without a body"))
		}
	}
	return value(&resp), nil
}

// synchronousResult decodes the answer to a write that needs no polling:
// the status is 200 or 201 and the body decodes, with provisioningState
// Succeeded. Anything else (deletes, 202s, bodies that do not decode) goes
// through the poller as usual. decode returns the value and its
// provisioningState.
func synchronousResult[T any](resp *http.Response, decode func([]byte) (T, string, error)) (T, bool) {
	var zero T
	if resp == nil || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated) {
		return zero, false
	}
	body, err := runtime.Payload(resp)
	if err != nil || len(body) == 0 {
		return zero, false
	}
	out, state, err := decode(body)
	if err != nil || !strings.EqualFold(state, string(armnetwork.ProvisioningStateSucceeded)) {
		return zero, false
	}
	return out, true
}

// sdkResult decodes a write's answer with the SDK's codec (T is the
// generated client's response type), reading its provisioningState apart.
func sdkResult[T any](body []byte) (T, string, error) {
	var out T
	var state struct {
		Properties struct {
			ProvisioningState string `json:"provisioningState"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(body, &state); err != nil {
		return out, "", err
	}
	err := json.Unmarshal(body, &out)
	return out, state.Properties.ProvisioningState, err
}
