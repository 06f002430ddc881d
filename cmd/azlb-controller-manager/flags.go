package main

import (
	"fmt"

	cliflag "k8s.io/component-base/cli/flag"

	"github.com/azlb/azlb/internal/lbclass"
)

// azlbFlags are azlb's own command-line flags, beside the framework's.
// They are parsed with the framework's and checked by complete before the
// cloud and any controller are built; the controllers read the checked
// values when they start.
type azlbFlags struct {
	loadBalancerClass string

	// class is loadBalancerClass, checked.
	class lbclass.Class
	// clusterNameGiven: the framework's --cluster-name was set on the
	// command line (it then names the cluster when azure.json does not).
	clusterNameGiven bool
}

// flagSets registers the flags (shown under "Azlb flags" in --help).
func (f *azlbFlags) flagSets() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("azlb")
	fs.StringVar(&f.loadBalancerClass, "load-balancer-class", "",
		"The load-balancer class azlb serves. Empty (the default): the LoadBalancer Services without spec.loadBalancerClass, "+
			"as the default implementation. Set: only the LoadBalancer Services whose spec.loadBalancerClass is this value "+
			"(a label-style name such as example.com/azlb); the class-less ones are left to the default implementation, "+
			"e.g. AKS's own cloud controller manager. Not with pod-based load balancing (serviceGatewayEnabled).")
	return fss
}

// complete checks the flags.
func (f *azlbFlags) complete() error {
	c, err := lbclass.Parse(f.loadBalancerClass)
	if err != nil {
		return fmt.Errorf("--load-balancer-class: %w", err)
	}
	f.class = c
	return nil
}
