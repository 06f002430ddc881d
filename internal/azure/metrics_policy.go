package azure

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"k8s.io/utils/clock"

	"github.com/azlb/azlb/internal/metrics"
)

// metricsPolicy records the API request metrics of every HTTP request that is
// actually sent towards ARM. It sits inside the throttle policy, so requests a
// closed gate blocks are not timed here (the throttle policy counts them as
// throttled).
type metricsPolicy struct {
	clock  clock.PassiveClock
	labels labels
}

// Do implements policy.Policy.
func (p *metricsPolicy) Do(req *policy.Request) (*http.Response, error) {
	start := p.clock.Now()
	resp, err := req.Next()
	l := p.labels.forRequest(req.Raw())
	metrics.ObserveAPIRequest(l, p.clock.Since(start))
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		metrics.CountAPIRequestError(l, "canceled")
	case err != nil && errors.Is(err, ErrWriteFenced):
		metrics.CountAPIRequestError(l, "fenced") // refused at the socket (armTransport)
	case err != nil:
		metrics.CountAPIRequestError(l, "transport")
	case resp.StatusCode >= http.StatusBadRequest:
		metrics.CountAPIRequestError(l, armErrorCode(resp))
	}
	return resp, err
}

// armErrorCode returns the ARM error code of an error response (the
// x-ms-error-code header or the code of the JSON error body), or the HTTP
// status code as text when there is none.
func armErrorCode(resp *http.Response) string {
	var re *azcore.ResponseError
	if errors.As(runtime.NewResponseError(resp), &re) && re.ErrorCode != "" {
		return re.ErrorCode
	}
	return strconv.Itoa(resp.StatusCode)
}
