package annotations

import (
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ProbeFor returns the effective health probe of a Service port. Each field
// is resolved on its own, first match wins:
//
//   - Protocol: port_{port}_health-probe_protocol, then
//     azure-load-balancer-health-probe-protocol, then, for an
//     ExternalTrafficPolicy=Cluster Service, the port's appProtocol ("http"
//     gives Http, "https" gives Https, case-insensitive; other values are
//     ignored), then the default.
//   - Port: port_{port}_health-probe_port, then the default. A port name, or
//     a number equal to one of the Service's ports, resolves to that Service
//     port's NodePort; any other number is probed as is.
//   - RequestPath (Http/Https only, "" for Tcp):
//     port_{port}_health-probe_request-path, then
//     azure-load-balancer-health-probe-request-path, then "/healthz" when the
//     probe targets the Local default port below, else "/".
//   - IntervalInSeconds and NumberOfProbes: the per-port value, then the
//     service-wide value, then 5 s and 2.
//
// An ExternalTrafficPolicy=Local Service probes spec.healthCheckNodePort
// with one probe per frontend (HealthCheck), as the Azure cloud provider
// does: a port without its own port_{port}_health-probe_port uses it, with
// the service-wide settings only; its per-port protocol, request-path,
// interval and num-of-probe are not applied (IgnoredLocalProbeKeys).
//
// Defaults: an ExternalTrafficPolicy=Cluster Service probes Tcp on the
// port's NodePort. An ExternalTrafficPolicy=Local Service probes Http on
// spec.healthCheckNodePort at /healthz (kube-proxy's health check, which
// only succeeds on nodes running a ready endpoint), for every port and
// protocol; appProtocol does not change it.
//
// Azure has no UDP probe, and a Tcp probe on a UDP NodePort finds nothing
// listening, so a UDP or SCTP port of an ExternalTrafficPolicy=Cluster
// Service gets no probe by default (Disabled). Setting
// port_{port}_health-probe_protocol or port_{port}_health-probe_port for
// that port asks for a probe explicitly and it is then resolved as above;
// the service-wide annotations and appProtocol alone do not.
//
// Disabled is set when port_{port}_no_probe_rule or port_{port}_no_lb_rule
// is true, or for the UDP/SCTP case above. ProbeFor works for any port, with
// no per-port overrides for ports that have none.
func (s *ServiceSpec) ProbeFor(port v1.ServicePort) ProbeSpec {
	o := s.Ports[port.Port]
	if s.local && o.Probe.Port == nil {
		// The Service's one probe of healthCheckNodePort: service-wide
		// settings only (IgnoredLocalProbeKeys lists the per-port ones).
		o.Probe = ProbeOverrides{}
	}
	out := ProbeSpec{
		Protocol:          ProbeTCP,
		Port:              port.NodePort,
		IntervalInSeconds: DefaultProbeIntervalSeconds,
		NumberOfProbes:    DefaultNumberOfProbes,
		Disabled:          o.NoProbeRule || o.NoLBRule,
	}
	localDefaultPort := false
	if s.local {
		out.Protocol = ProbeHTTP
		out.Port = s.healthCheckNodePort
		localDefaultPort = true
		out.HealthCheck = o.Probe.Port == nil
	} else {
		if !probedByDefault(port.Protocol) && o.Probe.Protocol == "" && o.Probe.Port == nil {
			out.Disabled = true
		}
		if pr, ok := appProtocolProbe(port.AppProtocol); ok {
			out.Protocol = pr
		}
	}

	switch {
	case o.Probe.Protocol != "":
		out.Protocol = o.Probe.Protocol
	case s.Probe.Protocol != "":
		out.Protocol = s.Probe.Protocol
	}
	if ref := o.Probe.Port; ref != nil {
		out.Port = s.resolveProbePort(*ref)
		localDefaultPort = false
	}
	if out.Protocol != ProbeTCP {
		switch {
		case o.Probe.RequestPath != "":
			out.RequestPath = o.Probe.RequestPath
		case s.Probe.RequestPath != "":
			out.RequestPath = s.Probe.RequestPath
		case localDefaultPort:
			out.RequestPath = LocalProbeRequestPath
		default:
			out.RequestPath = DefaultProbeRequestPath
		}
	}
	switch {
	case o.Probe.IntervalInSeconds != nil:
		out.IntervalInSeconds = *o.Probe.IntervalInSeconds
	case s.Probe.IntervalInSeconds != nil:
		out.IntervalInSeconds = *s.Probe.IntervalInSeconds
	}
	switch {
	case o.Probe.NumberOfProbes != nil:
		out.NumberOfProbes = *o.Probe.NumberOfProbes
	case s.Probe.NumberOfProbes != nil:
		out.NumberOfProbes = *s.Probe.NumberOfProbes
	}
	return out
}

// probedByDefault reports whether a port of this protocol gets a probe on
// its NodePort by default: TCP does (an empty protocol means TCP); UDP and
// SCTP do not, since Azure's probes are Tcp, Http or Https only.
func probedByDefault(p v1.Protocol) bool {
	return p == v1.ProtocolTCP || p == ""
}

// appProtocolProbe maps a port's appProtocol to the probe protocol it
// implies: "http" to Http, "https" to Https, case-insensitive.
func appProtocolProbe(app *string) (ProbeProtocol, bool) {
	if app == nil {
		return "", false
	}
	switch v := strings.TrimSpace(*app); {
	case strings.EqualFold(v, "http"):
		return ProbeHTTP, true
	case strings.EqualFold(v, "https"):
		return ProbeHTTPS, true
	}
	return "", false
}

// resolveProbePort maps a health-probe_port value to the port to probe.
func (s *ServiceSpec) resolveProbePort(ref ProbePortRef) int32 {
	for _, sp := range s.servicePorts {
		if (ref.Name != "" && sp.Name == ref.Name) || (ref.Name == "" && sp.Port == ref.Number) {
			return sp.NodePort
		}
	}
	return ref.Number
}

// IgnoredLocalProbeKeys lists, sorted, the per-port probe annotations of an
// ExternalTrafficPolicy=Local Service that ProbeFor does not apply: the
// protocol, request-path, interval and num-of-probe of ports that use the
// Service's one healthCheckNodePort probe (no port_{port}_health-probe_port
// of their own). nil for a Cluster Service.
func (s *ServiceSpec) IgnoredLocalProbeKeys() []string {
	if !s.local {
		return nil
	}
	var out []string
	for port, o := range s.Ports {
		if o.Probe.Port != nil || o.NoProbeRule || o.NoLBRule {
			continue
		}
		if o.Probe.Protocol != "" {
			out = append(out, PortKey(port, PortSuffixProbeProtocol))
		}
		if o.Probe.RequestPath != "" {
			out = append(out, PortKey(port, PortSuffixProbeRequestPath))
		}
		if o.Probe.IntervalInSeconds != nil {
			out = append(out, PortKey(port, PortSuffixProbeInterval))
		}
		if o.Probe.NumberOfProbes != nil {
			out = append(out, PortKey(port, PortSuffixProbeNumOfProbe))
		}
	}
	sort.Strings(out)
	return out
}
