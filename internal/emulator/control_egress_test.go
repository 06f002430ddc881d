package emulator

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
)

// The control API's egress endpoint: GET tells a pod's outbound route;
// POST sends the pod's HTTP GET through the data plane, and the loopback
// server sees the NAT gateway's public IP as the source. Pods without a
// route, bad fields and a data plane that is off get clear errors.
func TestControlAPIEgress(t *testing.T) {
	if rec := control(newHandlerEnv(t, Options{}).emu, http.MethodGet, "/_emulator/egress?pod=10.2.0.5", ""); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "--data-plane") {
		t.Errorf("data plane off: %d %s", rec.Code, rec.Body)
	}
	h := sgwEnv(t, Options{DataPlane: true})
	e := h.emu
	t.Cleanup(func() { _ = e.Close() })
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "team-pip"), `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Static"}}`)
	source := stringOf(propsOf(h.mustDo(t, http.StatusOK, http.MethodGet, netPath(sgwRG, "publicIPAddresses", "team-pip"), ""))["ipAddress"])
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "natGateways", "team"), natBody("StandardV2", "team-pip", sgwID()))
	h.mustPost(t, "updateServices", outboundBody("team", "team"))
	if rec := control(e, http.MethodGet, "/_emulator/egress?pod=10.2.0.5", ""); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "no outbound route") {
		t.Errorf("unregistered pod: %d %s", rec.Code, rec.Body)
	}
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "FullUpdate", addr("10.2.0.5", "team"))))

	rec := control(e, http.MethodGet, "/_emulator/egress?pod=10.2.0.5", "")
	var route struct{ Pod, Service, Source string }
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &route) != nil || route.Service != "team" || route.Source != source {
		t.Fatalf("route: %d %s (want service team, source %s)", rec.Code, rec.Body, source)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		_, _ = w.Write([]byte("from " + host))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	rec = control(e, http.MethodPost, "/_emulator/egress", `{"pod":"10.2.0.5","url":"http://`+ln.Addr().String()+`/"}`)
	var ans struct {
		Service, Source, Body string
		Status                int
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &ans) != nil || ans.Status != 200 || ans.Body != "from "+source || ans.Service != "team" {
		t.Fatalf("egress GET: %d %s (want the server to see %s)", rec.Code, rec.Body, source)
	}

	for _, c := range []struct {
		name, body, want string
		code             int
	}{
		{"not an IP", `{"pod":"web-0","url":"http://127.0.0.1:1/"}`, `field \"pod\"`, http.StatusBadRequest},
		{"unknown field", `{"pod":"10.2.0.5","uri":"x"}`, "uri", http.StatusBadRequest},
		{"not http", `{"pod":"10.2.0.5","url":"https://127.0.0.1:1/"}`, `field \"url\"`, http.StatusBadRequest},
		{"not loopback", `{"pod":"10.2.0.5","url":"http://10.9.9.9:80/"}`, "loopback", http.StatusBadGateway},
		{"a host name", `{"pod":"10.2.0.5","url":"http://localhost:80/"}`, "localhost", http.StatusBadGateway},
		{"no route", `{"pod":"10.2.0.6","url":"http://127.0.0.1:1/"}`, "no outbound route", http.StatusConflict},
	} {
		if rec := control(e, http.MethodPost, "/_emulator/egress", c.body); rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want %d naming %s", c.name, rec.Code, rec.Body, c.code, c.want)
		}
	}
}
