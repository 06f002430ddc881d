// Package dataplane is the ARM emulator's optional data plane: it carries
// real TCP on loopback for the load balancers the emulator holds, so that
// what a client feels (which member serves a new connection, whether an
// established one survives) can be measured, not only which ARM property
// changed.
//
// Contract:
//
//   - The emulator drives it through one narrow call: Apply(Config) with
//     the whole desired state (every load balancing rule, its frontend
//     address and port, its members with their admin states and security, its probe,
//     idle timeout, TCP reset and distribution mode). Apply is idempotent
//     and never fails; what cannot be served (a frontend that is not a
//     loopback address, port 0, protocol All, a port already taken, a
//     rule the emulator marks Unserved such as floating IP on an internal
//     IPv6 frontend, which Azure drops) is reported by Status with the
//     reason.
//   - A served rule listens on its frontend address and port and relays
//     every accepted connection (TCP) or flow (UDP: a client address and
//     port) to one member on the backend port, chosen
//     by hashing the flow (rendezvous hashing over the 5-tuple, or the
//     2-/3-tuple of the SourceIP modes) among the eligible members. The
//     member sees the connection come from the frontend's address (the
//     client's cannot be kept by a relay).
//   - Eligibility follows Azure: on a rule with a probe, AdminState Up
//     always takes new flows, Down never does, None follows the probe; on a
//     rule without a probe every member does. Members are probed (TCP
//     connect, or HTTP(S) GET expecting 200) every Interval; Threshold
//     consecutive results change their state; an HTTP answer other than 200
//     takes a member out at once. A member starts Down until probed Up.
//   - Network security follows Azure: each member carries its Security (the
//     network security groups of its subnet and NIC, with service tags
//     resolved to prefixes by the emulator). Once the load balancer has
//     chosen a member, a new flow must pass the subnet's group, then the
//     NIC's (lowest priority number that matches wins; a level without a
//     group allows); the source is the client's address and port as seen
//     on loopback, the destination the frontend (floating IP) or the
//     member and backend port. A member with neither group gets nothing
//     unless Security.Open (Basic SKU). A denied TCP connection is reset
//     before a byte is relayed, a denied datagram dropped; probes pass the
//     same groups from ProbeSource (168.63.129.16; for IPv6 members from
//     both ProbeSourcesIPv6, link-local). Denials are counted per
//     security rule. Established flows are not evaluated again.
//   - Established TCP flows are never moved: a member going Down (probe or
//     admin state) keeps its flows; a UDP flow moves to another member with
//     its next datagram, as Azure does. A member removed from the pool has its
//     flows reset after the pool's drain period. A flow idle for the rule's
//     idle timeout is reset at both ends when TCP reset is on, otherwise
//     silently dropped (nothing is relayed any more).
//   - A member is connected to (and probed) at its Dial address when set
//     (a pod address the emulator maps onto loopback), else at Addr;
//     security groups and hashing always see Addr.
//   - It only ever connects to loopback addresses and only listens on
//     them (Loopback: 127.0.0.0/8; ::1 and IPv6 prefixes the machine
//     routes to its loopback device, bound with FreeBind): members
//     elsewhere are never probed nor chosen, so no packet leaves the
//     machine. An IPv6 frontend that is not routed so is retried like a
//     port that cannot be bound.
//   - Time (probe intervals, idle timeouts, drain periods) comes from
//     Options.Clock, so tests step it; single connection attempts use real
//     network timeouts.
//   - Close stops everything and waits for every goroutine it started.
package dataplane
