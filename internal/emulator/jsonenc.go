package emulator

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// appendJSON encodes a decoded-JSON value tree (maps, slices, strings,
// json.Number, numbers, bools, nil, rawJSON) without reflection. Its output
// is byte-identical to encoding/json.Marshal for such trees (sorted keys,
// HTML-safe escaping); values of other types fall back to encoding/json.
func appendJSON(dst []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case string:
		return appendJSONString(dst, t), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case json.Number:
		if t == "" {
			return append(dst, '0'), nil
		}
		if !isJSONNumber(string(t)) {
			return json.Marshal(t) // reports the invalid number
		}
		return append(dst, t...), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) || t != math.Trunc(t) || math.Abs(t) >= 1e21 {
			b, err := json.Marshal(t)
			return append(dst, b...), err
		}
		return strconv.AppendFloat(dst, t, 'f', -1, 64), nil
	case rawJSON:
		return append(dst, t...), nil
	case map[string]any:
		if t == nil {
			return append(dst, "null"...), nil
		}
		keys := keysPool.Get().(*[]string)
		ks := (*keys)[:0]
		for k := range t {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		dst = append(dst, '{')
		var err error
		for i, k := range ks {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendJSON(dst, t[k]); err != nil {
				break
			}
		}
		*keys = ks[:0]
		keysPool.Put(keys)
		if err != nil {
			return dst, err
		}
		return append(dst, '}'), nil
	case []any:
		if t == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, x := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSON(dst, x); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	default:
		b, err := json.Marshal(t)
		return append(dst, b...), err
	}
}

var keysPool = sync.Pool{New: func() any { s := make([]string, 0, 16); return &s }}

// isJSONNumber reports whether s is a valid JSON number literal.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	switch {
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does (HTML-safe, invalid UTF-8
// replaced by U+FFFD, U+2028/U+2029 escaped).
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
