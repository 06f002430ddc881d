package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

const sgwRG = "rg"

func sgwPath(suffix string) string {
	return "/subscriptions/" + testSub + "/resourceGroups/" + sgwRG + "/providers/Microsoft.Network/serviceGateways/servicegateway" + suffix + "?api-version=" + NetworkAPIVersion
}

func sgwPoolID(lb string) string {
	return netID(sgwRG, "loadBalancers", lb) + "/backendAddressPools/" + lb
}

// sgwEnv is a resource group with a dual-stack virtual network and the
// gateway "servicegateway".
func sgwEnv(t testing.TB, o Options) *handlerEnv {
	t.Helper()
	h := newHandlerEnv(t, o)
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath(sgwRG), `{"location":"eastus"}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "virtualNetworks", "vnet"),
		`{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/8","fd00::/48"]},"subnets":[{"name":"s","properties":{"addressPrefixes":["10.0.0.0/24","fd00::/64"]}}]}}`)
	rec := h.do(t, http.MethodPut, sgwPath(""), `{"location":"eastus","sku":{"name":"Standard","tier":"Regional"},"properties":{"virtualNetwork":{"id":"`+
		netID(sgwRG, "virtualNetworks", "vnet")+`"},"routeTargetAddress":{"subnet":{"id":"`+netID(sgwRG, "virtualNetworks", "vnet")+`/subnets/s"},"privateIPAddress":"10.0.0.4","privateIPAllocationMethod":"Static"}}}`, nil)
	if rec.Code != http.StatusCreated || rec.Header().Get("Azure-Asyncoperation") == "" {
		t.Fatalf("create gateway: %d %s", rec.Code, rec.Body)
	}
	return h
}

// serviceLB creates public IP <name>-pip (StandardV2) and load balancer
// <name> of SKU Service with one frontend and the empty pool <name>.
func serviceLB(t testing.TB, h *handlerEnv, name string) {
	t.Helper()
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", name+"-pip"),
		`{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Static"}}`)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "loadBalancers", name), serviceLBBody(name, ""))
}

func serviceLBBody(name, extra string) string {
	lb := netID(sgwRG, "loadBalancers", name)
	return `{"location":"eastus","sku":{"name":"Service","tier":"Regional"},"properties":{"scope":"Public",` +
		`"frontendIPConfigurations":[{"name":"frontend","properties":{"publicIPAddress":{"id":"` + netID(sgwRG, "publicIPAddresses", name+"-pip") + `"}}}],` +
		`"backendAddressPools":[{"name":"` + name + `","properties":{}}],` +
		`"loadBalancingRules":[{"name":"rule-tcp-80","properties":{"frontendIPConfiguration":{"id":"` + lb + `/frontendIPConfigurations/frontend"},` +
		`"backendAddressPool":{"id":"` + lb + `/backendAddressPools/` + name + `"},"protocol":"Tcp","frontendPort":80,"backendPort":8080}}]` + extra + `}}`
}

func registerBody(action string, names ...string) string {
	var reqs []string
	for _, n := range names {
		reqs = append(reqs, `{"isDelete":false,"service":{"name":"`+n+`","properties":{"serviceType":"Inbound","isDefault":false,"loadBalancerBackendPools":[{"id":"`+
			sgwPoolID(n)+`","name":"`+n+`","properties":{"virtualNetwork":{"id":"`+netID(sgwRG, "virtualNetworks", "vnet")+`"}}}]}}}`)
	}
	return `{"action":"` + action + `","serviceRequests":[` + strings.Join(reqs, ",") + `]}`
}

func (h *handlerEnv) post(t *testing.T, action, body string) (int, string) {
	t.Helper()
	rec := h.do(t, http.MethodPost, sgwPath("/"+action), body, nil)
	return rec.Code, errCodeOf(rec)
}

func (h *handlerEnv) mustPost(t *testing.T, action, body string) {
	t.Helper()
	if code, ec := h.post(t, action, body); code != http.StatusOK {
		t.Fatalf("%s: %d %s; body %s", action, code, ec, body)
	}
}

// locations returns GET addressLocations as location -> address -> services.
func (h *handlerEnv) locations(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	path := sgwPath("/addressLocations")
	for path != "" {
		rec := h.do(t, http.MethodGet, path, "", nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET addressLocations: %d %s", rec.Code, rec.Body)
		}
		var page struct {
			Value []struct {
				AddressLocation string `json:"addressLocation"`
				Addresses       []struct {
					Address  string   `json:"address"`
					Services []string `json:"services"`
				} `json:"addresses"`
			} `json:"value"`
			NextLink string `json:"nextLink"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Value {
			m := map[string]string{}
			for _, a := range l.Addresses {
				m[a.Address] = strings.Join(a.Services, ",")
			}
			out[l.AddressLocation] = m
		}
		path = strings.TrimPrefix(page.NextLink, "http://example.com")
	}
	return out
}

func locBody(topAction string, locs ...string) string {
	return `{"action":"` + topAction + `","addressLocations":[` + strings.Join(locs, ",") + `]}`
}

func loc(ip, action string, addrs ...string) string {
	return `{"addressLocation":"` + ip + `","addressUpdateAction":"` + action + `","addresses":[` + strings.Join(addrs, ",") + `]}`
}

func addr(ip string, services ...string) string {
	q := make([]string, len(services))
	for i, s := range services {
		q[i] = `"` + s + `"`
	}
	return `{"address":"` + ip + `","services":[` + strings.Join(q, ",") + `]}`
}

func TestServiceGatewayResource(t *testing.T) {
	h := sgwEnv(t, Options{})
	rec := h.do(t, http.MethodGet, sgwPath(""), "", nil)
	if rec.Code != http.StatusOK || rec.Header().Get("Etag") == "" {
		t.Fatalf("GET: %d etag %q", rec.Code, rec.Header().Get("Etag"))
	}
	body := rec.Body.String()
	if !strings.Contains(body, `"services":[]`) || strings.Contains(body, "resourceGuid") {
		t.Errorf("body %s: want services [] and no resourceGuid", body)
	}
	if rec := h.do(t, http.MethodGet, sgwPath("/services"), "", nil); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"value":[]}` {
		t.Errorf("GET services: %d %s", rec.Code, rec.Body)
	}
	for _, p := range []string{"/services", "/addressLocations", "/updateServices", "/updateAddressLocations"} {
		path := strings.Replace(sgwPath(p), "servicegateway", "missing", 1)
		method := http.MethodGet
		if strings.HasPrefix(p, "/update") {
			method = http.MethodPost
		}
		rec := h.do(t, method, path, `{"action":"PartialUpdate"}`, nil)
		if rec.Code != http.StatusNotFound || errCodeOf(rec) != "ResourceNotFound" || rec.Header().Get("X-Ms-Failure-Cause") != "gateway" {
			t.Errorf("%s %s on a missing gateway: %d %s %v", method, p, rec.Code, rec.Body, rec.Header())
		}
	}
	if rec := h.do(t, http.MethodPut, strings.Replace(sgwPath(""), "servicegateway", "bad_name", 1), `{"location":"eastus"}`, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("PUT with a name outside ^[a-zA-Z0-9-]*$: %d", rec.Code)
	}
}

func TestServiceGatewayUpdateServices(t *testing.T) {
	h := sgwEnv(t, Options{})
	serviceLB(t, h, "uid1")
	serviceLB(t, h, "uid2")
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "uid1"))
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "uid2"))
	got := h.mustDo(t, http.StatusOK, http.MethodGet, sgwPath("/services"), "")
	if n := len(got["value"].([]any)); n != 2 {
		t.Fatalf("services: %v", got)
	}
	if gw := h.do(t, http.MethodGet, sgwPath(""), "", nil).Body.String(); !strings.Contains(gw, `"name":"uid1"`) {
		t.Errorf("the gateway's properties.services does not list uid1: %s", gw)
	}
	// FullUpdate replaces the whole set.
	h.mustPost(t, "updateServices", registerBody("FullUpdate", "uid2"))
	got = h.mustDo(t, http.StatusOK, http.MethodGet, sgwPath("/services"), "")
	if v := got["value"].([]any); len(v) != 1 || v[0].(map[string]any)["name"] != "uid2" {
		t.Fatalf("after FullUpdate: %v", got)
	}
	// Deleting an unknown service is a no-op.
	h.mustPost(t, "updateServices", `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"nobody"}}]}`)

	// A service named by an address cannot be deleted.
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "FullUpdate", addr("10.2.0.5", "uid2"))))
	if code, ec := h.post(t, "updateServices", `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"uid2"}}]}`); code != http.StatusBadRequest || ec != codeOverlayMappings {
		t.Fatalf("delete with mappings: %d %s", code, ec)
	}
	if code, ec := h.post(t, "updateServices", registerBody("FullUpdate", "uid1")); code != http.StatusBadRequest || ec != codeOverlayMappings {
		t.Fatalf("FullUpdate dropping a mapped service: %d %s", code, ec)
	}
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.5"))))
	h.mustPost(t, "updateServices", `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"uid2"}}]}`)

	natPIP := `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Static"}}`
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "nat-pip"), natPIP)
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "natGateways", "default-natgw"),
		`{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIpAddresses":[{"id":"`+netID(sgwRG, "publicIPAddresses", "nat-pip")+`"}],"serviceGateway":{"id":"`+netID(sgwRG, "serviceGateways", "servicegateway")+`"}}}`)
	outbound := func(name string, isDefault bool) string {
		return fmt.Sprintf(`{"action":"PartialUpdate","serviceRequests":[{"service":{"name":%q,"properties":{"serviceType":"Outbound","isDefault":%t,"publicNatGatewayId":%q}}}]}`,
			name, isDefault, netID(sgwRG, "natGateways", "default-natgw"))
	}
	h.mustPost(t, "updateServices", outbound("default-natgw", true))
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "uid1"))

	bad := []struct {
		name, body, code string
	}{
		{"no action", `{"serviceRequests":[]}`, "InvalidRequestFormat"},
		{"bad action", `{"action":"Merge","serviceRequests":[]}`, "InvalidRequestFormat"},
		{"missing pool", strings.Replace(registerBody("PartialUpdate", "uid1"), "backendAddressPools/uid1", "backendAddressPools/none", 1), "InvalidResourceReference"},
		{"duplicate name", `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"a"}},{"isDelete":true,"service":{"name":"A"}}]}`, codeDuplicateService},
		{"bad name", `{"action":"PartialUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"a b"}}]}`, codeInvalidServiceConfig},
		{"no type", `{"action":"PartialUpdate","serviceRequests":[{"service":{"name":"x","properties":{}}}]}`, "InvalidRequestFormat"},
		{"outbound without NAT", `{"action":"PartialUpdate","serviceRequests":[{"service":{"name":"x","properties":{"serviceType":"Outbound"}}}]}`, codeInvalidServiceConfig},
		{"second default", outbound("other", true), codeMultipleDefaults},
		{"pool used twice", strings.Replace(registerBody("PartialUpdate", "uid1"), `"name":"uid1","properties":{"serviceType"`, `"name":"copy","properties":{"serviceType"`, 1), codePoolInUse},
		{"vnet mismatch", strings.Replace(registerBody("PartialUpdate", "uid1"), `virtualNetworks/vnet"}}}]`, `virtualNetworks/other"}}}]`, 1), "InvalidResourceReference"},
	}
	for _, b := range bad {
		if code, ec := h.post(t, "updateServices", b.body); code != http.StatusBadRequest || ec != b.code {
			t.Errorf("%s: %d %q, want 400 %q", b.name, code, ec, b.code)
		}
	}
	// A Standard SKU load balancer's pool is refused.
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "loadBalancers", "std"),
		`{"location":"eastus","sku":{"name":"Standard"},"properties":{"backendAddressPools":[{"name":"std"}]}}`)
	if code, ec := h.post(t, "updateServices", registerBody("PartialUpdate", "std")); code != http.StatusBadRequest || ec != codePoolNotServiceSKU {
		t.Errorf("Standard pool: %d %s", code, ec)
	}
}

// An updateServices with more service requests than the configured
// maximum is refused whole: nothing of it is applied.
func TestServiceGatewayMaxServicesPerUpdate(t *testing.T) {
	h := sgwEnv(t, Options{ServiceGatewayMaxServicesPerUpdate: 2})
	for _, n := range []string{"a", "b", "c"} {
		serviceLB(t, h, n)
	}
	if code, ec := h.post(t, "updateServices", registerBody("PartialUpdate", "a", "b", "c")); code != http.StatusBadRequest || ec != codeTooManyServices {
		t.Fatalf("3 services with a maximum of 2: %d %s, want 400 %s", code, ec, codeTooManyServices)
	}
	if got := h.serviceNames(t); len(got) != 0 {
		t.Fatalf("a refused request registered %v", got)
	}
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "a", "b"))
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "c"))
	if got := h.serviceNames(t); strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("services %v, want a,b,c", got)
	}
	if err := (Options{ServiceGatewayMaxServicesPerUpdate: -1}).withDefaults().validate(); err == nil {
		t.Error("a negative maximum is accepted")
	}
}

// serviceNames lists the names GET services returns.
func (h *handlerEnv) serviceNames(t *testing.T) []string {
	t.Helper()
	rec := h.do(t, http.MethodGet, sgwPath("/services"), "", nil)
	var page struct {
		Value []struct {
			Name string `json:"name"`
		} `json:"value"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("GET services: %d %s", rec.Code, rec.Body)
	}
	var out []string
	for _, v := range page.Value {
		out = append(out, v.Name)
	}
	return out
}

func TestServiceGatewayUpdateAddressLocations(t *testing.T) {
	h := sgwEnv(t, Options{})
	serviceLB(t, h, "a")
	serviceLB(t, h, "b")
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "a", "b"))

	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate",
		loc("10.1.0.4", "FullUpdate", addr("10.2.0.5", "a"), addr("10.2.0.6", "a", "b")),
		loc("fd00::4", "FullUpdate", addr("fd00:2::5", "b"))))
	want := map[string]map[string]string{
		"10.1.0.4": {"10.2.0.5": "a", "10.2.0.6": "a,b"},
		"FD00::4":  {"FD00:2::5": "b"}, // NRP renders IPv6 upper-case
	}
	assertLocations(t, h, want)

	// Partial per address: replace one address's services, remove another.
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate",
		loc("10.1.0.4", "PartialUpdate", addr("10.2.0.5", "b"), addr("10.2.0.6"))))
	want["10.1.0.4"] = map[string]string{"10.2.0.5": "b"}
	assertLocations(t, h, want)

	// A location given upper-case is the same location; Partial with no
	// addresses deletes it.
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("FD00:0::4", "PartialUpdate")))
	delete(want, "FD00::4")
	assertLocations(t, h, want)

	// Location FullUpdate replaces its addresses.
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "FullUpdate", addr("10.2.0.7", "a"))))
	want["10.1.0.4"] = map[string]string{"10.2.0.7": "a"}
	assertLocations(t, h, want)

	// Moving an address between locations in one request is fine.
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate",
		loc("10.1.0.4", "PartialUpdate", addr("10.2.0.7")), loc("10.1.0.9", "FullUpdate", addr("10.2.0.7", "a"))))
	want = map[string]map[string]string{"10.1.0.4": {}, "10.1.0.9": {"10.2.0.7": "a"}}
	assertLocations(t, h, want)

	// Top-level FullUpdate removes the locations it does not list.
	h.mustPost(t, "updateAddressLocations", locBody("FullUpdate", loc("10.1.0.5", "FullUpdate", addr("10.2.0.8", "b"))))
	assertLocations(t, h, map[string]map[string]string{"10.1.0.5": {"10.2.0.8": "b"}})

	bad := []struct {
		name, body, code string
	}{
		{"no action", `{"addressLocations":[]}`, "InvalidRequestFormat"},
		{"no location action", `{"action":"PartialUpdate","addressLocations":[{"addressLocation":"10.1.0.4","addresses":[]}]}`, "InvalidRequestFormat"},
		{"no addresses array", `{"action":"PartialUpdate","addressLocations":[{"addressLocation":"10.1.0.4","addressUpdateAction":"PartialUpdate"}]}`, "InvalidRequestFormat"},
		{"no services array", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", `{"address":"10.2.0.1"}`)), "InvalidRequestFormat"},
		{"bad location", locBody("PartialUpdate", loc("node-1", "PartialUpdate")), codeInvalidAddress},
		{"bad address", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.300", "a"))), codeInvalidAddress},
		{"family mismatch", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("fd00:2::1", "a"))), codeAddressFamily},
		{"duplicate location", locBody("PartialUpdate", loc("fd00::4", "PartialUpdate"), loc("FD00:0:0::4", "PartialUpdate")), codeDuplicateLocations},
		{"duplicate address", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.1", "a"), addr("10.2.0.1", "b"))), codeDuplicateAddress},
		{"unknown service", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.1", "nobody"))), codeUnknownService},
		{"service twice", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.1", "a", "a"))), codeDuplicateService},
		{"address in two locations", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.8", "a"))), codeAddressInTwo},
		{"address twice in request", locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.1", "a")), loc("10.1.0.6", "PartialUpdate", addr("10.2.0.1", "a"))), codeAddressInTwo},
	}
	for _, b := range bad {
		if code, ec := h.post(t, "updateAddressLocations", b.body); code != http.StatusBadRequest || ec != b.code {
			t.Errorf("%s: %d %q, want 400 %q", b.name, code, ec, b.code)
		}
	}
	// Nothing of the rejected requests was applied.
	assertLocations(t, h, map[string]map[string]string{"10.1.0.5": {"10.2.0.8": "b"}})
}

func assertLocations(t *testing.T, h *handlerEnv, want map[string]map[string]string) {
	t.Helper()
	got := h.locations(t)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("address locations\n got %v\nwant %v", got, want)
	}
}

func TestServiceGatewayPaging(t *testing.T) {
	h := sgwEnv(t, Options{ServiceGatewayPageSize: 2})
	var names []string
	for i := range 5 {
		n := fmt.Sprintf("svc%d", i)
		serviceLB(t, h, n)
		names = append(names, n)
	}
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", names...))
	var locs []string
	for i := range 5 {
		locs = append(locs, loc(fmt.Sprintf("10.1.0.%d", i+1), "FullUpdate", addr(fmt.Sprintf("10.2.0.%d", i+1), "svc0")))
	}
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", locs...))

	var seen []string
	pages := 0
	path := sgwPath("/services")
	for path != "" {
		got := h.mustDo(t, http.StatusOK, http.MethodGet, path, "")
		pages++
		for _, v := range got["value"].([]any) {
			seen = append(seen, v.(map[string]any)["name"].(string))
		}
		next, _ := got["nextLink"].(string)
		path = strings.TrimPrefix(next, "http://example.com")
	}
	if pages != 3 || strings.Join(seen, ",") != strings.Join(names, ",") {
		t.Errorf("services over %d pages: %v", pages, seen)
	}
	if n := len(h.locations(t)); n != 5 {
		t.Errorf("address locations across pages: %d, want 5", n)
	}
	if rec := h.do(t, http.MethodGet, sgwPath("/services")+"&$skiptoken=x", "", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("bad skip token: %d", rec.Code)
	}
}

func TestServiceGatewayPOSTModes(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := sgwEnv(t, Options{Clock: clk, OperationDuration: 10 * time.Second})
	serviceLB(t, h, "a")
	clk.Step(time.Minute)

	// Default: NRP's synchronous 200 with polling headers and no body.
	rec := h.do(t, http.MethodPost, sgwPath("/updateServices"), registerBody("PartialUpdate", "a"), nil)
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Azure-Asyncoperation") == "" || rec.Header().Get("Location") == "" {
		t.Fatalf("200 mode: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	// The operation is already done: the next POST is not refused.
	h.mustPost(t, "updateAddressLocations", locBody("PartialUpdate", loc("10.1.0.4", "FullUpdate", addr("10.2.0.5", "a"))))

	// 202 mode: the operation runs for OperationDuration.
	if err := h.emu.SetServiceGatewayPOSTStatus(SGWPostAccepted); err != nil {
		t.Fatal(err)
	}
	rec = h.do(t, http.MethodPost, sgwPath("/updateAddressLocations"), locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.6", "a"))), nil)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("202 mode: %d %s", rec.Code, rec.Body)
	}
	async, location := rec.Header().Get("Azure-Asyncoperation"), rec.Header().Get("Location")
	if code, ec := h.post(t, "updateAddressLocations", locBody("PartialUpdate")); code != http.StatusConflict || ec != "AnotherOperationInProgress" {
		t.Errorf("POST during an operation: %d %s", code, ec)
	}
	if st := h.mustDo(t, http.StatusOK, http.MethodGet, strings.TrimPrefix(async, "http://example.com"), ""); st["status"] != "InProgress" {
		t.Errorf("operation: %v", st)
	}
	clk.Step(10 * time.Second)
	if st := h.mustDo(t, http.StatusOK, http.MethodGet, strings.TrimPrefix(async, "http://example.com"), ""); st["status"] != "Succeeded" {
		t.Errorf("operation: %v", st)
	}
	if rec := h.do(t, http.MethodGet, strings.TrimPrefix(location, "http://example.com"), "", nil); rec.Code != http.StatusNoContent {
		t.Errorf("Location final GET: %d", rec.Code)
	}
	assertLocations(t, h, map[string]map[string]string{"10.1.0.4": {"10.2.0.5": "a", "10.2.0.6": "a"}})

	// Failure mode: the operation ends Failed and nothing changes.
	if _, err := h.emu.AddFault(Fault{Method: http.MethodPost, PathRegex: "updateAddressLocations$", LROResult: resultFailed, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if err := h.emu.SetServiceGatewayPOSTStatus(SGWPostOK); err != nil {
		t.Fatal(err)
	}
	rec = h.do(t, http.MethodPost, sgwPath("/updateAddressLocations"), locBody("PartialUpdate", loc("10.1.0.4", "PartialUpdate", addr("10.2.0.7", "a"))), nil)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("failing operation answers 202 whatever the mode: %d", rec.Code)
	}
	clk.Step(10 * time.Second)
	if st := h.mustDo(t, http.StatusOK, http.MethodGet, strings.TrimPrefix(rec.Header().Get("Azure-Asyncoperation"), "http://example.com"), ""); st["status"] != "Failed" {
		t.Errorf("operation: %v", st)
	}
	assertLocations(t, h, map[string]map[string]string{"10.1.0.4": {"10.2.0.5": "a", "10.2.0.6": "a"}})

	// The request log keeps the POST bodies, in order.
	var bodies []string
	for _, r := range h.emu.Requests() {
		if r.Method == http.MethodPost && strings.Contains(r.Path, "/serviceGateways/") {
			bodies = append(bodies, r.Body)
		}
	}
	if len(bodies) != 5 || !strings.Contains(bodies[4], "10.2.0.7") {
		t.Errorf("logged POST bodies: %q", bodies)
	}
}

func TestServiceGatewayCrossResourceRules(t *testing.T) {
	h := sgwEnv(t, Options{})
	serviceLB(t, h, "a")
	h.mustPost(t, "updateServices", registerBody("PartialUpdate", "a"))
	lb := netPath(sgwRG, "loadBalancers", "a")
	if rec := h.do(t, http.MethodDelete, lb, "", nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeLBInUseByGateway {
		t.Errorf("delete a load balancer whose pool a service uses: %d %s", rec.Code, rec.Body)
	}
	poolPath := strings.Replace(lb, "?", "/backendAddressPools/a?", 1)
	if rec := h.do(t, http.MethodDelete, poolPath, "", nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeLBInUseByGateway {
		t.Errorf("delete the pool: %d %s", rec.Code, rec.Body)
	}
	noPool := strings.Replace(serviceLBBody("a", ""), `"backendAddressPools":[{"name":"a","properties":{}}],`, "", 1)
	noPool = strings.Replace(noPool, `"backendAddressPool":{"id":"`+sgwPoolID("a")+`"},`, "", 1)
	if rec := h.do(t, http.MethodPut, lb, noPool, nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != codeLBInUseByGateway {
		t.Errorf("PUT without the pool: %d %s", rec.Code, rec.Body)
	}
	// An LB PUT with the pool still empty is fine and leaves the service.
	h.mustDo(t, http.StatusOK, http.MethodPut, lb, serviceLBBody("a", ""))
	if rec := h.do(t, http.MethodDelete, netPath(sgwRG, "publicIPAddresses", "a-pip"), "", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("delete an attached public IP: %d", rec.Code)
	}
	// Unlink, then the load balancer can go.
	h.mustPost(t, "updateServices", `{"action":"PartialUpdate","serviceRequests":[{"service":{"name":"a","properties":{"serviceType":"Inbound","loadBalancerBackendPools":[]}}}]}`)
	if rec := h.do(t, http.MethodDelete, lb, "", nil); rec.Code != http.StatusAccepted {
		t.Errorf("delete after unlinking: %d %s", rec.Code, rec.Body)
	}
}

func TestServiceSKULoadBalancer(t *testing.T) {
	h := sgwEnv(t, Options{})
	serviceLB(t, h, "a")
	lb := netPath(sgwRG, "loadBalancers", "a")
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "std-pip"),
		`{"location":"eastus","sku":{"name":"Standard"},"properties":{"publicIPAllocationMethod":"Static"}}`)
	lbID := netID(sgwRG, "loadBalancers", "a")
	bad := []struct {
		name, body, code string
	}{
		{"sku case", strings.Replace(serviceLBBody("a", ""), `"Service"`, `"service"`, 1), "InvalidRequestFormat"},
		{"no scope", strings.Replace(serviceLBBody("a", ""), `"scope":"Public",`, "", 1), "ServiceSkuLoadBalancerScopeRequired"},
		{"private scope", strings.Replace(serviceLBBody("a", ""), `"scope":"Public"`, `"scope":"Private"`, 1), "ServiceSkuLoadBalancerScopeMismatch"},
		{"Standard public IP", strings.Replace(serviceLBBody("a", ""), "a-pip", "std-pip", 1), "PublicIPAndLBSkuDoNotMatch"},
		{"probe", serviceLBBody("a", `,"probes":[{"name":"p","properties":{"protocol":"Tcp","port":80}}]`), "ProbesNotSupportedOnServiceSkuLoadBalancer"},
		{"backend addresses", strings.Replace(serviceLBBody("a", ""), `{"name":"a","properties":{}}`, `{"name":"a","properties":{"loadBalancerBackendAddresses":[{"name":"x","properties":{"ipAddress":"10.0.0.9"}}]}}`, 1), "BackendAddressesNotSupportedOnServiceSkuLoadBalancer"},
		{"same backend port twice", strings.Replace(serviceLBBody("a", ""), `"frontendPort":80,"backendPort":8080}}]`,
			`"frontendPort":80,"backendPort":8080}},{"name":"rule-tcp-81","properties":{"frontendIPConfiguration":{"id":"`+lbID+`/frontendIPConfigurations/frontend"},"backendAddressPool":{"id":"`+sgwPoolID("a")+`"},"protocol":"Tcp","frontendPort":81,"backendPort":8080}}]`, 1), "RulesUseSameBackendPortProtocolAndPool"},
	}
	for _, b := range bad {
		if rec := h.do(t, http.MethodPut, lb, b.body, nil); rec.Code != http.StatusBadRequest || errCodeOf(rec) != b.code {
			t.Errorf("%s: %d %s, want %s", b.name, rec.Code, rec.Body, b.code)
		}
	}
	if rec := h.do(t, http.MethodPut, netPath(sgwRG, "publicIPAddresses", "dyn"), `{"location":"eastus","sku":{"name":"StandardV2"},"properties":{"publicIPAllocationMethod":"Dynamic"}}`, nil); rec.Code != http.StatusBadRequest {
		t.Errorf("StandardV2 Dynamic public IP: %d", rec.Code)
	}
	// Nor can a NIC's ip configuration join the pool (NIC-based
	// membership): its members come from the gateway.
	nic := `{"location":"eastus","properties":{"ipConfigurations":[{"name":"ipconfig1","properties":{"subnet":{"id":"` +
		netID(sgwRG, "virtualNetworks", "vnet") + `/subnets/s"},"loadBalancerBackendAddressPools":[{"id":"` + sgwPoolID("a") + `"}]}}]}}`
	if rec := h.do(t, http.MethodPut, netPath(sgwRG, "networkInterfaces", "nic-a"), nic, nil); rec.Code != http.StatusBadRequest ||
		errCodeOf(rec) != "BackendAddressesNotSupportedOnServiceSkuLoadBalancer" {
		t.Errorf("NIC joining a Service SKU pool: %d %s", rec.Code, rec.Body)
	}
}

func TestServiceGatewayControlAPI(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	settings := func(rec interface{ Bytes() []byte }) (int, int) {
		var s struct{ PostStatus, PageSize int }
		_ = json.Unmarshal(rec.Bytes(), &s)
		return s.PostStatus, s.PageSize
	}
	rec := h.do(t, http.MethodPut, "/_emulator/servicegateway", `{"postStatus":202,"pageSize":3}`, nil)
	if st, ps := settings(rec.Body); rec.Code != http.StatusOK || st != 202 || ps != 3 {
		t.Fatalf("PUT: %d %s", rec.Code, rec.Body)
	}
	for _, body := range []string{`{"postStatus":201}`, `{"pageSize":0}`, `{"postStatus":200,"pageSize":-1}`, `{"mode":1}`} {
		if rec := h.do(t, http.MethodPut, "/_emulator/servicegateway", body, nil); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d", body, rec.Code)
		}
	}
	if st, ps := settings(h.do(t, http.MethodGet, "/_emulator/servicegateway", "", nil).Body); st != 202 || ps != 3 {
		t.Errorf("a rejected PUT changed the settings: %d %d", st, ps)
	}
}

func FuzzServiceGatewayPOST(f *testing.F) {
	f.Add(true, registerBody("PartialUpdate", "a"))
	f.Add(true, `{"action":"FullUpdate","serviceRequests":[{"isDelete":true,"service":{"name":"a"}},{"service":{"name":"b","properties":{"serviceType":"Outbound","isDefault":true,"publicNatGatewayId":7}}}]}`)
	f.Add(false, locBody("PartialUpdate", loc("10.1.0.4", "FullUpdate", addr("10.2.0.5", "a")), loc("fd00::4", "PartialUpdate")))
	f.Add(false, `{"action":"FullUpdate","addressLocations":[{"addressLocation":"::ffff:10.0.0.1","addressUpdateAction":"PartialUpdate","addresses":[{"address":"10.0.0.1%eth0","services":[null]}]}]}`)
	f.Add(false, `{"action":"PartialUpdate","addressLocations":null}`)
	h := sgwEnv(f, Options{})
	serviceLB(f, h, "a")
	f.Fuzz(func(t *testing.T, services bool, body string) {
		action := "/updateAddressLocations"
		if services {
			action = "/updateServices"
		}
		checkNoServerError(t, http.MethodPost, sgwPath(action), body, h)
		checkNoServerError(t, http.MethodGet, sgwPath("/services"), "", h)
		checkNoServerError(t, http.MethodGet, sgwPath("/addressLocations"), "", h)
		checkNoServerError(t, http.MethodGet, sgwPath(""), "", h)
	})
}
