package leaderfence

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// Under a closed fence a Kubernetes write is refused before it is sent;
// reads, leases and events always pass; an open fence lets writes through.
func TestKubeWrites(t *testing.T) {
	cs := fake.NewClientset(lease("replica-a_1", t0))
	clk := clocktesting.NewFakePassiveClock(t0.Add(time.Second))
	f, err := New(Options{Client: cs, Namespace: "kube-system", Name: "azlb-controller-manager", RenewDeadline: 10 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	rt := f.KubeWrites(roundTripper(func(req *http.Request) (*http.Response, error) {
		sent = append(sent, req.Method+" "+req.URL.Path)
		return httptest.NewRecorder().Result(), nil
	}))
	do := func(method, path string) error {
		req := httptest.NewRequest(method, "https://apiserver"+path, strings.NewReader("{}"))
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			_ = resp.Body.Close()
		}
		return err
	}
	status := "/api/v1/namespaces/default/services/web/status"
	always := []string{
		"GET " + status,
		"PUT /apis/coordination.k8s.io/v1/namespaces/kube-system/leases/azlb-controller-manager",
		"POST /api/v1/namespaces/default/events",
		"PATCH /api/v1/namespaces/default/events/web.1",
		"POST /apis/events.k8s.io/v1/namespaces/default/events",
	}
	check := func(when string, wantStatus bool) {
		t.Helper()
		sent = nil
		for _, c := range always {
			m, p, _ := strings.Cut(c, " ")
			if err := do(m, p); err != nil {
				t.Errorf("%s: %s refused: %v", when, c, err)
			}
		}
		err := do(http.MethodPatch, status)
		switch {
		case wantStatus && err != nil:
			t.Errorf("%s: the status patch was refused: %v", when, err)
		case !wantStatus && (!errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), status)):
			t.Errorf("%s: the status patch = %v, want refused naming the path", when, err)
		}
		want := len(always)
		if wantStatus {
			want++
		}
		if len(sent) != want {
			t.Errorf("%s: sent %v", when, sent)
		}
	}
	check("before Start", false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx)
	until(t, "the fence to open", func() bool { return f.Allow() == nil })
	check("holding a fresh lease", true)
	clk.SetTime(t0.Add(11 * time.Second)) // frozen past the renew deadline
	check("after the renew deadline", false)
}
