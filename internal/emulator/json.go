package emulator

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// parseJSON decodes exactly one JSON value (surrounded by optional
// whitespace) into maps, slices, strings, json.Number, bools and nil, as
// encoding/json does with UseNumber.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("invalid character %q after top-level value (offset %d)", rest[0], len(b)-len(rest))
	}
	return v, nil
}

// appendJSON appends the encoding/json encoding of v to dst.
func appendJSON(dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}
