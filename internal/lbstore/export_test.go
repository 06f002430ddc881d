package lbstore

// Forget drops a cached load balancer, for tests that need the next read to
// reach ARM.
func (s *Store) Forget(name string) { s.cache.forget(name) }

// WriteBody is the pool as a write sends it.
var WriteBody = writeBody

// TransferWaiters is the number of load balancer writes waiting for
// LBTransferBudget.
func (s *Store) TransferWaiters() int { return int(s.transfers.waiting.Load()) }
