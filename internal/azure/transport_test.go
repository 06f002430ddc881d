package azure

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/emulator"
	"github.com/azlb/azlb/internal/metrics"
)

// newH2Server is a TLS test server that offers HTTP/2 and a base transport
// trusting it.
func newH2Server(t *testing.T, h http.Handler) (*httptest.Server, *http.Transport) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	ca := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	base, err := newBaseTransport(ca)
	if err != nil {
		t.Fatal(err)
	}
	return srv, base
}

// newRequest builds a request, marked as an ARM write when write is set.
func newRequest(t *testing.T, write bool, method, url string, body io.Reader) *http.Request {
	t.Helper()
	ctx := context.Background()
	if write {
		ctx = markWrite(ctx)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// Marked writes travel on their own HTTP/1.1 connections; reads and
// unmarked requests (AAD token POSTs) on the shared transport, HTTP/2 here.
func TestARMTransportRoutesWrites(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv, base := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Proto)
		mu.Unlock()
	}))
	tr := newARMTransport(base, func() error { return nil })
	defer tr.CloseIdleConnections()
	for _, req := range []*http.Request{
		newRequest(t, false, http.MethodGet, srv.URL, nil),
		newRequest(t, false, http.MethodPost, srv.URL, bytes.NewReader([]byte("grant_type=client_credentials"))),
		newRequest(t, true, http.MethodPut, srv.URL, bytes.NewReader([]byte("{}"))),
	} {
		resp, err := tr.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", req.Method, err)
		}
		resp.Body.Close()
	}
	want := []string{"GET HTTP/2.0", "POST HTTP/2.0", "PUT HTTP/1.1"}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != len(want) {
		t.Fatalf("server saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d: %s, want %s", i, seen[i], want[i])
		}
	}
}

// A write whose fence closes while its body is being sent stops at the
// next socket write: the server gets a truncated body (which ARM and the
// emulator reject), and the caller a final fenced error.
func TestSocketFenceCutsAWriteMidBody(t *testing.T) {
	started := make(chan struct{})
	bodyErr := make(chan error, 1)
	srv, base := newH2Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		_, err := io.ReadAll(r.Body)
		bodyErr <- err
	}))
	var closed atomic.Bool
	reason := errors.New("lease lost")
	tr := newARMTransport(base, func() error {
		if closed.Load() {
			return reason
		}
		return nil
	})
	defer tr.CloseIdleConnections()

	pr, pw := io.Pipe()
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	go func() {
		if _, err := pw.Write(chunk); err != nil {
			return
		}
		<-started
		closed.Store(true)
		for range 64 {
			if _, err := pw.Write(chunk); err != nil {
				return // the transport gave up on the body
			}
		}
		_ = pw.Close()
	}()
	resp, err := tr.Do(newRequest(t, true, http.MethodPut, srv.URL, pr))
	if err == nil {
		resp.Body.Close()
		t.Fatal("a write whose fence closed mid-body succeeded")
	}
	var fe *fencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrWriteFenced) || !errors.Is(err, reason) || !strings.Contains(err.Error(), "at the socket") {
		t.Fatalf("error %v, want a fenced error wrapping the fence's reason", err)
	}
	if Classify(err) != ClassOther {
		t.Errorf("classified %v, want final (other)", Classify(err))
	}
	if err := <-bodyErr; err == nil {
		t.Error("the server read a complete body; the fence did not stop the rest")
	}
	_ = pr.Close()
}

// The gap fencePolicy leaves: the fence admits an attempt, then closes
// before the request reaches the socket (a freeze in between). The write
// must not reach ARM. Token requests and reads stay unfenced.
func TestSocketFenceStopsAnAdmittedWrite(t *testing.T) {
	src := uniqueSource("test-socket-fence")
	env := newEmuEnv(t, emulator.Options{}, src, nil)
	env.seed(t) // leaves an idle write connection to reuse
	ctx := context.Background()
	reason := errors.New("lease renewed 20s ago")
	var asked atomic.Int32
	env.c.SetWriteFence(func() error {
		if asked.Add(1) == 1 {
			return nil // fencePolicy's check admits the attempt
		}
		return reason // every later check, at the socket, refuses
	})
	env.emu.ResetRequests()
	_, err := env.c.LoadBalancer.CreateOrUpdate(ctx, emuRG, emuLB, armnetwork.LoadBalancer{
		Location:   to.Ptr(emuLoc),
		SKU:        &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{},
	}, "")
	if !errors.Is(err, ErrWriteFenced) || !errors.Is(err, reason) || !strings.Contains(err.Error(), "at the socket") {
		t.Fatalf("admitted write after the fence closed: %v, want ErrWriteFenced with the reason", err)
	}
	if asked.Load() < 2 {
		t.Errorf("fence asked %d times, want the policy's check and the socket's", asked.Load())
	}
	codes, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, metrics.APIRequestErrorsName,
		map[string]string{"source": src}, "code")
	if err != nil {
		t.Fatal(err)
	}
	if codes["fenced"] != 1 {
		t.Errorf("api_request_errors by code = %v, want the socket's refusal counted once as fenced", codes)
	}
	for _, r := range env.emu.Requests() {
		if r.Method != http.MethodGet {
			t.Errorf("%s %s reached the emulator after the fence closed", r.Method, r.Path)
		}
	}

	// A closed fence does not stop authentication or reads: fresh clients
	// (no token yet) read through it.
	env2 := newEmuEnv(t, emulator.Options{}, uniqueSource("test-socket-fence-read"), nil)
	env2.seed(t)
	env2.c.SetWriteFence(func() error { return reason })
	fresh, err := NewClients(ctx, env2.cfg, ClientOptions{Clock: env2.clk, Source: uniqueSource("test-socket-fence-fresh")})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fresh.SetWriteFence(func() error { return reason })
	if got, err := fresh.LoadBalancer.Get(ctx, emuRG, emuLB); err != nil || ptr.Deref(got.Name, "") != emuLB {
		t.Fatalf("read with a closed fence: %v, %v", got, err)
	}
}
