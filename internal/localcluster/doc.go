// Package localcluster brings up a real Kubernetes cluster on one machine,
// for `make test-k8s-e2e` and `make sandbox SANDBOX=nodes`: a control plane
// (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, CoreDNS
// with no forwarder) on the host, and worker nodes each in a network
// namespace of its own with its own containerd, kubelet and kube-proxy, pods
// on a bridge CNI. azlb (the cloud controller manager) and the ARM emulator
// are the caller's: Up returns the addresses they need.
//
// Contract:
//
//   - Everything it creates is its own and is named or placed so: network
//     namespaces and a bridge of its own, two veth links in the host's
//     namespace (azlb<slot>h to the nodes' network, azlb<slot>c to the load
//     balancer's client side) with the routes to the cluster's ranges over
//     them, processes it started (their pids in <dir>/state.json), mounts
//     and files under its directory, and cgroups named after its nodes.
//     Nothing routes or NATs to an address outside the machine: no
//     namespace of the cluster has a default route, and the host's global
//     settings (ip_forward, sysctls, firewall rules) are never written.
//     Kubelets, which rewrite host-wide sysctls, run in a mount namespace
//     of their own where those files read as what they want
//     (protectKernelDefaults then only reads them).
//   - Several clusters can run at once on one machine: each takes a slot
//     (0 to MaxSlots-1, claimed under /run/azlb-localcluster) that picks
//     its address ranges (Plan) and its names.
//   - The load balancer's namespace (Plan.LBNetNS) is where the emulator's
//     data plane serves the cluster's frontends (public IPs in
//     Plan.Public): clients on the host reach them from Plan.ClientIP, a
//     node sees the client's address, and the nodes' replies to clients go
//     back through it (docs/data-plane.md, Real nodes).
//   - Down stops everything Up started, waits for it, unmounts, removes
//     the cgroups, namespaces and links, and frees the slot: the machine is
//     as it was (Snapshot compares). It works from <dir>/state.json alone
//     (Down of a detached cluster from another process, or of one whose
//     owner died), and a slot whose owner died is cleaned up before it is
//     taken again.
//   - Binaries come from BinDir (hack/build-tools.sh cluster), images from
//     BinDir/images (hack/test-images.sh), Debian packages from
//     hack/node-packages.sh; Up says which is missing. Images are imported
//     into each node's containerd and never pulled.
package localcluster
