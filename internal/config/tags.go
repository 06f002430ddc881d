package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Azure's limits on resource tags: a name of at most 512 characters
// without < > % & \ ? /, a value of at most 256 characters, at most 50
// tags on a resource.
const (
	MaxTagNameLength  = 512
	MaxTagValueLength = 256
	MaxTagsPerObject  = 50
	tagNameForbidden  = `<>%&\?/`
)

// OwnTagPrefix starts the keys of the tags azlb itself writes
// (k8s-azure-service, k8s-azure-cluster-name): they are never removed,
// systemTags or not.
const OwnTagPrefix = "k8s-azure-"

// ParseTags reads tags written the way the Azure cloud provider reads
// azure.json tags and the azure-pip-tags annotation: "k1=v1,k2=v2", keys
// and values trimmed, empty items ignored. A later key replaces an earlier
// one that differs only in case (Azure tag names are case-insensitive).
//
// Like the Azure cloud provider, it drops, rather than refuses, an item
// that is not exactly one key=value pair ("team", "a=b=c") or whose key is
// blank ("=x", " = "): dropped lists them, trimmed, in order, for the
// caller to tell the user. An error is a tag Azure would refuse (a
// forbidden character, too long, too many tags).
func ParseTags(s string) (tags map[string]string, dropped []string, err error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) != 2 || strings.TrimSpace(parts[0]) == "" {
			dropped = append(dropped, strings.TrimSpace(item))
			continue
		}
		k, v := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
		if err := checkTag(k, v); err != nil {
			return nil, nil, err
		}
		putTag(out, k, v)
	}
	if len(out) > MaxTagsPerObject {
		return nil, nil, fmt.Errorf("%d tags: Azure allows at most %d on a resource", len(out), MaxTagsPerObject)
	}
	return out, dropped, nil
}

// DroppedTags says which items ParseTags dropped, and why.
func DroppedTags(dropped []string) string {
	q := make([]string, len(dropped))
	for i, item := range dropped {
		q[i] = fmt.Sprintf("%q", item)
	}
	what := "is not"
	if len(q) > 1 {
		what = "are not"
	}
	return strings.Join(q, ", ") + " " + what + ` a key=value pair with a non-blank key: dropped, as the Azure cloud provider drops it (write key=value pairs separated by commas, e.g. "team=web,env=prod")`
}

// checkTag applies Azure's rules on a tag name and value.
func checkTag(k, v string) error {
	switch {
	case strings.ContainsAny(k, tagNameForbidden):
		return fmt.Errorf("tag name %q contains one of %s, which Azure does not accept in tag names", k, tagNameForbidden)
	case len(k) > MaxTagNameLength:
		return fmt.Errorf("tag name %q is longer than %d characters", k, MaxTagNameLength)
	case len(v) > MaxTagValueLength:
		return fmt.Errorf("the value of tag %q is longer than %d characters", k, MaxTagValueLength)
	}
	return nil
}

// putTag sets k=v in m, replacing a key equal to k but for case.
func putTag(m map[string]string, k, v string) {
	for old := range m {
		if strings.EqualFold(old, k) && old != k {
			delete(m, old)
		}
	}
	m[k] = v
}

// ResourceTags is the tag policy of azure.json: the tags every load
// balancer, public IP and network security group azlb manages carries, and
// the keys it never removes. The zero value adds and removes nothing.
type ResourceTags struct {
	tags   map[string]string
	system []string
}

// ResourceTags parses tags, tagsMap and systemTags (Validate has checked
// them; an invalid tags string counts as empty here). tagsMap wins over
// tags for a key both set, as in the Azure cloud provider.
func (c *Config) ResourceTags() ResourceTags {
	t := ResourceTags{tags: map[string]string{}}
	if parsed, _, err := ParseTags(c.Tags); err == nil {
		t.tags = parsed
	}
	for _, k := range slices.Sorted(maps.Keys(c.TagsMap)) {
		if key := strings.TrimSpace(k); key != "" {
			putTag(t.tags, key, strings.TrimSpace(c.TagsMap[k]))
		}
	}
	for _, k := range strings.Split(c.SystemTags, ",") {
		if k = strings.TrimSpace(k); k != "" {
			t.system = append(t.system, k)
		}
	}
	return t
}

// Empty reports whether the policy neither adds nor removes a tag.
func (t ResourceTags) Empty() bool { return len(t.tags) == 0 && len(t.system) == 0 }

// Apply returns the tags an object should carry, given those it has
// (current) and the object's own (extra: azlb's k8s-azure-* tags, an
// annotation's tags), which win over the configured ones:
//   - every wanted tag is added or set to its value (a key that differs
//     only in case keeps the object's spelling);
//   - with systemTags set, a tag that is wanted by nobody, is not a system
//     tag and is not one of azlb's own (OwnTagPrefix) is removed; without
//     systemTags nothing is removed (azlb cannot tell whose it is).
//
// changed is false, and current is returned as it is, when nothing
// differs. current is never modified.
func (t ResourceTags) Apply(current map[string]*string, extra map[string]string) (map[string]*string, bool) {
	want := make(map[string]string, len(t.tags)+len(extra))
	for k, v := range t.tags {
		putTag(want, k, v)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		putTag(want, k, extra[k])
	}
	out := make(map[string]*string, len(current)+len(want))
	for k, v := range current {
		out[k] = v
	}
	changed := false
	for _, k := range slices.Sorted(maps.Keys(want)) {
		v := want[k]
		key, ok := findFold(out, k)
		switch {
		case !ok:
			out[k] = &v
			changed = true
		case out[key] == nil || *out[key] != v:
			out[key] = &v
			changed = true
		}
	}
	if len(t.system) > 0 {
		for k := range out {
			if _, wanted := findFold(want, k); wanted || t.isSystem(k) || strings.HasPrefix(strings.ToLower(k), OwnTagPrefix) {
				continue
			}
			delete(out, k)
			changed = true
		}
	}
	if !changed {
		return current, false
	}
	return out, true
}

func (t ResourceTags) isSystem(k string) bool {
	return slices.ContainsFunc(t.system, func(s string) bool { return strings.EqualFold(s, k) })
}

// findFold finds the key of m equal to k but for case.
func findFold[V any](m map[string]V, k string) (string, bool) {
	if _, ok := m[k]; ok {
		return k, true
	}
	for key := range m {
		if strings.EqualFold(key, k) {
			return key, true
		}
	}
	return "", false
}

// tags checks tags, tagsMap and systemTags.
func (v *validator) tags(d *Config) {
	if _, _, err := ParseTags(d.Tags); err != nil {
		v.add("tags", err.Error())
	}
	for _, k := range slices.Sorted(maps.Keys(d.TagsMap)) {
		key := strings.TrimSpace(k)
		if key == "" {
			v.add("tagsMap", "has an empty tag name")
			continue
		}
		if err := checkTag(key, strings.TrimSpace(d.TagsMap[k])); err != nil {
			v.add(fmt.Sprintf("tagsMap[%q]", k), err.Error())
		}
	}
	if n := len(d.ResourceTags().tags); n > MaxTagsPerObject {
		v.add("tagsMap", fmt.Sprintf("tags and tagsMap give %d tags: Azure allows at most %d on a resource", n, MaxTagsPerObject))
	}
	for _, k := range strings.Split(d.SystemTags, ",") {
		if k = strings.TrimSpace(k); k != "" && strings.ContainsAny(k, tagNameForbidden) {
			v.add("systemTags", fmt.Sprintf("tag name %q contains one of %s, which Azure does not accept in tag names", k, tagNameForbidden))
		}
	}
}

// UseClusterNameFlag lets the controller manager's --cluster-name name the
// cluster (pools, the default load balancer, the cluster tag) when
// azure.json has no clusterName, as the Azure cloud provider does. given
// is whether the flag was set on the command line. Both set and different
// (ignoring case) is an error.
func (c *Config) UseClusterNameFlag(name string, given bool) error {
	name = strings.TrimSpace(name)
	if !given || name == "" {
		return nil
	}
	if c.clusterNameDefaulted || c.ClusterName == "" {
		c.ClusterName = name
		c.clusterNameDefaulted = false
		return nil
	}
	if !strings.EqualFold(c.ClusterName, name) {
		return fmt.Errorf("azure.json clusterName is %q and --cluster-name is %q: they name the same thing (the cluster's load balancer, pools and tags); set only one of them, or the same name in both", c.ClusterName, name)
	}
	return nil
}
