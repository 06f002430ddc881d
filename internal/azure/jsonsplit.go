package azure

import (
	"bytes"
	"encoding/json"
)

// splitObject splits a JSON object into its members as raw JSON, like
// json.Unmarshal into a map[string]json.RawMessage (a repeated member's
// last value wins, null gives a nil map, anything else that is not an
// object is json.Unmarshal's error), except that the members are slices of
// data, not copies: a load balancer's answer is split twice (its top level,
// then its properties) and those copies were two whole copies of every
// answer (docs/reliability.md, Scale).
func splitObject(data []byte) (map[string]json.RawMessage, error) {
	if !json.Valid(data) {
		return unmarshalMembers(data)
	}
	return splitValid(data)
}

// splitValid is splitObject for data already known to be valid JSON (a
// member of a document splitObject split): it is not scanned again.
func splitValid(data []byte) (map[string]json.RawMessage, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return unmarshalMembers(data)
	}
	m := map[string]json.RawMessage{}
	s := scanner{b: trimmed, i: 1}
	for {
		s.space()
		if s.b[s.i] == '}' {
			return m, nil
		}
		if s.b[s.i] == ',' {
			s.i++
			s.space()
		}
		k0 := s.i
		s.str()
		key := s.b[k0+1 : s.i-1]
		var name string
		if bytes.IndexByte(key, '\\') >= 0 || !isASCII(key) {
			if err := json.Unmarshal(s.b[k0:s.i], &name); err != nil {
				return nil, err // valid JSON: not reached
			}
		} else {
			name = string(key)
		}
		s.space()
		s.i++ // ':'
		s.space()
		v0 := s.i
		s.value()
		m[name] = json.RawMessage(s.b[v0:s.i:s.i])
		s.space()
	}
}

// unmarshalMembers is json.Unmarshal's answer for what is not a valid
// object: its error, or a nil map for null.
func unmarshalMembers(data []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	err := json.Unmarshal(data, &m)
	return m, err
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// scanner walks valid JSON.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\r' || s.b[s.i] == '\n') {
		s.i++
	}
}

// str skips a string, s.i on its opening quote.
func (s *scanner) str() {
	for s.i++; s.b[s.i] != '"'; s.i++ {
		if s.b[s.i] == '\\' {
			s.i++
		}
	}
	s.i++
}

// value skips one value.
func (s *scanner) value() {
	switch s.b[s.i] {
	case '"':
		s.str()
	case '{', '[':
		depth := 0
		for {
			switch s.b[s.i] {
			case '"':
				s.str()
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return
			}
		}
	default: // a number, true, false or null
		for s.i < len(s.b) && !endsScalar(s.b[s.i]) {
			s.i++
		}
	}
}

func endsScalar(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
