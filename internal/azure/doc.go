// Package azure is azlb's only way to reach Azure Resource Manager. Every
// controller calls ARM through the narrow clients of this package, so their
// behaviour under throttling, conflicts and server errors is defined here,
// once.
//
// Contract:
//
//   - NewClients builds a LoadBalancerClient, BackendPoolClient, PublicIPClient,
//     SubnetClient and ServiceGatewayClient from azure.json (package internal/config): the cloud
//     (AzurePublicCloud, AzureChinaCloud, AzureUSGovernmentCloud, or custom
//     resourceManagerEndpoint/activeDirectoryAuthorityHost), the credential
//     (workload identity, managed identity, client secret or client
//     certificate, through
//     azidentity), an optional CA bundle (caCertFile) trusted for ARM and AAD
//     in addition to the system roots. There is no emulator-specific path.
//   - Write fence (SetWriteFence, installed under leader election): every
//     attempt of every write (not reads, polls or token requests) asks it
//     before it is sent (fencePolicy) and, with the transport NewClients
//     builds (armTransport), before each socket write again: writes use
//     their own HTTP/1.1 connections whose Write asks the fence. A refusal
//     is final and unwraps to ErrWriteFenced.
//   - Writes (CreateOrUpdate, Delete) send If-Match when given an etag, wait
//     for the long-running operation and return the final resource. List
//     follows nextLink to the end.
//   - Load balancer and backend pool Get and CreateOrUpdate go through the
//     SDK's pipeline (codecclient.go) with azlb's codecs: the pool codec
//     (poolcodec.go) writes and reads the SDK's JSON several times faster
//     than the SDK's generated code, and the load balancer codec
//     (lbcodec.go) uses it for a load balancer's pools and the SDK for the
//     rest. A write ARM completes synchronously is decoded once, from its
//     answer.
//   - SDK retries: statuses 408, 500, 502, 503, 504 (RetriableStatusCodes)
//     and transport errors are retried inside one call, MaxRetries 3 unless
//     cloudProviderBackoff/cloudProviderBackoffRetries say otherwise. 429 is
//     never retried by the SDK.
//   - Throttling: each client has a read gate (GET, HEAD) and a write gate
//     (everything else). An ARM 429 closes the gate until its Retry-After
//     and returns *ThrottleError; while a gate is closed, requests of its kind
//     return *ThrottleError without reaching ARM. The gate check runs inside
//     the SDK retry loop, for every attempt and every LRO poll.
//   - Client-side rate limiting: each client has a read and a write token
//     bucket (cloudProviderRateLimit*, overridden by loadBalancerRateLimit for
//     the load balancer and backend pool clients, publicIPAddressRateLimit
//     for the public IP client and serviceGatewayRateLimit for the service
//     gateway client).
//   - Service gateway POSTs (updateServices, updateAddressLocations) that
//     NRP completes synchronously with 200 are successes, although the SDK
//     rejects that status (CompletedSynchronously); an operation that ends
//     Failed, or a 200 carrying an error code, is an error. A call without a token fails at once with
//     *RateLimitedError; one token per method call.
//   - Errors are wrapped with the client, operation and object ("azure
//     loadBalancer get rg/name: ..."); use Classify, ThrottleRetryAfter and
//     errors.Is/As, never type assertions on the returned error.
//   - API request metrics (package internal/metrics) are recorded by pipeline
//     policies for every request: duration, errors by code, throttled and
//     rate-limited counts.
//   - The client secret and the certificate's password never appear in
//     logs, errors or String().
//   - Clients are safe for concurrent use. Time comes from an injected
//     k8s.io/utils/clock.PassiveClock (ClientOptions.Clock).
//
// Operator documentation: docs/azure-client.md.
package azure
