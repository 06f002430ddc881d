package annotations

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// parseBool accepts "true" and "false", case-insensitively, surrounding
// spaces ignored.
func parseBool(key, value string) (bool, *Error) {
	switch v := strings.TrimSpace(value); {
	case strings.EqualFold(v, "true"):
		return true, nil
	case strings.EqualFold(v, "false"):
		return false, nil
	}
	return false, &Error{Key: key, Value: value, Rule: `is not a boolean: use "true" or "false"`}
}

// parseInt32 parses a decimal integer within [lo, hi] (hi < 0: no upper
// bound); unit names the unit in the range message.
func parseInt32(key, value string, lo, hi int64, unit string) (int32, *Error) {
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 32)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, &Error{Key: key, Value: value, Rule: "is out of range for an integer"}
		}
		return 0, &Error{Key: key, Value: value, Rule: "is not an integer"}
	}
	if n < lo || (hi >= 0 && n > hi) {
		var rule string
		if hi >= 0 {
			rule = fmt.Sprintf("is out of range: must be between %d and %d %s", lo, hi, unit)
		} else {
			rule = fmt.Sprintf("is out of range: must be at least %d %s", lo, unit)
		}
		return 0, &Error{Key: key, Value: value, Rule: strings.TrimSpace(rule)}
	}
	return int32(n), nil
}

// parseAddr accepts a textual IP of the given family (4 or 6) without a
// zone; IPv4-mapped IPv6 addresses are neither.
func parseAddr(key, value string, family int) (netip.Addr, *Error) {
	a, err := netip.ParseAddr(strings.TrimSpace(value))
	if err != nil {
		return netip.Addr{}, &Error{Key: key, Value: value, Rule: "is not an IP address"}
	}
	switch {
	case a.Zone() != "":
		return netip.Addr{}, &Error{Key: key, Value: value, Rule: "must not carry an IPv6 zone"}
	case family == 4 && !a.Is4():
		return netip.Addr{}, &Error{Key: key, Value: value, Rule: "is not an IPv4 address"}
	case family == 6 && (!a.Is6() || a.Is4In6()):
		return netip.Addr{}, &Error{Key: key, Value: value, Rule: "is not an IPv6 address (IPv4-mapped addresses are not accepted)"}
	}
	return a, nil
}

// azureNameRE is Azure's rule for public IP and load balancer names: 1-80
// characters of letters, digits, '_', '.', '-', starting with a letter or
// digit and ending with a letter, digit or '_'.
var azureNameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,78}[A-Za-z0-9_])?$`)

const azureNameRequirement = "1-80 letters, digits, '_', '.' or '-', starting with a letter or digit and ending with a letter, digit or '_'"

const azureNameRule = "is not a valid Azure resource name: " + azureNameRequirement

// dnsLabelRE is Azure's rule for a public IP domain name label: 3-63
// lower-case letters, digits and '-', starting with a letter and ending with
// a letter or digit.
var dnsLabelRE = regexp.MustCompile(`^[a-z][a-z0-9-]{1,61}[a-z0-9]$`)

const dnsLabelRule = "is not a valid DNS label: 3-63 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit"

// parseProbeProtocol accepts Tcp, Http and Https case-insensitively.
func parseProbeProtocol(key, value string) (ProbeProtocol, *Error) {
	v := strings.TrimSpace(value)
	for _, p := range []ProbeProtocol{ProbeTCP, ProbeHTTP, ProbeHTTPS} {
		if strings.EqualFold(v, string(p)) {
			return p, nil
		}
	}
	return "", &Error{Key: key, Value: value, Rule: "is not a probe protocol: use Tcp, Http or Https"}
}

// parseRequestPath requires an absolute path without whitespace.
func parseRequestPath(key, value string) (string, *Error) {
	v := strings.TrimSpace(value)
	if !strings.HasPrefix(v, "/") {
		return "", &Error{Key: key, Value: value, Rule: `is not a request path: it must start with "/"`}
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return "", &Error{Key: key, Value: value, Rule: "is not a request path: it must not contain spaces or control characters"}
	}
	return v, nil
}

// maxListedNames bounds how many bad names one error lists.
const maxListedNames = 3

// parseConfigurations splits a comma-separated list of load balancer
// configuration names. It reports at most one error for empty entries and
// one for invalid names (listing the first few).
func parseConfigurations(key, value string) ([]string, []error) {
	var out, bad []string
	empty := false
	seen := map[string]bool{}
	for _, part := range strings.Split(value, ",") {
		name := strings.TrimSpace(part)
		switch {
		case name == "":
			empty = true
		case !azureNameRE.MatchString(name):
			bad = append(bad, name)
		case !seen[strings.ToLower(name)]:
			seen[strings.ToLower(name)] = true
			out = append(out, name)
		}
	}
	var errs []error
	if empty {
		errs = append(errs, &Error{Key: key, Value: value, Rule: "contains an empty name: write configuration names separated by single commas"})
	}
	if len(bad) > 0 {
		quoted := make([]string, 0, maxListedNames)
		for _, b := range bad[:min(len(bad), maxListedNames)] {
			quoted = append(quoted, quoteValue(b))
		}
		list := strings.Join(quoted, ", ")
		if len(bad) > maxListedNames {
			list += fmt.Sprintf(" and %d more", len(bad)-maxListedNames)
		}
		errs = append(errs, &Error{Key: key, Value: value, Rule: fmt.Sprintf("contains invalid name(s) %s: configuration names must be valid Azure resource names: %s", list, azureNameRequirement)})
	}
	return out, errs
}
