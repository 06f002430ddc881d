package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// KeySet returns the recursive key paths of a JSON document: object members
// as "a.b", array elements merged under "a[]". Scalars contribute nothing.
func KeySet(doc []byte) (map[string]bool, error) {
	set := map[string]bool{}
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 {
		return set, nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	walkKeys(v, "", set)
	return set, nil
}

func walkKeys(v any, prefix string, set map[string]bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			set[p] = true
			walkKeys(x, p, set)
		}
	case []any:
		for _, x := range t {
			walkKeys(x, prefix+"[]", set)
		}
	}
}

// CompareKeys reports the differences between the key sets of the recorded
// (want) and actual (got) bodies. Keys listed in ignore (and their
// descendants) are not compared.
func CompareKeys(want, got []byte, ignore []string) []string {
	ws, err := KeySet(want)
	if err != nil {
		return []string{fmt.Sprintf("recorded body is not JSON: %v", err)}
	}
	gs, err := KeySet(got)
	if err != nil {
		return []string{fmt.Sprintf("response body is not JSON: %v: %.200s", err, got)}
	}
	if len(bytes.TrimSpace(want)) == 0 && len(bytes.TrimSpace(got)) != 0 {
		return []string{fmt.Sprintf("recorded an empty body, got %.200s", got)}
	}
	if len(bytes.TrimSpace(want)) != 0 && len(bytes.TrimSpace(got)) == 0 {
		return []string{"recorded a body, got an empty one"}
	}
	ignored := func(k string) bool {
		for _, i := range ignore {
			if k == i || strings.HasPrefix(k, i+".") || strings.HasPrefix(k, i+"[]") {
				return true
			}
		}
		return false
	}
	var missing, extra []string
	for k := range ws {
		if !gs[k] && !ignored(k) {
			missing = append(missing, k)
		}
	}
	for k := range gs {
		if !ws[k] && !ignored(k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	var out []string
	if len(missing) > 0 {
		out = append(out, "missing keys: "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		out = append(out, "unexpected keys: "+strings.Join(extra, ", "))
	}
	return out
}
