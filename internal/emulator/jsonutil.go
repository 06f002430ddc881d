package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// obj is a decoded JSON object. Numbers are json.Number so that values pass
// through unchanged.
type obj = map[string]any

// decodeObject parses body as a single JSON object. The error text names the
// problem in the style of ARM's deserializer.
func decodeObject(body []byte) (obj, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("the request body is empty")
	}
	v, err := parseJSON(trimmed)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the request body must be a JSON object, got %s", jsonKind(v))
	}
	return m, nil
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case json.Number, float64, int:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// fieldError is a request-shape error at a JSON path.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return fmt.Sprintf("%s: %s", e.path, e.msg) }

func joinPath(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func indexPath(base string, i int) string {
	return base + "[" + strconv.Itoa(i) + "]"
}

// getObj returns m[key] as an object; absent or null gives (nil, nil).
func getObj(m obj, key, path string) (obj, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, &fieldError{joinPath(path, key), "expected an object, got " + jsonKind(v)}
	}
	return o, nil
}

// getArr returns m[key] as an array; absent or null gives (nil, false, nil).
func getArr(m obj, key, path string) ([]any, bool, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, false, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, true, &fieldError{joinPath(path, key), "expected an array, got " + jsonKind(v)}
	}
	return a, true, nil
}

// getStr returns m[key] as a string; absent or null gives ("", false, nil).
func getStr(m obj, key, path string) (string, bool, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", true, &fieldError{joinPath(path, key), "expected a string, got " + jsonKind(v)}
	}
	return s, true, nil
}

// getInt returns m[key] as an integer; absent or null gives (0, false, nil).
func getInt(m obj, key, path string) (int64, bool, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return 0, true, &fieldError{joinPath(path, key), "expected an integer, got " + string(n)}
		}
		return i, true, nil
	case int:
		// Stored documents hold the defaults the emulator filled in as Go
		// integers (a Compute PUT merges a request into them).
		return int64(n), true, nil
	case int64:
		return n, true, nil
	case string:
		// NRP's deserializer accepts integers encoded as strings.
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		if err != nil {
			return 0, true, &fieldError{joinPath(path, key), fmt.Sprintf("expected an integer, got %q", n)}
		}
		return i, true, nil
	default:
		return 0, true, &fieldError{joinPath(path, key), "expected an integer, got " + jsonKind(v)}
	}
}

// getBool returns m[key] as a boolean; absent or null gives (false, false, nil).
func getBool(m obj, key, path string) (bool, bool, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return false, false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, true, &fieldError{joinPath(path, key), "expected a boolean, got " + jsonKind(v)}
	}
	return b, true, nil
}

// getRef reads a sub-resource reference {"id": "..."} at m[key] and returns
// the id. Other members of the reference (a whole embedded resource, as
// clients that round-trip GET results send) are ignored, as ARM does.
func getRef(m obj, key, path string) (string, bool, error) {
	o, err := getObj(m, key, path)
	if err != nil || o == nil {
		return "", false, err
	}
	id, ok, err := getStr(o, "id", joinPath(path, key))
	if err != nil {
		return "", true, err
	}
	if !ok || id == "" {
		return "", true, &fieldError{joinPath(joinPath(path, key), "id"), "a reference needs a non-empty id"}
	}
	return id, true, nil
}

// getRefList reads an array of references at m[key].
func getRefList(m obj, key, path string) ([]string, bool, error) {
	a, ok, err := getArr(m, key, path)
	if err != nil || !ok {
		return nil, ok, err
	}
	out := make([]string, 0, len(a))
	for i, el := range a {
		p := indexPath(joinPath(path, key), i)
		o, isObj := el.(map[string]any)
		if !isObj {
			return nil, true, &fieldError{p, "expected a reference object, got " + jsonKind(el)}
		}
		id, has, err := getStr(o, "id", p)
		if err != nil {
			return nil, true, err
		}
		if !has || id == "" {
			return nil, true, &fieldError{joinPath(p, "id"), "a reference needs a non-empty id"}
		}
		out = append(out, id)
	}
	return out, true, nil
}

// ref builds the {"id": id} form ARM returns for references.
func ref(id string) obj { return obj{"id": id} }

// setRef sets m[key] to the reference {"id": id}, reusing an existing
// request-owned reference object that already has exactly that form.
func setRef(m obj, key, id string) {
	if r, ok := m[key].(map[string]any); ok && len(r) == 1 {
		if cur, _ := r["id"].(string); cur == id {
			return
		}
	}
	m[key] = ref(id)
}

// refList builds [{"id": ...}, ...].
func refList(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = ref(id)
	}
	return out
}

// shallowCopy copies the top level of m.
func shallowCopy(m obj) obj {
	out := make(obj, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	default:
		return v
	}
}

// setDefault sets m[key]=v when key is absent or null.
func setDefault(m obj, key string, v any) {
	if cur, ok := m[key]; !ok || cur == nil {
		m[key] = deepCopy(v)
	}
}

// mustMarshal encodes v, which holds only JSON-decoded values or values built
// by this package; failure is a programming error reported as a JSON string.
func mustMarshal(v any) []byte {
	b, err := appendJSON(make([]byte, 0, 512), v)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"error": map[string]any{"code": "InternalServerError", "message": "emulator could not encode a response"}})
	}
	return b
}
