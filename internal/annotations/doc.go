// Package annotations turns the service.beta.kubernetes.io/ annotations of
// a LoadBalancer Service into a validated, typed ServiceSpec. It makes no
// ARM calls and uses no Kubernetes client.
//
// Contract:
//
//   - Parse reads every supported key (see keys.go), applies the documented
//     default for each absent one, and validates all of them. It reports
//     every problem at once: errors.Join of *Error values, one per problem,
//     in key order, each naming the annotation key, quoting the bad value
//     (cut at 64 characters) and stating the rule, e.g.
//     `service.beta.kubernetes.io/azure-load-balancer-health-probe-interval: "abc" is not an integer`.
//     On error the spec is nil. Parse never panics and never modifies the
//     Service.
//   - Booleans are "true" or "false", case-insensitive, surrounding spaces
//     ignored; anything else (including "", "1", "yes") is an error.
//     Integers are decimal. Optional string values that are blank count as
//     absent.
//   - Keys outside service.beta.kubernetes.io/ are ignored. Keys inside it
//     that look like Azure load balancer annotations (azure-*, port_*) but
//     are not supported are listed in ServiceSpec.Unsupported and otherwise
//     ignored, so manifests written for the upstream provider still parse.
//   - Per-port keys service.beta.kubernetes.io/port_{port}_{suffix} address
//     a Service port by number (spec.ports[].port, decimal without leading
//     zeros); naming a port the Service does not have is an error.
//   - Azure rules enforced here: tcp-idle-timeout 4-100 minutes; probe
//     interval >= 5 s; num-of-probe >= 1; interval × num-of-probe <= 120 s
//     for the service-wide values and for every port overriding either;
//     high-availability ports only on internal load balancers; public IP and
//     load balancer configuration names follow Azure's resource name rule;
//     DNS labels follow Azure's domain name label rule.
//   - ProbeFor resolves the effective probe of one port: per-port annotation
//     over service-wide annotation over default, field by field. The default
//     is Tcp on the port's NodePort (Http or Https when the port's
//     appProtocol is http or https), or, for ExternalTrafficPolicy=Local
//     Services, Http on spec.healthCheckNodePort at /healthz. UDP and SCTP
//     ports of ExternalTrafficPolicy=Cluster Services get no probe unless
//     their per-port probe protocol or port annotation asks for one.
//   - Reported remembers which unsupported keys each Service was told
//     about (an UnsupportedAnnotation event once per generation and set of
//     keys), bounded; the only state in the package.
//
// Values are not secrets; errors quote them.
package annotations
