package config

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"
)

// azure.json tags, tagsMap and systemTags load in the Azure cloud
// provider's formats (issue 26): "k=v,k2=v2", a JSON object merged over
// it, and "k1,k2".
func TestTagsLoad(t *testing.T) {
	c, err := Load(bytes.NewReader(doc(t, map[string]any{
		"tags":       "team=web, env = prod,,",
		"tagsMap":    map[string]any{"env": "staging", "cost center": "42"},
		"systemTags": "owner, created-by",
	})))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.UnknownFields()) != 0 {
		t.Fatalf("unknown fields %v: tags, tagsMap and systemTags must be fields", c.UnknownFields())
	}
	rt := c.ResourceTags()
	want := map[string]string{"team": "web", "env": "staging", "cost center": "42"}
	if !maps.Equal(rt.tags, want) {
		t.Errorf("tags = %v, want %v (tagsMap wins)", rt.tags, want)
	}
	if strings.Join(rt.system, ",") != "owner,created-by" {
		t.Errorf("systemTags = %v", rt.system)
	}
}

func TestTagsValidation(t *testing.T) {
	for name, tc := range map[string]struct {
		field string
		value any
		want  string
	}{
		"too many":        {"tags", manyTags(MaxTagsPerObject + 1), "tags: 51 tags"},
		"forbidden char":  {"tags", "a/b=c", "tags: tag name \"a/b\""},
		"map forbidden":   {"tagsMap", map[string]any{"a?": "x"}, `tagsMap["a?"]: tag name`},
		"system bad char": {"systemTags", "a<b", "systemTags: tag name"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(bytes.NewReader(doc(t, map[string]any{tc.field: tc.value})))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func manyTags(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("k%d=v", i)
	}
	return strings.Join(items, ",")
}

// An azure.json tags item the Azure cloud provider drops (no "=", more
// than one, a blank key) is dropped, with a warning line naming it, not a
// refusal to start (issue 40 item 3).
func TestTagsDroppedItemsWarn(t *testing.T) {
	c, err := Load(bytes.NewReader(doc(t, map[string]any{"tags": "a=b,c= d,e =, =f,team,x=1=2"})))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"a": "b", "c": "d", "e": ""}; !maps.Equal(c.ResourceTags().tags, want) {
		t.Errorf("tags = %v, want %v", c.ResourceTags().tags, want)
	}
	warnings := strings.Join(c.UnknownFieldWarnings(), "\n")
	if !strings.Contains(warnings, `tags: "=f", "team", "x=1=2" are not a key=value pair`) {
		t.Errorf("warnings %q: want the dropped items named", warnings)
	}
}

func strMap(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = deref(v)
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func ptrMap(m map[string]string) map[string]*string {
	out := map[string]*string{}
	for k, v := range m {
		out[k] = &v
	}
	return out
}

// The rules of the Azure cloud provider's tagging page, row by row, plus
// azlb's own tags and the object's extra tags.
func TestResourceTagsApply(t *testing.T) {
	for name, tc := range map[string]struct {
		tags, system string
		extra        map[string]string
		have, want   map[string]string
		changed      bool
	}{
		"add":                            {tags: "a=b,c=d", have: map[string]string{}, want: map[string]string{"a": "b", "c": "d"}, changed: true},
		"update values":                  {tags: "a=b,c=d", have: map[string]string{"a": "x", "c": "y"}, want: map[string]string{"a": "b", "c": "d"}, changed: true},
		"no systemTags: nothing goes":    {tags: "a=b,c=d", have: map[string]string{"e": "f"}, want: map[string]string{"a": "b", "c": "d", "e": "f"}, changed: true},
		"system tag kept":                {tags: "c=d", system: "a", have: map[string]string{"a": "b"}, want: map[string]string{"a": "b", "c": "d"}, changed: true},
		"other tag removed":              {tags: "c=d", system: "x", have: map[string]string{"a": "b"}, want: map[string]string{"c": "d"}, changed: true},
		"own tags never removed":         {system: "x", have: map[string]string{"k8s-azure-cluster-name": "k"}, want: map[string]string{"k8s-azure-cluster-name": "k"}},
		"key case kept":                  {tags: "Team=web", have: map[string]string{"team": "db"}, want: map[string]string{"team": "web"}, changed: true},
		"extra wins over config":         {tags: "a=b", extra: map[string]string{"A": "z"}, have: map[string]string{}, want: map[string]string{"A": "z"}, changed: true},
		"unchanged":                      {tags: "a=b", have: map[string]string{"a": "b", "e": "f"}, want: map[string]string{"a": "b", "e": "f"}},
		"extra kept with systemTags set": {system: "x", extra: map[string]string{"k": "v"}, have: map[string]string{"k": "v", "o": "p"}, want: map[string]string{"k": "v"}, changed: true},
	} {
		t.Run(name, func(t *testing.T) {
			c := &Config{Tags: tc.tags, SystemTags: tc.system}
			have := ptrMap(tc.have)
			got, changed := c.ResourceTags().Apply(have, tc.extra)
			if changed != tc.changed || !maps.Equal(strMap(got), tc.want) {
				t.Fatalf("Apply = %v, %v; want %v, %v", strMap(got), changed, tc.want, tc.changed)
			}
			if len(have) != len(tc.have) {
				t.Fatal("Apply modified the map it was given")
			}
		})
	}
}

// --cluster-name names the cluster when azure.json has no clusterName;
// both set and different is an error (issue 26).
func TestUseClusterNameFlag(t *testing.T) {
	load := func(name any) *Config {
		t.Helper()
		c, err := Load(bytes.NewReader(doc(t, map[string]any{"clusterName": name})))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := load(nil)
	if err := c.UseClusterNameFlag("capz-cluster", true); err != nil || c.ClusterName != "capz-cluster" || c.DefaultLoadBalancerName() != "capz-cluster" {
		t.Fatalf("no clusterName: err %v, cluster %q, load balancer %q; want capz-cluster", err, c.ClusterName, c.DefaultLoadBalancerName())
	}
	c = load(nil)
	if err := c.UseClusterNameFlag("kubernetes", false); err != nil || c.ClusterName != DefaultClusterName {
		t.Fatalf("flag not given: err %v, cluster %q", err, c.ClusterName)
	}
	c = load("mine")
	if err := c.UseClusterNameFlag("mine", true); err != nil || c.ClusterName != "mine" {
		t.Fatalf("same name: err %v, cluster %q", err, c.ClusterName)
	}
	c = load("mine")
	err := c.UseClusterNameFlag("other", true)
	if err == nil || !strings.Contains(err.Error(), `"mine"`) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("different names: err %v, want one naming both", err)
	}
	if c.ClusterName != "mine" {
		t.Fatalf("cluster %q changed on error", c.ClusterName)
	}
}
