package config

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error text built by this package never includes the value of a secret:
// field errors name the field and the rule, not the value. Two more layers
// guard the messages of the parsers underneath (encoding/json,
// sigs.k8s.io/yaml), which can quote pieces of the input:
//   - sanitize removes every quoted fragment from a parser message and caps
//     its length;
//   - scrubError removes any string that looks like the value of an
//     aadClientSecret or aadClientCertPassword key in the raw input (found
//     textually, so it works on input that does not parse) or that was
//     decoded into AADClientSecret or AADClientCertPassword.

const maxParserMessage = 240

var quotedFragment = regexp.MustCompile("`[^`]*`" + `|"(?:[^"\\]|\\.)*"|'[^']{2,}'`)

// sanitize strips quoted input fragments from a parser error message.
func sanitize(msg string) string {
	msg = quotedFragment.ReplaceAllStringFunc(msg, func(s string) string {
		return s[:1] + "…" + s[len(s)-1:]
	})
	if len(msg) > maxParserMessage {
		cut := maxParserMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// secretValue matches a secret key (aadClientSecret, aadClientCertPassword)
// and the start of its value in JSON or YAML text: "aadClientSecret": "v",
// aadClientSecret: v, 'aadClientSecret': 'v'.
var secretValue = regexp.MustCompile(`(?i)(?:aadclientsecret|aadclientcertpassword)["']?\s*:\s*("(?:[^"\\\n]|\\.)*"?|'[^'\n]*'?|[^\s,}\]#]+)`)

// minScrubLen: shorter strings are not scrubbed, so that a one-letter
// "secret" does not blank out every occurrence of that letter.
const minScrubLen = 4

// secretCandidates finds, textually, the values given to aadClientSecret in
// raw input, in the forms they may take in an error message.
func secretCandidates(data []byte) []string {
	var out []string
	for _, m := range secretValue.FindAllSubmatch(data, -1) {
		raw := string(m[1])
		out = append(out, raw)
		trimmed := strings.Trim(raw, `"'`)
		out = append(out, trimmed)
		if u, err := strconv.Unquote(`"` + trimmed + `"`); err == nil {
			out = append(out, u)
		}
	}
	return out
}

// scrubError returns err unchanged unless its text contains one of secrets;
// then it returns a plain error with every such occurrence replaced by
// RedactedMarker (and without the original error in its chain, so the value
// cannot be reached through errors.Unwrap).
func scrubError(err error, secrets []string) error {
	msg := err.Error()
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	scrubbed := msg
	for _, s := range secrets {
		if len(s) >= minScrubLen {
			scrubbed = strings.ReplaceAll(scrubbed, s, RedactedMarker)
		}
	}
	if scrubbed == msg {
		return err
	}
	return errors.New(scrubbed)
}

// secretValues are the credentials the configuration holds, for scrubbing
// error text.
func (c *Config) secretValues() []string {
	var out []string
	for _, s := range []Secret{c.AADClientSecret, c.AADClientCertPassword} {
		if s.IsSet() {
			out = append(out, s.Reveal())
		}
	}
	return out
}
