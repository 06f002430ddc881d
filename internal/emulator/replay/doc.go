// Package replay replays recorded ARM exchanges (go-vcr v2 cassettes, as in
// ../shared/fidelity/arm-recordings) against an ARM endpoint such as the
// emulator, and reports per interaction whether the endpoint answered like
// Azure did.
//
// Contract:
//
//   - Requests are sent in recorded order with the recorded method, body and
//     If-Match/If-None-Match headers, the host rewritten to the target, and a
//     bearer token from the target's AAD endpoint.
//   - A request to an operation-status URL (.../operations/... or
//     .../operationresults/...) is sent to the URL the target itself returned
//     in the latest Azure-AsyncOperation or Location header instead.
//   - A recorded If-Match holding the recorder's zeroed etag is replaced with
//     the target's current etag for that resource (learnt from earlier
//     responses); any other If-Match value (for example "invalid") is sent
//     as recorded.
//   - A recording may start from pre-existing state: when a recorded PUT
//     answered 200 for a resource the cassette never created, the engine
//     first creates it with the same request (a "seed" step, not compared).
//   - An interaction passes when the status code is the recorded one, the
//     JSON key sets (recursive; array elements compared by the union of
//     their keys; values ignored) are equal, and the presence of the
//     Azure-AsyncOperation, Location and (on 200 GETs) ETag headers matches.
package replay
