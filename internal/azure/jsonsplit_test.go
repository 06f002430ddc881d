package azure

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// FuzzSplitObject: splitObject gives what json.Unmarshal into a
// map[string]json.RawMessage gives (members, errors), without copying.
func FuzzSplitObject(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"}"}], "a":"x\"y" } `, `null`, `[1]`, `"s"`, `{"a":}`, `{"a":1`,
		`{"k\u0041":true,"\u00e9":false,"é":null}`, `{"a":-1.5e3,"b":{"c":[[],{}]}}`, "{\"\xff\":1}", `{"a":"\\"}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(data, &want)
		got, err := splitObject(data)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%q: error %v, json.Unmarshal's %v", data, err, wantErr)
		}
		if err != nil {
			return
		}
		if (got == nil) != (want == nil) || len(got) != len(want) {
			t.Fatalf("%q: %q, json.Unmarshal gives %q", data, got, want)
		}
		for k, v := range want {
			if !bytes.Equal(got[k], v) {
				t.Fatalf("%q: member %q is %q, json.Unmarshal gives %q", data, k, got[k], v)
			}
		}
	})
}

// A member is a slice of the answer, not a copy: splitting a 200 KB answer
// allocates a small fraction of it.
func TestSplitObjectDoesNotCopy(t *testing.T) {
	data := []byte(`{"name":"lb","properties":{"backendAddressPools":[{"name":"p"}],"pad":"` + strings.Repeat("x", 200<<10) + `"}}`)
	m, err := splitObject(data)
	if err != nil {
		t.Fatal(err)
	}
	props := m["properties"]
	if len(props) == 0 || &props[0] != &data[bytes.Index(data, []byte(`{"backend`))] {
		t.Fatalf("properties %.40q is not a slice of the answer", props)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := splitObject(data); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > uint64(len(data))/20 {
		t.Errorf("splitting a %d-byte answer allocated %d bytes, want under 5%% of it", len(data), per)
	}
}
