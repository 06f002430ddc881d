package localservice

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/azlb/azlb/internal/lbclass"
)

// The updater writes only the pools of the Services of the class azlb
// serves: a Local Service of another class (or, with a class, one without)
// is another implementation's, and a pool of its name is not azlb's to
// fill, even on a load balancer of azlb's.
func TestOnlyServicesOfItsClass(t *testing.T) {
	const class = "azlb.example/test"
	classed := func(c string) func(*v1.Service) {
		return func(s *v1.Service) { s.Spec.LoadBalancerClass = ptr.To(c) }
	}
	classless := func(*v1.Service) {}
	for _, tc := range []struct {
		name         string
		class        lbclass.Class
		ours, theirs func(*v1.Service)
	}{
		{"default implementation, a classed Service", "", classless, classed("other.example/lb")},
		{"a class, a class-less Service", class, classed(class), classless},
		{"a class, another class", class, classed(class), classed("other.example/lb")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{mutate: func(o *Options) { o.Class = tc.class }})
			h.addNode("n1", "10.240.0.4")
			h.addService("default", "theirs", tc.theirs)
			h.register("default/theirs", testLB)
			h.addService("default", "ours", tc.ours)
			h.register("default/ours", testLB)
			theirsPool, oursPool := poolOf("default/theirs", v1.IPv4Protocol), poolOf("default/ours", v1.IPv4Protocol)

			// Events are handled in order: once ours is queued, theirs was
			// handled.
			h.setSlice("default", "theirs", "theirs-a", "n1")
			h.setEndpoints("default", "ours", "n1")
			if st := h.queued("default/theirs", theirsPool); st != nil {
				t.Fatalf("the other implementation's Service was queued: %+v", st)
			}
			h.process()
			if got := h.poolNodes(oursPool); !slices.Equal(got, []string{"n1"}) {
				t.Errorf("pool of azlb's Service holds %v, want [n1]", got)
			}
			if got := h.poolNodes(theirsPool); len(got) != 0 {
				t.Errorf("pool of the other implementation's Service holds %v, want nothing", got)
			}
			if _, puts := h.armCalls(theirsPool); puts != 0 {
				t.Errorf("%d PUTs of the other implementation's pool", puts)
			}
		})
	}
}
