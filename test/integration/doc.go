// Package integration holds tests that run several of azlb's controllers
// together against the in-process ARM emulator and a fake clientset: they
// check that the controllers, which all write through one lbstore.Store,
// never undo each other's writes. Controllers do not import each other;
// only these tests (and cmd/azlb-controller-manager) see them all.
package integration
