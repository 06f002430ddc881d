package annotations

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// parser accumulates a ServiceSpec and the problems found on the way.
type parser struct {
	svc  *v1.Service
	spec *ServiceSpec
	errs []error
	// raw keeps the original value of every key that was set, so that
	// cross-key errors can quote it.
	raw map[string]string
}

func (p *parser) fail(e *Error) {
	if e != nil {
		p.errs = append(p.errs, e)
	}
}

// serviceWide maps the part of a service-wide key after Prefix to its
// handler. The value passed is the raw annotation value.
var serviceWide = map[string]func(p *parser, key, value string){
	strings.TrimPrefix(KeyInternal, Prefix): func(p *parser, key, value string) {
		b, err := parseBool(key, value)
		p.fail(err)
		p.spec.Internal = b
	},
	strings.TrimPrefix(KeyInternalSubnet, Prefix): func(p *parser, key, value string) {
		p.spec.InternalSubnet = strings.TrimSpace(value)
	},
	strings.TrimPrefix(KeyPIPName, Prefix): func(p *parser, key, value string) {
		p.spec.PIPName = p.azureName(key, value)
	},
	strings.TrimPrefix(KeyPIPNameIPv6, Prefix): func(p *parser, key, value string) {
		p.spec.PIPNameIPv6 = p.azureName(key, value)
	},
	strings.TrimPrefix(KeyIPv4, Prefix): func(p *parser, key, value string) {
		if strings.TrimSpace(value) == "" {
			return
		}
		a, err := parseAddr(key, value, 4)
		p.fail(err)
		p.spec.IPv4 = a
	},
	strings.TrimPrefix(KeyIPv6, Prefix): func(p *parser, key, value string) {
		if strings.TrimSpace(value) == "" {
			return
		}
		a, err := parseAddr(key, value, 6)
		p.fail(err)
		p.spec.IPv6 = a
	},
	strings.TrimPrefix(KeyLoadBalancerConfigurations, Prefix): func(p *parser, key, value string) {
		if strings.TrimSpace(value) == "" {
			return
		}
		names, errs := parseConfigurations(key, value)
		p.errs = append(p.errs, errs...)
		p.spec.LoadBalancerConfigurations = names
	},
	strings.TrimPrefix(KeyDNSLabelName, Prefix): func(p *parser, key, value string) {
		v := strings.TrimSpace(value)
		if v == "" {
			return
		}
		if !dnsLabelRE.MatchString(v) {
			p.fail(&Error{Key: key, Value: value, Rule: dnsLabelRule})
			return
		}
		p.spec.DNSLabelName = v
	},
	strings.TrimPrefix(KeyTCPIdleTimeout, Prefix): func(p *parser, key, value string) {
		n, err := parseInt32(key, value, MinTCPIdleTimeoutMinutes, MaxTCPIdleTimeoutMinutes, "minutes")
		if err != nil {
			p.fail(err)
			return
		}
		p.spec.TCPIdleTimeoutMinutes = &n
	},
	strings.TrimPrefix(KeyDisableFloatingIP, Prefix): func(p *parser, key, value string) {
		b, err := parseBool(key, value)
		p.fail(err)
		p.spec.EnableFloatingIP = !b
	},
	strings.TrimPrefix(KeyDisableTCPReset, Prefix): func(p *parser, key, value string) {
		b, err := parseBool(key, value)
		p.fail(err)
		p.spec.EnableTCPReset = !b
	},
	strings.TrimPrefix(KeyHAPorts, Prefix): func(p *parser, key, value string) {
		b, err := parseBool(key, value)
		p.fail(err)
		p.spec.HAPorts = b
	},
	strings.TrimPrefix(KeyAdditionalPublicIPs, Prefix): func(p *parser, key, value string) {
		ips, err := parseAdditionalIPs(key, value)
		p.fail(err)
		p.spec.AdditionalPublicIPs = ips
	},
	strings.TrimPrefix(KeyProbeProtocol, Prefix): func(p *parser, key, value string) {
		p.probeProtocol(&p.spec.Probe, key, value)
	},
	strings.TrimPrefix(KeyProbeRequestPath, Prefix): func(p *parser, key, value string) {
		p.probeRequestPath(&p.spec.Probe, key, value)
	},
	strings.TrimPrefix(KeyProbeInterval, Prefix): func(p *parser, key, value string) {
		p.probeInterval(&p.spec.Probe, key, value)
	},
	strings.TrimPrefix(KeyProbeNumOfProbe, Prefix): func(p *parser, key, value string) {
		p.probeNum(&p.spec.Probe, key, value)
	},
}

func init() {
	for _, k := range []string{KeyAllowedIPRanges, KeyAllowedServiceTags, KeyDenyAllExceptRanges, KeyDisableNSGRule} {
		serviceWide[strings.TrimPrefix(k, Prefix)] = func(*parser, string, string) {} // internal/accesscontrol
	}
}

// Parse reads and validates the load balancer annotations of svc. On any
// problem it returns nil and errors.Join of one *Error per problem, in key
// order, each naming the key, the value and the rule broken. Keys outside
// Prefix are ignored; unknown azure-*/port_* keys are listed in
// ServiceSpec.Unsupported. Parse never panics and does not modify svc.
func Parse(svc *v1.Service) (*ServiceSpec, error) {
	if svc == nil {
		return nil, errors.New("annotations: cannot parse a nil Service")
	}
	spec := &ServiceSpec{
		EnableFloatingIP:    true,
		EnableTCPReset:      true,
		Ports:               map[int32]PortOverrides{},
		local:               svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
		healthCheckNodePort: svc.Spec.HealthCheckNodePort,
		servicePorts:        append([]v1.ServicePort(nil), svc.Spec.Ports...),
	}
	p := &parser{svc: svc, spec: spec, raw: map[string]string{}}

	keys := make([]string, 0, len(svc.Annotations))
	for k := range svc.Annotations {
		if strings.HasPrefix(k, Prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, key := range keys {
		value := svc.Annotations[key]
		name := key[len(Prefix):]
		if h, ok := serviceWide[name]; ok {
			p.raw[key] = value
			h(p, key, value)
			continue
		}
		if strings.HasPrefix(name, portKeyPrefix) {
			if !p.portKey(key, name[len(portKeyPrefix):], value) {
				spec.Unsupported = append(spec.Unsupported, key)
			}
			continue
		}
		if strings.HasPrefix(name, "azure-pls-") {
			continue // Private Link Service keys: parsed by internal/privatelink
		}
		if strings.HasPrefix(name, "azure-") {
			spec.Unsupported = append(spec.Unsupported, key)
		}
	}

	if spec.HAPorts && !spec.Internal {
		p.fail(&Error{Key: KeyHAPorts, Value: p.raw[KeyHAPorts],
			Rule: fmt.Sprintf("is only valid for internal load balancers: set %s to \"true\" or remove it", KeyInternal)})
	}
	p.checkProbeWindows()

	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	if len(spec.Ports) == 0 {
		spec.Ports = nil
	}
	return spec, nil
}

// azureName validates a resource name value; blank means unset.
func (p *parser) azureName(key, value string) string {
	return p.matching(key, value, azureNameRE, azureNameRule)
}

// matching returns the trimmed value when re matches it, "" when it is
// blank (unset), and otherwise records an Error with rule.
func (p *parser) matching(key, value string, re *regexp.Regexp, rule string) string {
	v := strings.TrimSpace(value)
	if v == "" {
		return ""
	}
	if !re.MatchString(v) {
		p.fail(&Error{Key: key, Value: value, Rule: rule})
		return ""
	}
	return v
}

func (p *parser) probeProtocol(o *ProbeOverrides, key, value string) {
	pr, err := parseProbeProtocol(key, value)
	p.fail(err)
	o.Protocol = pr
}

func (p *parser) probeRequestPath(o *ProbeOverrides, key, value string) {
	path, err := parseRequestPath(key, value)
	p.fail(err)
	o.RequestPath = path
}

func (p *parser) probeInterval(o *ProbeOverrides, key, value string) {
	n, err := parseInt32(key, value, MinProbeIntervalSeconds, -1, "seconds (Azure's minimum probe interval)")
	if err != nil {
		p.fail(err)
		return
	}
	o.IntervalInSeconds = &n
}

func (p *parser) probeNum(o *ProbeOverrides, key, value string) {
	n, err := parseInt32(key, value, MinNumberOfProbes, -1, "")
	if err != nil {
		p.fail(err)
		return
	}
	o.NumberOfProbes = &n
}
