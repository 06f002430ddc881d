package replay

import "testing"

func FuzzCompareKeys(f *testing.F) {
	f.Add(`{"a":[{"b":1}]}`, `{"a":[]}`)
	f.Add(``, `null`)
	f.Add(`[[[{"x":{}}]]]`, `{"x":"y"}`)
	f.Fuzz(func(t *testing.T, want, got string) {
		_ = CompareKeys([]byte(want), []byte(got), []string{"a"})
		if len(CompareKeys([]byte(want), []byte(want), nil)) != 0 {
			if _, err := KeySet([]byte(want)); err == nil {
				t.Fatalf("a document differs from itself: %q", want)
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add(cassetteYAML)
	f.Add("version: 2\ninteractions: [{}]\n")
	f.Fuzz(func(t *testing.T, y string) {
		_, _ = Parse("f.yaml", []byte(y))
	})
}
