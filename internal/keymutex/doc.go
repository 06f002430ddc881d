// Package keymutex serialises work per key: one holder of a key at a time,
// different keys independent. An entry lives only while someone holds or
// waits for its key, so keys may come and go without bound (Service UIDs,
// scale sets, network interfaces). The zero Mutex is ready to use and safe
// for concurrent use. Locks are not reentrant, and waiting for one does
// not heed a context: hold a key only around work that ends.
package keymutex
