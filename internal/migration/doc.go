// Package migration moves a cluster off the Basic load balancers an earlier
// cloud provider made (Basic Load Balancer was retired on 2025-09-30) onto
// Standard ones, keeping every Service's IP.
//
// Contract:
//
//   - It applies with loadBalancerSku standard (Applies), and only to
//     managed Basic load balancers: those named after clusterName or a
//     configured load balancer name, or their "-internal" twins, found by
//     listing the load balancers' resource group (lbstore.Store.List). A
//     load balancer of any other name or SKU, and anything that is not a
//     load balancer, is never deleted.
//   - Migrator.Run, on each call, finds them and, in this order:
//     1. keeps the addresses: every Dynamic Basic public IP a Basic frontend
//     uses is made Static while it is still associated (a Dynamic one
//     loses its address once disassociated), with If-Match;
//     2. decouples the nodes: takes the Basic pools out of every scale set
//     model, scale set VM and network interface listing them (the
//     Decoupler: internal/nicpool);
//     3. deletes each Basic load balancer through the store
//     (lbstore.Store.Delete), which decouples once more and retries once
//     if a scale set joined meanwhile.
//     Run finds nothing to do once they are gone, so a crash or restart
//     between any two steps (or in the middle of one) finishes the
//     migration on the next Run; every step reads afresh and writes only
//     what is still to be done.
//   - What follows is the Service reconcile's (internal/provider): each
//     Service's Basic public IP is upgraded to Standard with UpgradePublicIP
//     (ARM requires it unassociated and Static; the address is kept), its
//     frontend is created on the Standard load balancer (an internal
//     Service's with its old ingress IP, Static), and the nodes join the
//     Standard load balancer's pool (NIC- or IP-based, as configured).
//   - Events on each Service of a Basic load balancer (EventReason*) and
//     log lines ("Basic load balancer migration: ...", one per step) tell
//     what happens; cloudprovider_azure_basic_migration_* metrics count it.
//   - Time comes from an injected k8s.io/utils/clock.
//
// Operator documentation: docs/migration.md.
package migration
