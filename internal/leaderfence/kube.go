package leaderfence

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/klog/v2"
)

// KubeWrites wraps the transport of the controller manager's Kubernetes
// clients (rest.Config.Wrap): a write (any method but GET, HEAD and
// OPTIONS) is sent only while Allow admits it, so a replica that lost its
// lease cannot patch a Service's status, drop a finalizer or set a node
// condition from stale state after the new leader wrote. Leases (the
// elector renews and gives up its own through the same configuration) and
// events pass unfenced.
func (f *Fence) KubeWrites(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if readOnly(req.Method) || unfenced(req.URL.Path) {
			return rt.RoundTrip(req)
		}
		if err := f.Allow(); err != nil {
			klog.V(2).InfoS("Refused a Kubernetes write: this replica does not hold a fresh lease", "method", req.Method, "path", req.URL.Path, "reason", err)
			closeBody(req)
			return nil, fmt.Errorf("leader fence: %s %s refused: %w", req.Method, req.URL.Path, err)
		}
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func readOnly(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	return false
}

// unfenced: the coordination API's leases and events (core and
// events.k8s.io).
func unfenced(path string) bool {
	return strings.HasPrefix(path, "/apis/coordination.k8s.io/") ||
		strings.HasPrefix(path, "/apis/events.k8s.io/") ||
		(strings.HasPrefix(path, "/api/v1/") && (strings.HasSuffix(path, "/events") || strings.Contains(path, "/events/")))
}

// closeBody honours the RoundTripper contract: the request body is closed
// even when the request is not sent.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
