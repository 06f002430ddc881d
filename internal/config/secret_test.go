package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	s := Secret(testSecret)
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%-20v", "%T"}
	for _, verb := range verbs {
		out := fmt.Sprintf(verb, s)
		if strings.Contains(out, testSecret) || strings.Contains(out, fmt.Sprintf("%x", testSecret)) {
			t.Errorf("%s printed the secret: %s", verb, out)
		}
		if verb != "%T" && !strings.Contains(out, RedactedMarker) {
			t.Errorf("%s = %q, want the redaction marker", verb, out)
		}
	}
	// Inside composite values too.
	for _, v := range []any{[]Secret{s}, map[string]Secret{"k": s}, struct{ S Secret }{s}, &s} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, testSecret) {
				t.Errorf("%s of %T printed the secret: %s", verb, v, out)
			}
		}
	}
	if got := s.String(); got != RedactedMarker {
		t.Errorf("String() = %q", got)
	}
	if got := s.GoString(); got != `config.Secret("[redacted]")` {
		t.Errorf("GoString() = %q", got)
	}
}

func TestSecretEmpty(t *testing.T) {
	var s Secret
	if s.IsSet() {
		t.Error("empty secret IsSet")
	}
	if got := fmt.Sprint(s); got != "" {
		t.Errorf("Sprint(empty) = %q, want empty", got)
	}
	b, err := json.Marshal(struct {
		S Secret `json:"s,omitempty"`
	}{})
	if err != nil || string(b) != "{}" {
		t.Errorf("omitempty empty secret: %s, %v", b, err)
	}
}

func TestSecretReveal(t *testing.T) {
	s := Secret(testSecret)
	if s.Reveal() != testSecret || !s.IsSet() {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
}

func TestSecretMarshal(t *testing.T) {
	s := Secret(testSecret)
	b, err := json.Marshal(map[string]Secret{"s": s})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"s":"[redacted]"}` {
		t.Errorf("json = %s", b)
	}
	txt, err := s.MarshalText()
	if err != nil || string(txt) != RedactedMarker {
		t.Errorf("MarshalText = %q, %v", txt, err)
	}
	// Decoding is ordinary: the value is kept.
	var back struct{ S Secret }
	if err := json.Unmarshal([]byte(`{"S":"`+testSecret+`"}`), &back); err != nil || back.S.Reveal() != testSecret {
		t.Errorf("unmarshal: %q, %v", back.S.Reveal(), err)
	}
}

func TestSecretLogging(t *testing.T) {
	s := Secret(testSecret)
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("msg", "secret", s)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("msg", "secret", s)
	if strings.Contains(buf.String(), testSecret) || !strings.Contains(buf.String(), RedactedMarker) {
		t.Errorf("slog output: %s", buf.String())
	}
	if got := s.MarshalLog(); got != RedactedMarker {
		t.Errorf("MarshalLog = %v", got)
	}
}
