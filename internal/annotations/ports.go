package annotations

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// portSuffixes are the per-port suffixes this package understands.
var portSuffixes = map[string]bool{
	PortSuffixProbeProtocol:    true,
	PortSuffixProbeRequestPath: true,
	PortSuffixProbeInterval:    true,
	PortSuffixProbeNumOfProbe:  true,
	PortSuffixProbePort:        true,
	PortSuffixNoLBRule:         true,
	PortSuffixNoProbeRule:      true,
}

// portKey handles key = Prefix + "port_" + rest. It returns false when the
// suffix is not one this package knows (the key is then unsupported, not an
// error).
func (p *parser) portKey(key, rest, value string) bool {
	numStr, suffix, ok := strings.Cut(rest, "_")
	if !ok || !portSuffixes[suffix] {
		return false
	}
	p.raw[key] = value
	n, err := strconv.ParseInt(numStr, 10, 32)
	if err != nil || n < 1 || n > 65535 || strconv.FormatInt(n, 10) != numStr {
		p.fail(&Error{Key: key, Value: value, Rule: fmt.Sprintf("is not applied: the key's port %s is not a port number (1-65535, decimal, no leading zeros)", quoteValue(numStr))})
		return true
	}
	port := int32(n)
	if !p.hasPort(port) {
		p.fail(&Error{Key: key, Value: value, Rule: fmt.Sprintf("is not applied: the Service has no port %d (its ports: %s)", port, p.portList())})
		return true
	}
	o := p.spec.Ports[port]
	switch suffix {
	case PortSuffixProbeProtocol:
		p.probeProtocol(&o.Probe, key, value)
	case PortSuffixProbeRequestPath:
		p.probeRequestPath(&o.Probe, key, value)
	case PortSuffixProbeInterval:
		p.probeInterval(&o.Probe, key, value)
	case PortSuffixProbeNumOfProbe:
		p.probeNum(&o.Probe, key, value)
	case PortSuffixProbePort:
		ref, err := p.probePortRef(key, value)
		p.fail(err)
		o.Probe.Port = ref
	case PortSuffixNoLBRule:
		b, err := parseBool(key, value)
		p.fail(err)
		o.NoLBRule = b
	case PortSuffixNoProbeRule:
		b, err := parseBool(key, value)
		p.fail(err)
		o.NoProbeRule = b
	}
	p.spec.Ports[port] = o
	return true
}

func (p *parser) hasPort(port int32) bool {
	for _, sp := range p.spec.servicePorts {
		if sp.Port == port {
			return true
		}
	}
	return false
}

func (p *parser) portList() string {
	if len(p.spec.servicePorts) == 0 {
		return "none"
	}
	seen := map[int32]bool{}
	var nums []int
	for _, sp := range p.spec.servicePorts {
		if !seen[sp.Port] {
			seen[sp.Port] = true
			nums = append(nums, int(sp.Port))
		}
	}
	sort.Ints(nums)
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ", ")
}

// probePortRef parses a health-probe_port value: a port number 1-65535 or
// the name of one of the Service's ports.
func (p *parser) probePortRef(key, value string) (*ProbePortRef, *Error) {
	v := strings.TrimSpace(value)
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		if n < 1 || n > 65535 {
			return nil, &Error{Key: key, Value: value, Rule: "is out of range: must be between 1 and 65535"}
		}
		return &ProbePortRef{Number: int32(n)}, nil
	}
	if v != "" {
		for _, sp := range p.spec.servicePorts {
			if sp.Name == v {
				return &ProbePortRef{Name: v}, nil
			}
		}
	}
	return nil, &Error{Key: key, Value: value, Rule: "is neither a port number (1-65535) nor the name of a port of the Service"}
}

// checkProbeWindows enforces Azure's interval × num-of-probe <= 120 s on the
// service-wide values and on every port that overrides either of them.
func (p *parser) checkProbeWindows() {
	sw := p.spec.Probe
	if sw.IntervalInSeconds != nil || sw.NumberOfProbes != nil {
		iv, ivFrom := pick(sw.IntervalInSeconds, KeyProbeInterval, nil, "", DefaultProbeIntervalSeconds)
		nm, nmFrom := pick(sw.NumberOfProbes, KeyProbeNumOfProbe, nil, "", DefaultNumberOfProbes)
		if int64(iv)*int64(nm) > MaxProbeWindowSeconds {
			key := KeyProbeInterval
			if sw.IntervalInSeconds == nil {
				key = KeyProbeNumOfProbe
			}
			p.fail(windowError(key, p.raw[key], iv, ivFrom, nm, nmFrom))
		}
	}
	ports := make([]int, 0, len(p.spec.Ports))
	for port := range p.spec.Ports {
		ports = append(ports, int(port))
	}
	sort.Ints(ports)
	for _, port := range ports {
		o := p.spec.Ports[int32(port)].Probe
		if o.IntervalInSeconds == nil && o.NumberOfProbes == nil {
			continue
		}
		ivKey := PortKey(int32(port), PortSuffixProbeInterval)
		nmKey := PortKey(int32(port), PortSuffixProbeNumOfProbe)
		iv, ivFrom := pick(o.IntervalInSeconds, ivKey, sw.IntervalInSeconds, KeyProbeInterval, DefaultProbeIntervalSeconds)
		nm, nmFrom := pick(o.NumberOfProbes, nmKey, sw.NumberOfProbes, KeyProbeNumOfProbe, DefaultNumberOfProbes)
		if int64(iv)*int64(nm) > MaxProbeWindowSeconds {
			key := ivKey
			if o.IntervalInSeconds == nil {
				key = nmKey
			}
			p.fail(windowError(key, p.raw[key], iv, ivFrom, nm, nmFrom))
		}
	}
}

// pick returns the first set value and where it came from.
func pick(first *int32, firstKey string, second *int32, secondKey string, def int32) (int32, string) {
	switch {
	case first != nil:
		return *first, firstKey
	case second != nil:
		return *second, secondKey
	}
	return def, "the default"
}

func windowError(key, value string, iv int32, ivFrom string, nm int32, nmFrom string) *Error {
	return &Error{Key: key, Value: value, Rule: fmt.Sprintf(
		"gives interval × num-of-probe = %d s × %d = %d s, over Azure's limit of %d s (interval from %s, num-of-probe from %s)",
		iv, nm, int64(iv)*int64(nm), MaxProbeWindowSeconds, ivFrom, nmFrom)}
}
