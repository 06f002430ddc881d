package config

import (
	"fmt"
	"io"
	"log/slog"
)

// RedactedMarker replaces the value of a non-empty Secret wherever it would
// otherwise be printed, logged or marshalled.
const RedactedMarker = "[redacted]"

// Reveal returns the credential itself. Call it only where the value is
// handed to the code that authenticates, never to build a message.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret holds a value.
func (s Secret) IsSet() bool { return s != "" }

// String returns RedactedMarker, or "" for an empty secret. That a secret is
// empty is not confidential and helps diagnose a missing credential.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return RedactedMarker
}

// GoString is used by %#v.
func (s Secret) GoString() string {
	return fmt.Sprintf("config.Secret(%q)", s.String())
}

// Format implements fmt.Formatter so that every verb (%s, %v, %+v, %#v, %q,
// %x, %d, ...) prints the redacted form and never the bytes of the value.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalJSON writes the redaction marker (or "" for an empty secret), so a
// marshalled Config never carries the credential. A Config marshalled and
// loaded again therefore holds RedactedMarker as its secret.
func (s Secret) MarshalJSON() ([]byte, error) {
	return []byte(`"` + s.String() + `"`), nil
}

// MarshalText redacts for text-based encoders (YAML libraries, flag sets).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue redacts for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalLog redacts for logr (and so klog structured logging).
func (s Secret) MarshalLog() any { return s.String() }
