package emulator

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth is the nesting limit, as in encoding/json.
const maxJSONDepth = 10000

// parseJSON decodes exactly one JSON value (surrounded by optional
// whitespace) into maps, slices, strings, json.Number, bools and nil. It
// accepts and rejects the same documents as encoding/json and produces the
// same values as a Decoder with UseNumber, without reflection.
func parseJSON(b []byte) (any, error) {
	d := jdec{s: b}
	d.ws()
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.i != len(d.s) {
		return nil, d.errf("invalid character %s after top-level value", quoteChar(d.s[d.i]))
	}
	return v, nil
}

type jdec struct {
	s []byte
	i int
	// vals reuses boxed string values that repeat within one document
	// (resource ids in references, enum values).
	vals map[string]any
}

// knownKeys interns object keys common in ARM bodies.
var knownKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"id", "name", "type", "etag", "location", "tags", "sku", "tier", "zones", "properties",
		"provisioningState", "resourceGuid", "loadBalancerBackendAddresses", "ipAddress", "virtualNetwork", "subnet",
		"adminState", "frontendIPConfigurations", "backendAddressPools", "loadBalancingRules", "probes",
		"inboundNatRules", "outboundRules", "inboundNatPools", "publicIPAddress", "frontendIPConfiguration",
		"backendAddressPool", "probe", "protocol", "frontendPort", "backendPort", "port", "privateIPAddress",
		"privateIPAllocationMethod", "privateIPAddressVersion", "publicIPAllocationMethod", "publicIPAddressVersion",
		"addressSpace", "addressPrefixes", "addressPrefix", "subnets", "idleTimeoutInMinutes", "enableFloatingIP",
		"loadBalancerFrontendIPConfiguration", "networkInterfaceIPConfiguration", "value"} {
		m[k] = k
	}
	return m
}()

func (d *jdec) errf(format string, args ...any) error {
	return fmt.Errorf(format+" (offset %d)", append(args, d.i)...)
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

func (d *jdec) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jdec) value(depth int) (any, error) {
	if d.i >= len(d.s) {
		return nil, d.errf("unexpected end of JSON input")
	}
	switch c := d.s[d.i]; {
	case c == '{':
		if depth >= maxJSONDepth {
			return nil, d.errf("exceeded max depth")
		}
		return d.object(depth + 1)
	case c == '[':
		if depth >= maxJSONDepth {
			return nil, d.errf("exceeded max depth")
		}
		return d.array(depth + 1)
	case c == '"':
		return d.str()
	case c == 't':
		return true, d.lit("true")
	case c == 'f':
		return false, d.lit("false")
	case c == 'n':
		return nil, d.lit("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	default:
		return nil, d.errf("invalid character %s looking for beginning of value", quoteChar(c))
	}
}

func (d *jdec) lit(word string) error {
	for j := 0; j < len(word); j++ {
		if d.i >= len(d.s) {
			return d.errf("unexpected end of JSON input")
		}
		if d.s[d.i] != word[j] {
			return d.errf("invalid character %s in literal %s (expecting %s)", quoteChar(d.s[d.i]), word, quoteChar(word[j]))
		}
		d.i++
	}
	return nil
}

func (d *jdec) object(depth int) (any, error) {
	d.i++ // '{'
	m := make(map[string]any, 4)
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return m, nil
	}
	for {
		d.ws()
		if d.i >= len(d.s) {
			return nil, d.errf("unexpected end of JSON input")
		}
		if d.s[d.i] != '"' {
			return nil, d.errf("invalid character %s looking for beginning of object key string", quoteChar(d.s[d.i]))
		}
		k, err := d.key()
		if err != nil {
			return nil, err
		}
		d.ws()
		if d.i >= len(d.s) {
			return nil, d.errf("unexpected end of JSON input")
		}
		if d.s[d.i] != ':' {
			return nil, d.errf("invalid character %s after object key", quoteChar(d.s[d.i]))
		}
		d.i++
		d.ws()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		m[k] = v
		d.ws()
		if d.i >= len(d.s) {
			return nil, d.errf("unexpected end of JSON input")
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return m, nil
		default:
			return nil, d.errf("invalid character %s after object key:value pair", quoteChar(d.s[d.i]))
		}
	}
}

func (d *jdec) array(depth int) (any, error) {
	d.i++ // '['
	a := make([]any, 0, 4)
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return a, nil
	}
	for {
		d.ws()
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.ws()
		if d.i >= len(d.s) {
			return nil, d.errf("unexpected end of JSON input")
		}
		switch d.s[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return a, nil
		default:
			return nil, d.errf("invalid character %s after array element", quoteChar(d.s[d.i]))
		}
	}
}

func (d *jdec) number() (any, error) {
	start := d.i
	if d.s[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i >= len(d.s) {
		return nil, d.errf("unexpected end of JSON input")
	}
	switch {
	case d.s[d.i] == '0':
		d.i++
	case d.s[d.i] >= '1' && d.s[d.i] <= '9':
		digits()
	default:
		return nil, d.errf("invalid character %s in numeric literal", quoteChar(d.s[d.i]))
	}
	if d.i < len(d.s) && d.s[d.i] == '.' {
		d.i++
		if digits() == 0 {
			if d.i >= len(d.s) {
				return nil, d.errf("unexpected end of JSON input")
			}
			return nil, d.errf("invalid character %s after decimal point in numeric literal", quoteChar(d.s[d.i]))
		}
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			if d.i >= len(d.s) {
				return nil, d.errf("unexpected end of JSON input")
			}
			return nil, d.errf("invalid character %s in exponent of numeric literal", quoteChar(d.s[d.i]))
		}
	}
	return json.Number(d.s[start:d.i]), nil
}

// key decodes an object key, interning well-known keys.
func (d *jdec) key() (string, error) {
	start := d.i + 1
	for j := start; j < len(d.s) && j-start < 64; j++ {
		c := d.s[j]
		if c == '"' {
			if k, ok := knownKeys[string(d.s[start:j])]; ok {
				d.i = j + 1
				return k, nil
			}
			break
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	v, err := d.str()
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

// str decodes a string starting at the opening quote.
func (d *jdec) str() (any, error) {
	d.i++ // '"'
	start := d.i
	// Fast path: no escapes, ASCII or valid UTF-8, no control characters.
	for d.i < len(d.s) {
		c := d.s[d.i]
		if c == '"' {
			s := d.s[start:d.i]
			d.i++
			if !utf8.Valid(s) {
				return string(fixUTF8(s)), nil
			}
			if len(s) <= 256 {
				if v, ok := d.vals[string(s)]; ok {
					return v, nil
				}
				if d.vals == nil {
					d.vals = make(map[string]any, 16)
				}
				var v any = string(s)
				d.vals[v.(string)] = v
				return v, nil
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, d.errf("invalid character %s in string literal", quoteChar(c))
		}
		d.i++
	}
	if d.i >= len(d.s) {
		return nil, d.errf("unexpected end of JSON input")
	}
	// Slow path with escapes.
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.s[start:d.i]...)
	for d.i < len(d.s) {
		c := d.s[d.i]
		switch {
		case c == '"':
			d.i++
			if utf8.Valid(buf) {
				return string(buf), nil
			}
			return string(fixUTF8(buf)), nil
		case c < 0x20:
			return nil, d.errf("invalid character %s in string literal", quoteChar(c))
		case c == '\\':
			d.i++
			if d.i >= len(d.s) {
				return nil, d.errf("unexpected end of JSON input")
			}
			e := d.s[d.i]
			d.i++
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return nil, d.errf("invalid character in \\u hexadecimal character escape")
				}
				if utf16.IsSurrogate(r) {
					// A following \uXXXX may complete the pair.
					if d.i+6 <= len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
						save := d.i
						d.i += 2
						r2, ok2 := d.hex4()
						if !ok2 {
							return nil, d.errf("invalid character in \\u hexadecimal character escape")
						}
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							buf = utf8.AppendRune(buf, dec)
							continue
						}
						d.i = save
					}
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
			default:
				return nil, d.errf("invalid character %s in string escape code", quoteChar(e))
			}
		default:
			buf = append(buf, c)
			d.i++
		}
	}
	return nil, d.errf("unexpected end of JSON input")
}

func (d *jdec) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		d.i = len(d.s)
		return 0, false
	}
	var r rune
	for j := 0; j < 4; j++ {
		c := d.s[d.i+j]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	d.i += 4
	return r, true
}

// fixUTF8 replaces invalid UTF-8 sequences with U+FFFD as encoding/json does
// (one replacement per invalid byte).
func fixUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}
