// Package lbclass decides which LoadBalancer Services are azlb's.
//
// Kubernetes lets several load-balancer implementations share a cluster
// through spec.loadBalancerClass (KEP-1959): the default implementation
// (the cloud provider) serves the LoadBalancer Services without a class,
// and an implementation that is given a class serves only the Services of
// that class. azlb is either, chosen by --load-balancer-class:
//
//   - unset (the zero Class), azlb is the default implementation, as the
//     cloud-provider framework's service controller is: it serves the
//     LoadBalancer Services without a class;
//   - set, it serves only the LoadBalancer Services of that class, and
//     leaves the class-less ones to the default implementation (on AKS,
//     AKS's own cloud controller manager).
//
// Class.Owns is the one predicate every azlb controller asks before it
// acts for a Service. The load balancers, pools and public IPs of a
// Service it does not own are another implementation's, never azlb's to
// create, change or delete.
//
// Two facts of the API server shape how the predicate is used
// (pkg/apis/core/validation, pkg/registry/core/service): a LoadBalancer
// Service's class cannot change, and it is wiped when the Service stops
// being a LoadBalancer. A Service therefore never moves between
// implementations while it is a LoadBalancer, and a Service that is no
// longer one carries no class to tell whose it was: cleaning up after it
// is decided by what azlb finds in Azure for it (its frontends and public
// IPs), not by this predicate.
package lbclass
