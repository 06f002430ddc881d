// Package testutil holds what azlb's tests share: builders for nodes and
// Services, an event recorder that keeps what it records, polling with a
// deadline, an in-memory ARM for load balancers and backend pools (FakeARM),
// and helpers that start the ARM emulator and a running lbstore.Store,
// stopping them when the test ends. It is imported by tests only.
package testutil
