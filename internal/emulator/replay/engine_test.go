package replay

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestCompareKeys(t *testing.T) {
	cases := []struct {
		name, want, got string
		ignore          []string
		problems        int
	}{
		{"same keys other values", `{"a":1,"b":{"c":"x"}}`, `{"a":2,"b":{"c":"y"}}`, nil, 0},
		{"missing nested", `{"a":1,"b":{"c":"x"}}`, `{"a":1,"b":{}}`, nil, 1},
		{"extra key", `{"a":1}`, `{"a":1,"z":0}`, nil, 1},
		{"both", `{"a":1}`, `{"z":1}`, nil, 2},
		{"array union", `{"v":[{"a":1},{"b":2}]}`, `{"v":[{"a":1,"b":2}]}`, nil, 0},
		{"array element key missing", `{"v":[{"a":1,"b":2}]}`, `{"v":[{"a":1}]}`, nil, 1},
		{"empty arrays", `{"v":[]}`, `{"v":[]}`, nil, 0},
		{"empty vs body", ``, `{"a":1}`, nil, 1},
		{"body vs empty", `{"a":1}`, ``, nil, 1},
		{"both empty", ``, ``, nil, 0},
		{"not json", `{"a":1}`, `<html>`, nil, 1},
		{"ignored subtree", `{"a":1,"tags":{"x":"y"}}`, `{"a":1}`, []string{"tags"}, 0},
	}
	for _, tc := range cases {
		if got := CompareKeys([]byte(tc.want), []byte(tc.got), tc.ignore); len(got) != tc.problems {
			t.Errorf("%s: %v", tc.name, got)
		}
	}
}

const cassetteYAML = `---
version: 2
interactions:
    - id: 0
      request:
        body: '{"location":"eastus"}'
        headers: {}
        url: https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p?api-version=2025-05-01
        method: PUT
      response:
        body: '{"name":"p","etag":"W/\"00000000-0000-0000-0000-000000000000\"","properties":{"provisioningState":"Updating"}}'
        headers:
            Azure-Asyncoperation:
                - https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Network/locations/eastus/operations/00000000-0000-0000-0000-000000000000?api-version=2025-05-01
        code: 201
    - id: 1
      request:
        body: ""
        headers: {}
        url: https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Network/locations/eastus/operations/00000000-0000-0000-0000-000000000000?api-version=2025-05-01
        method: GET
      response:
        body: '{"status":"Succeeded"}'
        headers: {}
        code: 200
    - id: 2
      request:
        body: '{"location":"eastus"}'
        headers:
            If-Match:
                - W/"00000000-0000-0000-0000-000000000000"
        url: https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p?api-version=2025-05-01
        method: PUT
      response:
        body: '{"name":"p","etag":"x","properties":{"provisioningState":"Succeeded"}}'
        headers:
            Azure-Asyncoperation:
                - https://management.azure.com/op
        code: 200
    - id: 3
      request:
        body: '{"location":"eastus"}'
        headers:
            If-Match:
                - invalid
        url: https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p?api-version=2025-05-01
        method: PUT
      response:
        body: '{"error":{"code":"PreconditionFailed","message":"m"}}'
        headers: {}
        code: 412
`

// scripted is a fake ARM that records what the engine sent.
type scripted struct {
	mu      sync.Mutex
	seen    []string
	ifMatch []string
	wrong   bool // answer interaction 3 with 200 instead of 412
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.seen = append(s.seen, r.Method+" "+r.URL.Path)
	s.ifMatch = append(s.ifMatch, r.Header.Get("If-Match"))
	wrong := s.wrong
	s.mu.Unlock()
	switch {
	case strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token"):
		_, _ = fmt.Fprint(w, `{"access_token":"t","token_type":"Bearer","expires_in":3599}`)
	case strings.HasPrefix(r.URL.Path, "/my-op/"):
		_, _ = fmt.Fprint(w, `{"status":"Succeeded"}`)
	case r.Method == http.MethodPut && r.Header.Get("If-Match") == "invalid" && !wrong:
		w.WriteHeader(412)
		_, _ = fmt.Fprint(w, `{"error":{"code":"PreconditionFailed","message":"m"}}`)
	case r.Method == http.MethodPut && r.Header.Get("If-Match") == "":
		w.Header().Set("Azure-AsyncOperation", "/my-op/1") // relative: resolved against the request
		w.WriteHeader(201)
		_, _ = fmt.Fprint(w, `{"name":"p","etag":"W/\"live-etag\"","properties":{"provisioningState":"Updating"}}`)
	default:
		w.Header().Set("Azure-AsyncOperation", "http://"+r.Host+"/my-op/2")
		_, _ = fmt.Fprint(w, `{"name":"p","etag":"W/\"live-etag-2\"","properties":{"provisioningState":"Succeeded"}}`)
	}
}

func TestEngineRewritesAndDetectsMismatches(t *testing.T) {
	c, err := Parse("fake.yaml", []byte(cassetteYAML))
	if err != nil {
		t.Fatal(err)
	}
	for _, wrong := range []bool{false, true} {
		s := &scripted{wrong: wrong}
		srv := httptest.NewServer(s)
		res, err := Run(context.Background(), c, Target{BaseURL: srv.URL, Client: srv.Client(), TenantID: "t", ClientID: "c", ClientSecret: "s"}, Options{})
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != 4 {
			t.Fatalf("%d results", len(res))
		}
		// The poll went to the target's own operation URL.
		if s.seen[2] != "GET /my-op/1" {
			t.Fatalf("poll sent to %q", s.seen[2])
		}
		// The zeroed If-Match became the live etag; "invalid" stayed.
		if s.ifMatch[3] != `W/"live-etag"` || s.ifMatch[4] != "invalid" {
			t.Fatalf("If-Match sent: %q", s.ifMatch)
		}
		for i := 0; i < 3; i++ {
			if !res[i].Passed() {
				t.Fatalf("interaction %d: %s", i, res[i])
			}
		}
		if res[3].Passed() == wrong {
			t.Fatalf("wrong=%v: interaction 3 passed=%v: %s", wrong, res[3].Passed(), res[3])
		}
	}
}

func TestEngineSeedsPreexistingResources(t *testing.T) {
	y := strings.Replace(strings.Split(cassetteYAML, "    - id: 1")[0], "code: 201", "code: 200", 1)
	c, err := Parse("seed.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	res, err := Run(context.Background(), c, Target{BaseURL: srv.URL, Client: srv.Client()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Seed PUT (201) then the recorded PUT, which the fake answers 201 again:
	// the engine reports the mismatch but marks the seed.
	if !res[0].Seeded || len(s.seen) != 3 {
		t.Fatalf("seeded=%v requests %v", res[0].Seeded, s.seen)
	}
	res, _ = Run(context.Background(), c, Target{BaseURL: srv.URL, Client: srv.Client()}, Options{NoSeed: true})
	if res[0].Seeded {
		t.Fatal("NoSeed seeded")
	}
}

func TestParseRejectsBadCassettes(t *testing.T) {
	for _, y := range []string{"version: 1\ninteractions: []\n", "version: 2\ninteractions:\n  - id: 0\n    request: {}\n    response: {}\n", ":::"} {
		if _, err := Parse("bad.yaml", []byte(y)); err == nil {
			t.Errorf("accepted %q", y)
		}
	}
}

func TestRunReportsTokenFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		_, _ = fmt.Fprint(w, `{"error":"invalid_client"}`)
	}))
	defer srv.Close()
	c, _ := Parse("x.yaml", []byte(cassetteYAML))
	if _, err := Run(context.Background(), c, Target{BaseURL: srv.URL, Client: srv.Client()}, Options{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("token failure: %v", err)
	}
}
