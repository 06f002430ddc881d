// Command azlb-node-manager is azlb's cloud node manager: it runs on every
// node (a DaemonSet) and initializes that node, and only that node, from
// the Azure Instance Metadata Service, with no ARM credential and no ARM
// call. It runs the cloud-provider framework's cloud node controller over
// an informer limited to its own node (field selector metadata.name) and
// an InstancesV2 backed by instance metadata (internal/imds): providerID,
// the instance-type, region and zone labels and the addresses are set and
// the node.cloudprovider.kubernetes.io/uninitialized taint removed; the
// addresses (by the framework) and the labels (labelKeeper: a resized VM
// keeps its node) are refreshed every --node-status-update-frequency.
//
// See docs/node-lifecycle.md for when to run it instead of the controller
// manager's cloud-node-controller.
package main
