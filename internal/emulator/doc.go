// Package emulator is an in-process, stateful emulator of the parts of Azure
// Resource Manager (ARM) and Azure Active Directory that azlb uses.
//
// Contract:
//
//   - *Emulator is an http.Handler serving three surfaces on one listener:
//     the AAD v2.0 token and OpenID-configuration endpoints
//     (/{tenant}/oauth2/v2.0/token, /{tenant}/v2.0/.well-known/openid-configuration),
//     the ARM REST API under /subscriptions/... (Microsoft.Resources resource
//     groups at api-version 2021-04-01 and later, Microsoft.Network at
//     api-version 2025-05-01), and an unauthenticated control API under
//     /_emulator/ (faults, latency, request log, state dump, reset).
//   - Behaviour follows the recorded ARM exchanges in
//     ../shared/fidelity/arm-recordings: status codes, polling headers
//     (Azure-AsyncOperation, Location), error bodies ({"error":{"code",
//     "message","details"}}), weak etags that change on every write and that
//     children share with their parent, provisioningState transitions, 404
//     shapes (ResourceGroupNotFound, ResourceNotFound, NotFound for children),
//     412 on If-Match/If-None-Match mismatch, 409 AnotherOperationInProgress,
//     429 SubscriptionRequestsThrottled with Retry-After from Azure's token
//     buckets (per subscription and principal, the subscription's global
//     ones, Microsoft.Network's own; Options.Throttle, throttle.go).
//   - Every ARM call needs a bearer token issued by this emulator for the one
//     configured client-credentials identity (Options.TenantID/ClientID/
//     ClientSecret). Secrets are never logged or echoed.
//   - Time (operation completion, the refill of the throttling buckets,
//     Retry-After) comes from Options.Clock, so tests can drive it with a
//     fake clock. Token lifetimes use wall-clock time.
//   - Bad input never panics and never yields a 500: request bodies are
//     validated and rejected with ARM-shaped 400s.
//   - Start serves the handler over TLS with a freshly generated CA (or plain
//     HTTP), bound to 127.0.0.1 by default.
//
// The emulator is deliberately strict: it must reject what ARM rejects, so a
// controller that passes against it does not fail against Azure.
package emulator
