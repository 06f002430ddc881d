package emulator

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestAppendJSONMatchesEncodingJSON: the tree encoder writes the bytes
// encoding/json writes, errors included.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, v := range []any{
		nil, true, false, "", "plain", "quote\" back\\slash <a&b> \x00\x01\b\f\n\r\t\x1f\x7f",
		"é \u2028 \u2029 😀 \xff\xfe mixed\xc3", json.Number("0"), json.Number("-12.5e+3"), json.Number(""),
		map[string]any(nil), map[string]any{}, map[string]any{"b": 1, "a": []any{nil, "x"}, "<k>": map[string]any{"z": json.Number("1")}},
		[]any(nil), []any{}, []map[string]any{{"id": "x"}, nil}, []string{"a", "<"}, []string(nil),
		rawJSON(`{"a": 1}`), 3, 2.5, map[string]string{"k": "v"}, struct{ A int }{1},
	} {
		want, werr := json.Marshal(v)
		got, gerr := appendJSON([]byte("prefix"), v)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%#v: encoding/json err=%v, appendJSON err=%v", v, werr, gerr)
			continue
		}
		if werr == nil && string(got) != "prefix"+string(want) {
			t.Errorf("%#v: appendJSON = %s; encoding/json = %s", v, got, want)
		}
	}
	for _, n := range []string{"01", "-", "1.", "1e", "+1", "1e+", ".5", "1x", "--1", "0x1"} {
		_, werr := json.Marshal(json.Number(n))
		if _, gerr := appendJSON(nil, map[string]any{"n": json.Number(n)}); gerr == nil || werr == nil {
			t.Errorf("number %q: encoding/json err=%v, appendJSON err=%v; want both to fail", n, werr, gerr)
		}
	}
}

// TestPoolWriteAnswerIsWhatReadsReturn: a pool PUT's answer is cached as
// the pool's reads; it must be what the pool is as part of its load
// balancer (rendered from the stored document), and the PUT's answer
// itself.
func TestPoolWriteAnswerIsWhatReadsReturn(t *testing.T) {
	h := seedHandler(t)
	vnet := netID("rg", "virtualNetworks", "vnet")
	path := strings.Replace(netPath("rg", "loadBalancers", "lb"), "?", "/backendAddressPools/pool?", 1)
	for i, state := range []string{"None", "Down", "None"} {
		body := `{"properties":{"loadBalancerBackendAddresses":[{"name":"a","properties":{"ipAddress":"10.0.0.4","virtualNetwork":{"id":"` + vnet + `"},"adminState":"` + state + `"}},` +
			`{"name":"b","properties":{"ipAddress":"10.0.0.5","virtualNetwork":{"id":"` + vnet + `"}}}]}}`
		put := h.mustDo(t, 200, http.MethodPut, path, body)
		got := h.mustDo(t, 200, http.MethodGet, path, "")
		lb := h.mustDo(t, 200, http.MethodGet, netPath("rg", "loadBalancers", "lb"), "")
		var inLB any
		for _, p := range lb["properties"].(map[string]any)["backendAddressPools"].([]any) {
			if p.(map[string]any)["name"] == "pool" {
				inLB = p
			}
		}
		if !reflect.DeepEqual(got, inLB) || !reflect.DeepEqual(got, put) {
			t.Fatalf("write %d: pool read\n%v\nPUT answer\n%v\nin its load balancer\n%v", i, got, put, inLB)
		}
	}
}
