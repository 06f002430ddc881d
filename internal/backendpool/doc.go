// Package backendpool is the one definition of what an IP-based backend
// pool entry looks like and which nodes may be in a pool. The Service
// reconcile (cluster pools), the local service updater (dedicated pools) and
// the admin-state controller all write pools; sharing these functions is
// what keeps them from undoing each other's writes.
//
// An entry is named after its node, holds the node's first InternalIP of the
// pool's IP family, references the cluster's virtual network, and carries
// the AdminState the node's taints call for (adminstate.DesiredState).
// Entries are matched by IP address.
package backendpool
