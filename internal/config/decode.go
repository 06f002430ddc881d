package config

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// This file checks a generic JSON tree (decoded with UseNumber) against the
// Go type it will be decoded into, before encoding/json sees it. That gives
// three things encoding/json does not:
//   - every type mismatch is reported (encoding/json stops at the first one),
//     as "field.path: must be an integer", never echoing the value;
//   - keys that match no field are collected as unknown fields;
//   - scalars (numbers, booleans) destined for string fields are turned into
//     strings, as sigs.k8s.io/yaml does, so `location: 123` or
//     "aadClientId": 123 load the way the upstream provider loads them.
//
// Field names are matched the way encoding/json matches them: an exact match
// first, otherwise the first field whose name equals the key under
// bytes.EqualFold (which is what encoding/json's case folding is defined as).

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// jsonField is one JSON-visible struct field.
type jsonField struct {
	name string
	typ  reflect.Type
}

var fieldCache sync.Map // reflect.Type -> []jsonField

// jsonFields lists the JSON-visible fields of struct type t in encoding/json
// order, with untagged embedded structs flattened into their parent.
// Name conflicts between embedded fields are not resolved the way
// encoding/json resolves them; TestConfigFieldNamesUnique keeps Config free of
// such conflicts.
func jsonFields(t reflect.Type) []jsonField {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]jsonField)
	}
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			out = append(out, jsonFields(ft)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	fieldCache.Store(t, out)
	return out
}

// lookupField finds the field key decodes into, or nil.
func lookupField(fields []jsonField, key string) *jsonField {
	for i := range fields {
		if fields[i].name == key {
			return &fields[i]
		}
	}
	for i := range fields {
		if strings.EqualFold(fields[i].name, key) {
			return &fields[i]
		}
	}
	return nil
}

// checker walks one generic tree.
type checker struct {
	unknown []string
	// hints maps an unknown field's path to the known field it is likely
	// a misspelling of.
	hints map[string]string
	errs  []error
}

func (c *checker) fail(path, rule string) {
	c.errs = append(c.errs, &FieldError{Field: path, Rule: rule})
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// value checks v against t and returns the value to hand to encoding/json.
func (c *checker) value(v any, t reflect.Type, path string) any {
	if v == nil {
		return nil // null leaves the field at its zero value, as encoding/json does
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
		return v // the type decodes itself; encoding/json reports its errors
	}
	switch t.Kind() {
	case reflect.Pointer:
		return c.value(v, t.Elem(), path)
	case reflect.Interface:
		return v
	case reflect.String:
		switch x := v.(type) {
		case string:
			return x
		case json.Number:
			return x.String()
		case bool:
			return strconv.FormatBool(x)
		}
		c.fail(path, "must be a string")
	case reflect.Bool:
		if _, ok := v.(bool); ok {
			return v
		}
		c.fail(path, "must be a boolean (true or false)")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return c.signed(v, t, path)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return c.unsigned(v, t, path)
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			c.fail(path, "must be a number")
			return nil
		}
		if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			c.fail(path, "must be a number in range")
			return nil
		}
		return n
	case reflect.Slice:
		arr, ok := v.([]any)
		if !ok {
			c.fail(path, "must be a list")
			return nil
		}
		out := make([]any, len(arr))
		for i, e := range arr {
			out[i] = c.value(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			c.fail(path, "must be an object")
			return nil
		}
		out := make(map[string]any, len(obj))
		for _, k := range sortedKeys(obj) {
			out[k] = c.value(obj[k], t.Elem(), fmt.Sprintf("%s[%q]", path, k))
		}
		return out
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			c.fail(path, "must be an object")
			return nil
		}
		return c.object(obj, t, path)
	default:
		c.fail(path, "has a type the loader cannot decode")
	}
	return nil
}

// signed checks a signed integer of t's size.
func (c *checker) signed(v any, t reflect.Type, path string) any {
	n, ok := v.(json.Number)
	if !ok {
		c.fail(path, "must be an integer")
		return nil
	}
	if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
		if errors.Is(err, strconv.ErrRange) {
			c.fail(path, fmt.Sprintf("must be an integer between %d and %d", int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1))
		} else {
			c.fail(path, "must be an integer")
		}
		return nil
	}
	return n
}

// unsigned checks a non-negative integer of t's size.
func (c *checker) unsigned(v any, t reflect.Type, path string) any {
	n, ok := v.(json.Number)
	if !ok {
		c.fail(path, "must be a non-negative integer")
		return nil
	}
	if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
		c.fail(path, "must be a non-negative integer in range")
		return nil
	}
	return n
}

// object checks the keys of one JSON object destined for struct type t. The
// result uses the canonical field names, so encoding/json sees each field at
// most once.
func (c *checker) object(obj map[string]any, t reflect.Type, path string) map[string]any {
	fields := jsonFields(t)
	out := make(map[string]any, len(obj))
	spelled := make(map[string]string, len(obj)) // canonical name -> key as written
	for _, k := range sortedKeys(obj) {
		f := lookupField(fields, k)
		if f == nil {
			c.unknown = append(c.unknown, joinPath(path, k))
			if near := nearestField(fields, k); near != "" {
				if c.hints == nil {
					c.hints = map[string]string{}
				}
				c.hints[joinPath(path, k)] = near
			}
			continue
		}
		fieldPath := joinPath(path, f.name)
		if prev, dup := spelled[f.name]; dup {
			// Two spellings of one field, e.g. cloudProviderRatelimit and
			// cloudProviderRateLimit. encoding/json would silently keep one
			// of them; agreeing values are harmless, differing ones are not.
			if !reflect.DeepEqual(obj[prev], obj[k]) {
				c.fail(fieldPath, fmt.Sprintf("set more than once with different values (as %q and %q)", prev, k))
			}
			continue
		}
		spelled[f.name] = k
		out[f.name] = c.value(obj[k], f.typ, fieldPath)
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nearestField is the field whose name is within a small edit distance of
// key (ignoring case): at most 1 edit for names up to 8 letters, 2 above.
// Ties and no match give "".
func nearestField(fields []jsonField, key string) string {
	limit := 1
	if len(key) > 8 {
		limit = 2
	}
	best, bestD, tie := "", limit+1, false
	for _, f := range fields {
		d := editDistance(strings.ToLower(f.name), strings.ToLower(key), limit)
		switch {
		case d < bestD:
			best, bestD, tie = f.name, d, false
		case d == bestD:
			tie = true
		}
	}
	if tie || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes), or limit+1
// as soon as it must exceed limit.
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
