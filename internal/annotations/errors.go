package annotations

import "strconv"

// maxQuotedValue bounds how much of a bad value an error repeats.
const maxQuotedValue = 64

// Error is one invalid annotation. Parse joins them with errors.Join.
type Error struct {
	// Key is the full annotation key.
	Key string
	// Value is the annotation value as written.
	Value string
	// Rule says what the value breaks, phrased to follow the quoted value,
	// e.g. "is not an integer".
	Rule string
}

func (e *Error) Error() string {
	return e.Key + ": " + quoteValue(e.Value) + " " + e.Rule
}

// quoteValue quotes v for an error, cutting it at maxQuotedValue runes. It
// looks at no more than the first maxQuotedValue runes, so it is cheap on
// huge values.
func quoteValue(v string) string {
	n := 0
	for i := range v {
		if n == maxQuotedValue {
			return strconv.Quote(v[:i]) + "…"
		}
		n++
	}
	return strconv.Quote(v)
}
