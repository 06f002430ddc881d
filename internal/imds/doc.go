// Package imds reads the Azure Instance Metadata Service (IMDS) of the VM
// a process runs on, and answers the cloud-provider framework's
// InstancesV2 questions about that VM's node from it alone: no ARM
// credential and no ARM call.
//
// Client fetches /metadata/instance (with the Metadata: true header and a
// fixed api-version); Instance.NodeMetadata turns the answer into the
// providerID, instance type, region, zone and addresses azlb's controller
// manager derives from ARM for the same VM (see docs/node-lifecycle.md);
// Instances and Cloud restrict those answers to one node, for
// azlb-node-manager.
package imds
