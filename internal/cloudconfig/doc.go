// Package cloudconfig loads the cloud configuration the controller runs
// with, as the Azure cloud provider reads it: azure.json (--cloud-config)
// and, unless its cloudConfigType is file, the Secret
// kube-system/azure-cloud-provider, key cloud-config (merge, the default:
// the fields the Secret sets override the file's, and a missing Secret or
// key leaves the file alone; secret: the Secret's document alone, and it
// must exist). The merge itself is config.LoadOverridden's.
//
// Failing closed: an error reading the Secret other than its absence (no
// RBAC grant, the API server unreachable) is an error, never a silent
// fallback to the file, since the Secret may hold what must apply.
//
// docs/configuration.md ("Configuration from a Secret") describes it for
// users; the chart grants the get on exactly that Secret.
package cloudconfig
