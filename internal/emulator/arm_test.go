package emulator

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestARMCommonHeadersAndAPIVersion(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"missing api-version", http.MethodGet, "/subscriptions/" + testSub + "/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/x", "", 400, "MissingApiVersionParameter"},
		{"unsupported network version", http.MethodGet, strings.Replace(netPath("rg", "loadBalancers", "x"), NetworkAPIVersion, "2023-09-01", 1), "", 400, "NoRegisteredProviderFound"},
		{"unsupported resources version", http.MethodGet, strings.Replace(rgPath("rg"), "2021-04-01", "1999-01-01", 1), "", 400, "InvalidApiVersionParameter"},
		{"newer resources version accepted", http.MethodGet, strings.Replace(rgPath("rg"), "2021-04-01", "2024-11-01", 1), "", 200, ""},
		{"unknown type", http.MethodGet, netPath("rg", "fooBars", "x"), "", 400, "InvalidResourceType"},
		{"other namespace", http.MethodGet, strings.Replace(netPath("rg", "vaults", "x"), "Microsoft.Network", "Microsoft.KeyVault", 1), "", 409, "MissingSubscriptionRegistration"},
		{"unsupported compute version", http.MethodGet, strings.Replace(netPath("rg", "virtualMachines", "x"), "Microsoft.Network", "Microsoft.Compute", 1), "", 400, "NoRegisteredProviderFound"},
		{"bad subscription id", http.MethodGet, "/subscriptions/not-a-guid/resourcegroups/rg?api-version=2021-04-01", "", 400, "InvalidSubscriptionId"},
		{"missing group", http.MethodGet, netPath("nope", "loadBalancers", "x"), "", 404, "ResourceGroupNotFound"},
		{"missing resource", http.MethodGet, netPath("rg", "loadBalancers", "x"), "", 404, "ResourceNotFound"},
		{"unknown path", http.MethodGet, "/subscriptions/" + testSub + "/foo/bar?api-version=2021-04-01", "", 404, "InvalidResourceType"},
		{"method not allowed", http.MethodPost, netPath("rg", "loadBalancers", "x"), "{}", 405, "HttpMethodNotAllowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := h.do(t, tc.method, tc.path, tc.body, nil)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if got := errCodeOf(rec); got != tc.code {
				t.Fatalf("code %q, want %q", got, tc.code)
			}
			if rec.Header().Get("x-ms-request-id") == "" || rec.Header().Get("x-ms-correlation-request-id") == "" {
				t.Fatalf("missing x-ms-request-id/x-ms-correlation-request-id: %v", rec.Header())
			}
			if tc.status >= 400 && rec.Header().Get("Content-Type") != "application/json; charset=utf-8" {
				t.Fatalf("error content type %q", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestARMWriteHeadersAndCaseInsensitivePaths(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	rec := h.do(t, http.MethodPut, "/SUBSCRIPTIONS/"+testSub+"/RESOURCEGROUPS/MyGroup?api-version=2021-04-01", `{"location":"East US"}`, nil)
	if rec.Code != http.StatusCreated {
		t.Fatalf("create group: %d %s", rec.Code, rec.Body)
	}
	// Azure's buckets: 200 writes for the principal, 15 times that for
	// the subscription.
	if got := rec.Header().Get("x-ms-ratelimit-remaining-subscription-writes"); got != "199" {
		t.Fatalf("remaining writes header = %q, want 199", got)
	}
	if got := rec.Header().Get("x-ms-ratelimit-remaining-subscription-global-writes"); got != "2999" {
		t.Fatalf("remaining global writes header = %q, want 2999", got)
	}
	g := h.mustDo(t, http.StatusOK, http.MethodGet, "/subscriptions/"+testSub+"/resourceGroups/mygroup?api-version=2021-04-01", "")
	if g["name"] != "MyGroup" || g["location"] != "eastus" || g["id"] != "/subscriptions/"+testSub+"/resourceGroups/MyGroup" {
		t.Fatalf("group rendered as %v", g)
	}
	h.mustDo(t, http.StatusCreated, http.MethodPut, "/subscriptions/"+testSub+"/resourcegroups/mygroup/providers/microsoft.network/PUBLICIPADDRESSES/Pip-A?api-version="+NetworkAPIVersion, `{"location":"eastus"}`)
	pip := h.mustDo(t, http.StatusOK, http.MethodGet, netPath("MYGROUP", "publicIpAddresses", "pip-a"), "")
	if pip["name"] != "Pip-A" || pip["type"] != "Microsoft.Network/publicIPAddresses" {
		t.Fatalf("name/type not preserved: %v", pip)
	}
	rec = h.do(t, http.MethodGet, netPath("mygroup", "publicIPAddresses", "pip-a"), "", nil)
	if rec.Header().Get("Etag") == "" || !strings.HasPrefix(rec.Header().Get("Etag"), `W/"`) {
		t.Fatalf("GET etag header %q", rec.Header().Get("Etag"))
	}
	if rec.Header().Get("x-ms-ratelimit-remaining-subscription-reads") == "" {
		t.Fatal("reads header missing on GET")
	}
}

func TestARMPreconditions(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	p := netPath("rg", "publicIPAddresses", "pip")
	body := `{"location":"eastus","sku":{"name":"Standard"}}`
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
		detail string
	}{
		{"If-Match * on missing", map[string]string{"If-Match": "*"}, 412, "PreconditionFailedResourceNotFound"},
		{"If-Match etag on missing", map[string]string{"If-Match": `W/"x"`}, 412, "PreconditionFailedResourceNotFound"},
		{"If-None-Match * creates", map[string]string{"If-None-Match": "*"}, 201, ""},
		{"If-None-Match * on existing", map[string]string{"If-None-Match": "*"}, 412, "PreconditionFailedResourceExists"},
		{"If-Match invalid", map[string]string{"If-Match": "invalid"}, 412, "PreconditionFailedEtagMismatch"},
		{"If-Match * on existing", map[string]string{"If-Match": "*"}, 200, ""},
	}
	for _, tc := range cases {
		rec := h.do(t, http.MethodPut, p, body, tc.hdr)
		if rec.Code != tc.status {
			t.Fatalf("%s: status %d want %d: %s", tc.name, rec.Code, tc.status, rec.Body)
		}
		if tc.detail != "" {
			var m struct {
				Error struct {
					Code    string
					Message string
					Details []struct{ Code, Message string }
				}
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &m)
			if m.Error.Code != "PreconditionFailed" || len(m.Error.Details) != 1 || m.Error.Details[0].Code != tc.detail {
				t.Fatalf("%s: body %s", tc.name, rec.Body)
			}
		}
	}
	// The message names the given etag in NRP's weak form (W/"invalid").
	rec := h.do(t, http.MethodPut, p, body, map[string]string{"If-Match": "invalid"})
	if !strings.Contains(rec.Body.String(), `W/\"invalid\"`) {
		t.Fatalf("412 message does not quote the weak etag: %s", rec.Body)
	}
	// The current etag matches; every write changes it.
	cur := h.do(t, http.MethodGet, p, "", nil).Header().Get("Etag")
	rec = h.do(t, http.MethodPut, p, body, map[string]string{"If-Match": cur})
	if rec.Code != 200 {
		t.Fatalf("matching If-Match: %d %s", rec.Code, rec.Body)
	}
	if next := h.do(t, http.MethodGet, p, "", nil).Header().Get("Etag"); next == cur {
		t.Fatal("etag did not change on write")
	}
	// Delete honours If-Match too.
	if rec := h.do(t, http.MethodDelete, p, "", map[string]string{"If-Match": cur}); rec.Code != 412 {
		t.Fatalf("delete with stale etag: %d", rec.Code)
	}
}

func TestARMDeleteSemantics(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	if rec := h.do(t, http.MethodDelete, netPath("rg", "loadBalancers", "none"), "", nil); rec.Code != http.StatusNoContent {
		t.Fatalf("delete missing resource: %d", rec.Code)
	}
	if rec := h.do(t, http.MethodDelete, netPath("nope", "loadBalancers", "none"), "", nil); rec.Code != 404 || errCodeOf(rec) != "ResourceGroupNotFound" {
		t.Fatalf("delete in missing group: %d %s", rec.Code, rec.Body)
	}
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus"}`)
	rec := h.do(t, http.MethodDelete, netPath("rg", "publicIPAddresses", "pip"), "", nil)
	if rec.Code != http.StatusAccepted || rec.Header().Get("Azure-AsyncOperation") == "" || rec.Header().Get("Location") == "" {
		t.Fatalf("delete: %d headers %v", rec.Code, rec.Header())
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("delete 202 has a body: %s", rec.Body)
	}
	loc := strings.TrimPrefix(rec.Header().Get("Location"), "http://example.com")
	if got := h.do(t, http.MethodGet, loc, "", nil); got.Code != http.StatusNoContent {
		t.Fatalf("operationResults after completion: %d", got.Code)
	}
	// Deleting a group deletes what it holds.
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "publicIPAddresses", "pip2"), `{"location":"eastus"}`)
	rec = h.do(t, http.MethodDelete, rgPath("rg"), "", nil)
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Header().Get("Location"), "/operationresults/") {
		t.Fatalf("group delete: %d %v", rec.Code, rec.Header())
	}
	poll := strings.TrimPrefix(rec.Header().Get("Location"), "http://example.com")
	if got := h.do(t, http.MethodGet, poll, "", nil); got.Code != http.StatusOK {
		t.Fatalf("group delete poll: %d", got.Code)
	}
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	if rec := h.do(t, http.MethodGet, netPath("rg", "publicIPAddresses", "pip2"), "", nil); rec.Code != 404 {
		t.Fatalf("resource survived its group: %d", rec.Code)
	}
	if rec := h.do(t, http.MethodDelete, rgPath("gone"), "", nil); rec.Code != 404 || errCodeOf(rec) != "ResourceGroupNotFound" {
		t.Fatalf("delete missing group: %d %s", rec.Code, rec.Body)
	}
}

func TestARMGroupDeletionTakesOperationDuration(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHandlerEnv(t, Options{Clock: fc, OperationDuration: time.Minute})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	rec := h.do(t, http.MethodDelete, rgPath("rg"), "", nil)
	poll := strings.TrimPrefix(rec.Header().Get("Location"), "http://example.com")
	if got := h.do(t, http.MethodGet, poll, "", nil); got.Code != http.StatusAccepted || got.Header().Get("Location") == "" {
		t.Fatalf("poll while deleting: %d %v", got.Code, got.Header())
	}
	g := h.mustDo(t, http.StatusOK, http.MethodGet, rgPath("rg"), "")
	if g["properties"].(map[string]any)["provisioningState"] != "Deleting" {
		t.Fatalf("group during deletion: %v", g)
	}
	if rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "p"), `{"location":"eastus"}`, nil); rec.Code != 409 || errCodeOf(rec) != "ResourceGroupBeingDeleted" {
		t.Fatalf("write into deleting group: %d %s", rec.Code, rec.Body)
	}
	fc.Step(time.Minute)
	if got := h.do(t, http.MethodGet, poll, "", nil); got.Code != http.StatusOK {
		t.Fatalf("poll after deletion: %d", got.Code)
	}
	if rec := h.do(t, http.MethodGet, rgPath("rg"), "", nil); rec.Code != 404 {
		t.Fatalf("group after deletion: %d", rec.Code)
	}
}

func TestARMOperationLifecycle(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := newHandlerEnv(t, Options{Clock: fc, OperationDuration: 30 * time.Second})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	rec := h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus","sku":{"name":"Standard"}}`, nil)
	if rec.Code != 201 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	var created map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &created)
	props := created["properties"].(map[string]any)
	if props["provisioningState"] != "Updating" || props["ipAddress"] != nil {
		t.Fatalf("create response: %v", props)
	}
	op := strings.TrimPrefix(rec.Header().Get("Azure-AsyncOperation"), "http://example.com")
	if !strings.Contains(op, "/providers/Microsoft.Network/locations/eastus/operations/") {
		t.Fatalf("operation URL %q", op)
	}
	if st := h.mustDo(t, 200, http.MethodGet, op, ""); st["status"] != "InProgress" {
		t.Fatalf("status %v", st)
	}
	got := h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "")
	if got["properties"].(map[string]any)["provisioningState"] != "Updating" {
		t.Fatalf("GET during operation: %v", got["properties"])
	}
	rec = h.do(t, http.MethodPut, netPath("rg", "publicIPAddresses", "pip"), `{"location":"eastus","sku":{"name":"Standard"}}`, nil)
	if rec.Code != 409 || errCodeOf(rec) != "AnotherOperationInProgress" || !strings.Contains(rec.Body.String(), "/operations/") {
		t.Fatalf("write during operation: %d %s", rec.Code, rec.Body)
	}
	fc.Step(30 * time.Second)
	if st := h.mustDo(t, 200, http.MethodGet, op, ""); st["status"] != "Succeeded" {
		t.Fatalf("status after duration %v", st)
	}
	got = h.mustDo(t, 200, http.MethodGet, netPath("rg", "publicIPAddresses", "pip"), "")
	gp := got["properties"].(map[string]any)
	if gp["provisioningState"] != "Succeeded" || gp["ipAddress"] == nil {
		t.Fatalf("GET after operation: %v", gp)
	}
	// Operation URLs are case-insensitive too (the id is matched as given).
	upper := strings.Replace(strings.Replace(op, "/providers/Microsoft.Network/locations/eastus/operations/", "/PROVIDERS/microsoft.network/LOCATIONS/EastUS/Operations/", 1), "/subscriptions/", "/Subscriptions/", 1)
	if st := h.mustDo(t, 200, http.MethodGet, upper, ""); st["status"] != "Succeeded" {
		t.Fatalf("case-folded operation URL: %v", st)
	}
	if rec := h.do(t, http.MethodGet, strings.Replace(op, "/eastus/", "/westus/", 1), "", nil); rec.Code != 404 {
		t.Fatalf("operation under another location: %d", rec.Code)
	}
}

func TestARMVirtualNetworkUpdateAnswers201(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	h.mustDo(t, http.StatusCreated, http.MethodPut, rgPath("rg"), `{"location":"eastus"}`)
	body := `{"location":"eastus","properties":{"addressSpace":{"addressPrefixes":["10.0.0.0/16"]}}}`
	h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "virtualNetworks", "v"), body)
	v := h.mustDo(t, http.StatusCreated, http.MethodPut, netPath("rg", "virtualNetworks", "v"), body)
	if v["properties"].(map[string]any)["provisioningState"] != "Succeeded" {
		t.Fatalf("vnet update: %v", v)
	}
}

func TestGroupValidation(t *testing.T) {
	h := newHandlerEnv(t, Options{})
	cases := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"no location", rgPath("a"), `{}`, 400, "LocationRequired"},
		{"bad json", rgPath("a"), `{"location":`, 400, "InvalidRequestContent"},
		{"bad tags", rgPath("a"), `{"location":"eastus","tags":{"a":1}}`, 400, "InvalidRequestContent"},
		{"bad name", "/subscriptions/" + testSub + "/resourcegroups/a%3Cb?api-version=2021-04-01", `{"location":"eastus"}`, 400, "InvalidResourceGroup"},
		{"create", rgPath("a"), `{"location":"eastus","tags":{"k":"v"}}`, 201, ""},
		{"same location", rgPath("a"), `{"location":"eastus"}`, 200, ""},
		{"other location", rgPath("a"), `{"location":"westus"}`, 409, "InvalidResourceGroupLocation"},
	}
	for _, tc := range cases {
		rec := h.do(t, http.MethodPut, tc.path, tc.body, nil)
		if rec.Code != tc.status || errCodeOf(rec) != tc.code {
			t.Errorf("%s: %d %q, want %d %q: %s", tc.name, rec.Code, errCodeOf(rec), tc.status, tc.code, rec.Body)
		}
	}
	list := h.mustDo(t, 200, http.MethodGet, "/subscriptions/"+testSub+"/resourcegroups?api-version=2021-04-01", "")
	if n := len(list["value"].([]any)); n != 1 {
		t.Fatalf("listed %d groups", n)
	}
	if rec := h.do(t, http.MethodHead, rgPath("a"), "", nil); rec.Code != http.StatusNoContent {
		t.Fatalf("HEAD existing: %d", rec.Code)
	}
	if rec := h.do(t, http.MethodHead, rgPath("zz"), "", nil); rec.Code != http.StatusNotFound {
		t.Fatalf("HEAD missing: %d", rec.Code)
	}
	g := h.mustDo(t, 200, http.MethodPatch, rgPath("a"), `{"tags":{"x":"y"}}`)
	if g["tags"].(map[string]any)["x"] != "y" {
		t.Fatalf("patch tags: %v", g)
	}
}
