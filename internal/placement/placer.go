package placement

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/azlb/azlb/internal/config"
)

// configField is the azure.json key of the configuration list; errors name
// fields as configField[i].field.
const configField = "multipleStandardLoadBalancerConfigurations"

// internalSuffix is appended to a configuration name to form the name of its
// internal load balancer.
const internalSuffix = "-internal"

// compiled is one configuration with its selectors compiled. A nil selector
// field means "no selector" (matches everything for Services, and marks the
// configuration as selector-less for nodes).
type compiled struct {
	name           string
	allowPlacement bool
	primaryVMSet   string
	namespaceSel   labels.Selector
	serviceSel     labels.Selector
	nodeSel        labels.Selector
}

// selects reports whether the configuration has a Service selector that
// is not empty (namespace or labels): a Service it matches prefers it to
// the configurations without one.
func (c compiled) selects() bool {
	return (c.namespaceSel != nil && !c.namespaceSel.Empty()) || (c.serviceSel != nil && !c.serviceSel.Empty())
}

// Placer holds the compiled configurations. It is immutable after New and
// safe for concurrent use.
type Placer struct {
	configs     []compiled
	byLowerName map[string]int
	defaultName string
}

// allowsServicePlacement mirrors config's allowServicePlacement default:
// nil means true.
func allowsServicePlacement(c config.MultipleStandardLoadBalancerConfiguration) bool {
	return c.AllowServicePlacement == nil || *c.AllowServicePlacement
}

// compileSelector converts a LabelSelector; nil stays nil ("no selector").
// An empty, non-nil selector matches everything.
func compileSelector(i int, field string, s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("%s[%d].%s: invalid label selector: %w", configField, i, field, err)
	}
	return sel, nil
}

// New validates and compiles configs. defaultLBName is the name of the
// default load balancer (the cluster name, or loadBalancerName when set); a
// configuration with that name must exist. Every problem is reported, joined.
func New(configs []config.MultipleStandardLoadBalancerConfiguration, defaultLBName string) (*Placer, error) {
	if len(configs) == 0 {
		return nil, fmt.Errorf("%s is empty: at least the default load balancer %q needs a configuration", configField, defaultLBName)
	}
	p := &Placer{byLowerName: make(map[string]int, len(configs))}
	var errs []error
	primaries := map[string]int{}
	for i, c := range configs {
		name := strings.TrimSpace(c.Name)
		if name == "" {
			errs = append(errs, fmt.Errorf("%s[%d].name: must not be empty", configField, i))
		} else if name != c.Name {
			errs = append(errs, fmt.Errorf("%s[%d].name: %q must not have leading or trailing spaces", configField, i, c.Name))
		} else if j, dup := p.byLowerName[strings.ToLower(name)]; dup {
			errs = append(errs, fmt.Errorf("%s[%d].name: %q duplicates %s[%d].name (names are case-insensitive)", configField, i, name, configField, j))
		} else {
			p.byLowerName[strings.ToLower(name)] = i
		}
		if vs := c.PrimaryVMSet; vs != "" {
			if j, dup := primaries[strings.ToLower(vs)]; dup {
				errs = append(errs, fmt.Errorf("%s[%d].primaryVMSet: %q is already the primaryVMSet of %s[%d]; a VM set can be primary for one load balancer only", configField, i, vs, configField, j))
			} else {
				primaries[strings.ToLower(vs)] = i
			}
		}
		ns, err := compileSelector(i, "serviceNamespaceSelector", c.ServiceNamespaceSelector)
		errs = append(errs, err)
		svc, err := compileSelector(i, "serviceLabelSelector", c.ServiceLabelSelector)
		errs = append(errs, err)
		node, err := compileSelector(i, "nodeSelector", c.NodeSelector)
		errs = append(errs, err)
		p.configs = append(p.configs, compiled{
			name:           c.Name,
			allowPlacement: allowsServicePlacement(c),
			primaryVMSet:   c.PrimaryVMSet,
			namespaceSel:   ns,
			serviceSel:     svc,
			nodeSel:        node,
		})
	}
	if i, ok := p.lookup(defaultLBName); ok {
		p.defaultName = p.configs[i].name
	} else {
		errs = append(errs, fmt.Errorf("%s: the default load balancer %q must have a configuration", configField, defaultLBName))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// ConfigNames returns the configuration names in configuration order.
func (p *Placer) ConfigNames() []string {
	out := make([]string, len(p.configs))
	for i, c := range p.configs {
		out[i] = c.name
	}
	return out
}

// DefaultName returns the configuration name of the default load balancer as
// spelled in the configuration.
func (p *Placer) DefaultName() string { return p.defaultName }

// lookup returns the index of the configuration called name
// (case-insensitive, surrounding spaces ignored).
func (p *Placer) lookup(name string) (int, bool) {
	i, ok := p.byLowerName[strings.ToLower(strings.TrimSpace(name))]
	return i, ok
}

// ConfigName returns the configuration name (as spelled in the
// configuration) matching name case-insensitively.
func (p *Placer) ConfigName(name string) (string, bool) {
	i, ok := p.lookup(name)
	if !ok {
		return "", false
	}
	return p.configs[i].name, true
}

// ConfigForLoadBalancer maps an Azure load balancer name to its
// configuration: "<name>" is the public load balancer and "<name>-internal"
// the internal one. internal reports which of the two lbName is. A
// configuration literally named "x-internal" wins over the internal load
// balancer of "x".
func (p *Placer) ConfigForLoadBalancer(lbName string) (configName string, internal bool, ok bool) {
	if i, found := p.lookup(lbName); found {
		return p.configs[i].name, false, true
	}
	lower := strings.ToLower(lbName)
	if strings.HasSuffix(lower, internalSuffix) {
		if i, found := p.lookup(lbName[:len(lbName)-len(internalSuffix)]); found {
			return p.configs[i].name, true, true
		}
	}
	return "", false, false
}

// LoadBalancerName returns the Azure load balancer name for a configuration:
// the configuration name, with "-internal" appended for internal Services.
func LoadBalancerName(configName string, internal bool) string {
	if internal {
		return configName + internalSuffix
	}
	return configName
}

// lowerCounts re-keys counts by lower-cased name so that callers may key
// them by any spelling of the configuration name. Counts for the same name
// in different spellings are added.
func lowerCounts(counts map[string]int) map[string]int {
	out := make(map[string]int, len(counts))
	for k, v := range counts {
		out[strings.ToLower(strings.TrimSpace(k))] += v
	}
	return out
}

// pickFewest returns the index (into p.configs) among candidates with the
// lowest count; ties go to the lowest index. candidates must be non-empty and
// ascending.
func (p *Placer) pickFewest(candidates []int, counts map[string]int) int {
	best := candidates[0]
	bestCount := counts[strings.ToLower(p.configs[best].name)]
	for _, i := range candidates[1:] {
		if c := counts[strings.ToLower(p.configs[i].name)]; c < bestCount {
			best, bestCount = i, c
		}
	}
	return best
}
