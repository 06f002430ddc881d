package emulator

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func control(e *Emulator, method, path, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

func TestControlAPIFaults(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	e := h.emu
	bad := []struct{ name, body, field string }{
		{"bad regex", `{"pathRegex":"(","status":500}`, "pathRegex"},
		{"unknown field", `{"stauts":500}`, "stauts"},
		{"bad latency", `{"latency":"soon"}`, "soon"},
		{"bad status", `{"status":42}`, "status"},
		{"bad lro", `{"lroResult":"Maybe"}`, "lroResult"},
		{"bad probability", `{"status":500,"probability":2}`, "probability"},
		{"wrong type", `{"count":"three"}`, "count"},
	}
	for _, tc := range bad {
		rec := control(e, http.MethodPost, "/_emulator/faults", tc.body)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), tc.field) {
			t.Errorf("%s: %d %s", tc.name, rec.Code, rec.Body)
		}
	}
	rec := control(e, http.MethodPost, "/_emulator/faults", `{"method":"GET","pathRegex":"/resourcegroups/","status":503,"latency":"25ms","count":2}`)
	if rec.Code != 201 {
		t.Fatalf("add: %d %s", rec.Code, rec.Body)
	}
	var added struct{ ID string }
	_ = json.Unmarshal(rec.Body.Bytes(), &added)
	rec = control(e, http.MethodPost, "/_emulator/faults", `{"status":500,"latency":40}`)
	if rec.Code != 201 {
		t.Fatalf("add with ms latency: %d %s", rec.Code, rec.Body)
	}
	fs := e.Faults()
	if len(fs) != 2 || fs[0].Fault.Latency != 25*time.Millisecond || fs[1].Fault.Latency != 40*time.Millisecond || fs[0].Fault.Status != 503 {
		t.Fatalf("installed %+v", fs)
	}
	rec = control(e, http.MethodGet, "/_emulator/faults", "")
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"latency": "25ms"`) {
		t.Fatalf("list: %s", rec.Body)
	}
	if rec := control(e, http.MethodDelete, "/_emulator/faults/"+added.ID, ""); rec.Code != 204 {
		t.Fatalf("delete: %d", rec.Code)
	}
	if rec := control(e, http.MethodDelete, "/_emulator/faults/"+added.ID, ""); rec.Code != 404 {
		t.Fatalf("delete twice: %d", rec.Code)
	}
	if rec := control(e, http.MethodDelete, "/_emulator/faults", ""); rec.Code != 204 || len(e.Faults()) != 0 {
		t.Fatalf("clear: %d %d", rec.Code, len(e.Faults()))
	}
}

func TestControlAPILatencyRequestsStateReset(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	e := h.emu
	for _, body := range []string{`{}`, `{"latency":"-1s"}`, `{"latency":"x"}`, `{"lat":"1s"}`} {
		if rec := control(e, http.MethodPut, "/_emulator/latency", body); rec.Code != 400 || !strings.Contains(rec.Body.String(), "lat") {
			t.Errorf("latency %s: %d %s", body, rec.Code, rec.Body)
		}
	}
	if rec := control(e, http.MethodPut, "/_emulator/latency", `{"latency":"0s"}`); rec.Code != 200 {
		t.Fatalf("set latency: %d %s", rec.Code, rec.Body)
	}
	if rec := control(e, http.MethodPut, "/_emulator/latency", `{"latency":12}`); rec.Code != 200 || time.Duration(e.latency.Load()) != 12*time.Millisecond {
		t.Fatalf("set latency ms: %d %v", rec.Code, time.Duration(e.latency.Load()))
	}
	e.SetLatency(0)
	mark := time.Now()
	h.mustDo(t, 201, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	if rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "p"), `{"location":"eastus"}`, map[string]string{"User-Agent": "replica-b azsdk-go"}); rec.Code != 201 {
		t.Fatalf("PUT public IP: %d %s", rec.Code, rec.Body)
	}
	rec := control(e, http.MethodGet, "/_emulator/requests", "")
	var recs []RequestRecord
	if err := json.Unmarshal(rec.Body.Bytes(), &recs); err != nil {
		t.Fatal(err)
	}
	// The token request, the two PUTs; control calls are not logged.
	if len(recs) != 3 || recs[0].Kind != "aad" || recs[2].Status != 201 || recs[2].UserAgent != "replica-b azsdk-go" {
		t.Fatalf("requests %+v", recs)
	}
	rec = control(e, http.MethodGet, "/_emulator/requests?since="+mark.Format(time.RFC3339Nano), "")
	_ = json.Unmarshal(rec.Body.Bytes(), &recs)
	if len(recs) != 2 {
		t.Fatalf("since: %d records", len(recs))
	}
	if rec := control(e, http.MethodGet, "/_emulator/requests?since=yesterday", ""); rec.Code != 400 || !strings.Contains(rec.Body.String(), "since") {
		t.Fatalf("bad since: %d %s", rec.Code, rec.Body)
	}
	rec = control(e, http.MethodGet, "/_emulator/state", "")
	var st struct {
		Subscriptions []struct {
			SubscriptionID string
			ResourceGroups []struct {
				Resources []map[string]any
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatalf("state is not JSON: %v", err)
	}
	if len(st.Subscriptions) != 1 || len(st.Subscriptions[0].ResourceGroups) != 1 || len(st.Subscriptions[0].ResourceGroups[0].Resources) != 1 {
		t.Fatalf("state %s", rec.Body)
	}
	if rec := control(e, http.MethodDelete, "/_emulator/requests", ""); rec.Code != 204 || len(e.Requests()) != 0 {
		t.Fatal("delete requests")
	}
	if rec := control(e, http.MethodPost, "/_emulator/reset", ""); rec.Code != 204 {
		t.Fatal("reset")
	}
	if rec := h.do(t, http.MethodGet, rgPath("rg"), "", nil); rec.Code != 404 {
		t.Fatalf("state survived reset: %d", rec.Code)
	}
	if rec := control(e, http.MethodGet, "/_emulator/nope", ""); rec.Code != 404 {
		t.Fatalf("unknown control path: %d", rec.Code)
	}
	if rec := control(e, http.MethodGet, "/_emulator/healthz", ""); rec.Code != 200 {
		t.Fatalf("healthz: %d", rec.Code)
	}
}

func TestFaultProbabilityAndMatching(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	if _, err := h.emu.AddFault(Fault{Method: "get", PathRegex: "resourcegroups/flaky", Status: 503, Probability: 0.5}); err != nil {
		t.Fatal(err)
	}
	fired := 0
	for i := 0; i < 400; i++ {
		rec := h.do(t, http.MethodGet, rgPath("flaky"), "", nil)
		if rec.Code == 503 {
			fired++
		}
	}
	if fired < 120 || fired > 280 {
		t.Fatalf("probability 0.5 fired %d/400 times", fired)
	}
	// Other methods and paths are untouched.
	if rec := h.do(t, http.MethodGet, rgPath("stable"), "", nil); rec.Code != 404 {
		t.Fatalf("unmatched path: %d", rec.Code)
	}
	if rec := h.do(t, http.MethodPut, rgPath("flaky"), `{"location":"eastus"}`, nil); rec.Code != 201 {
		t.Fatalf("unmatched method: %d", rec.Code)
	}
	// A fault with an empty regex does not touch AAD; a regex can.
	h.emu.ClearFaults()
	if _, err := h.emu.AddFault(Fault{Status: 500}); err != nil {
		t.Fatal(err)
	}
	h.fetchToken(t)
	h.emu.ClearFaults()
	if _, err := h.emu.AddFault(Fault{PathRegex: "/oauth2/", Status: 503, Count: 1}); err != nil {
		t.Fatal(err)
	}
	rec := tokenRequest(h.emu, DefaultTenantID, nil)
	if rec.Code != 503 {
		t.Fatalf("AAD fault: %d", rec.Code)
	}
}
