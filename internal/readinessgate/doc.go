// Package readinessgate makes a rollout wait for the load balancer, with
// pod-based load balancing (the service gateway): a pod that declares
// azlb's readiness gate becomes Ready only once the gateway holds its
// address for every azlb Service that selects it. Operator documentation:
// docs/admin-state.md, "Pod readiness gates".
//
// Contract:
//
//   - Opt-in twice: the pod's namespace carries the label
//     LabelOptIn=enabled, and the pod declares the readiness gate
//     ConditionType in spec.readinessGates. azlb runs no admission webhook,
//     so it never adds the gate itself (readiness gates can only be set when
//     a pod is created); a pod without it, or outside an opted-in
//     namespace, is never touched.
//   - The condition is written by the controller only, True only, with a
//     strategic-merge patch of the pod's status subresource carrying the
//     pod's UID (conditions merge by type; the kubelet's are untouched):
//     reason LoadBalancerReady when the gateway holds one of the pod's
//     addresses for every LoadBalancer Service it serves that selects the
//     pod (or NotLoadBalanced when none does; a Service the gateway has no
//     record of, or whose pods it withholds, is not waited for), reason Timeout when that has
//     not happened within Options.Timeout (DefaultTimeout, fail-open: a stuck
//     gateway never blocks a rollout for ever; a Warning event
//     LoadBalancerReadinessGateTimeout on the pod). Once True it is never
//     written again.
//   - A pod held by the gate (opted in, declaring it, containers ready, not
//     being deleted) is one whose endpoint the gateway registers although
//     it is not ready (Controller.HeldByGate, which the engine consults):
//     the pod cannot be Ready before the gate is True, so the gateway must
//     take its address first. It stays held after the gate turns True,
//     until the endpoint itself is ready, so the address never leaves in
//     between. Gateway.RecheckEndpoints asks the engine to read the
//     Service's endpoints again, since no EndpointSlice changes when a
//     pod's containers become ready behind a gate.
//   - The pods informer lists every pod in the cluster (the opt-in label is
//     on namespaces, which a list cannot select on): that is the memory
//     this costs, with pod-based load balancing only.
//   - Time runs from the pod's ContainersReady transition (when it would
//     have been Ready without the gate); the histogram
//     cloudprovider_azure_pod_readiness_gate_duration_seconds{result}
//     records it per pod (result ready, not_load_balanced or timeout).
//   - It imports no controller: the gateway is reached through the Gateway
//     interface, wired by cmd/azlb-controller-manager. Time comes from an
//     injected k8s.io/utils/clock; goroutines end when Run's context ends.
package readinessgate
