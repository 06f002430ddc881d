// Package servicegateway is pod-based load balancing (Container Load
// Balancer): traffic of a LoadBalancer Service reaches its pods directly,
// through an Azure ServiceGateway. Operator documentation:
// docs/container-load-balancer.md.
//
// Contract:
//
//   - Per Service (keyed by its lower-cased UID) azlb owns a public IP
//     <uid>-pip (SKU StandardV2, Static, the Service's one IP family), a
//     load balancer <uid> (SKU Service, scope Public, frontend "frontend",
//     one empty pool <uid>, one rule rule-<protocol>-<port> per port, no
//     probes, floating IP off, TCP reset on TCP) and an Inbound service
//     <uid> in the cluster's ServiceGateway (names.ServiceGateway) pointing
//     at that pool. They are made in that order, after the finalizers are on
//     the Service; the ingress IP is written last. Load balancers are read
//     and written through the lbstore.Store; public IPs and the gateway
//     directly (they have no other writer).
//   - Balancer is the cloudprovider.LoadBalancer: EnsureLoadBalancer admits
//     the Service (a refusal is a Warning event, an error, and nothing in
//     Azure), records what it wants and returns its status unchanged;
//     EnsureLoadBalancerDeleted schedules the teardown and returns (azlb's
//     finalizer keeps the Service until the teardown is done);
//     UpdateLoadBalancer does nothing.
//   - Addresses: the diffTracker mirrors what the gateway holds and what the
//     ready endpoints want (pod IP under its node's InternalIP of the same
//     family); terminating endpoints that still serve, and pods held only by
//     azlb's readiness gate, count too (endpoints.go, readiness.go). No address naming a Service is sent before the Service is
//     registered, nor after its deletion started. One updateAddressLocations
//     is in flight at a time (a one-key workqueue); everything that changes
//     meanwhile goes in the next one. Services azlb does not own (outbound
//     ones such as default-natgw, anything not named by a UID) are never
//     removed from an address, nor registered, nor unregistered.
//   - Registrations: a Service's updateServices entries (register, and its
//     deletion's unlink and unregister) go through the registrar
//     (registrations.go), which sends them in batches of at most
//     azure.json's serviceGatewayUpdateServicesBatchSize, one call at a
//     time; the Service's operation waits (errQueued) and resumes with its
//     own answer. A batch the gateway refuses (400/422) is split in halves
//     until the refused entries are alone, so the others' changes are kept.
//   - Deletion drains first: the Service's addresses leave the gateway,
//     then its pool is unlinked, its load balancer deleted, it is
//     unregistered, its public IP deleted and the finalizers removed. A
//     missing resource counts as removed.
//   - Retries: Service operations back off from 1 s to 30 s (with jitter),
//     MaxBurst attempts in a row, then Cooldown; operations Azure refuses
//     for what the Service asks are parked until the Service changes.
//     Address updates retry transient failures the same way; a request the
//     gateway refuses is split to give up only what it refuses, unless a
//     deletion waits on it.
//   - Start-up reads the gateway, the load balancers and public IPs once and
//     compares: an unchanged cluster costs no write. Resources azlb made
//     (UID-named, with the cluster's tag, or registered in the gateway) for
//     Services that no longer exist are removed.
//   - Egress (egress.go): pods labelled EgressLabel=<identity> make, for
//     the first of them, the identity's public IP(s) <identity>-pip[-v6],
//     NAT gateway <identity> (attached to the gateway) and Outbound service
//     <identity>, and have their addresses name the identity (beside any
//     inbound Service). A leaving pod's finalizer (PodFinalizer) goes once
//     its address has left the gateway; the last pod's once the identity is
//     torn down: addresses, detach (explicit null), unregister, NAT
//     gateway, public IPs. Resources without the cluster's and the
//     identity's tags, and default-natgw, are never touched.
//   - No ARM or Kubernetes call is made while the engine's lock is held.
//     Time comes from an injected clock.
package servicegateway
