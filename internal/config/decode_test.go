package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The checker flattens embedded structs without encoding/json's conflict
// rules; that is only right while no two JSON names of a struct collide,
// even ignoring case.
func TestConfigFieldNamesUnique(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Config](), reflect.TypeFor[MultipleStandardLoadBalancerConfiguration](), reflect.TypeFor[RateLimitConfig]()} {
		seen := map[string]string{}
		for _, f := range jsonFields(typ) {
			key := strings.ToLower(f.name)
			if prev, dup := seen[key]; dup {
				t.Errorf("%s: JSON names %q and %q collide", typ, prev, f.name)
			}
			seen[key] = f.name
		}
	}
	// The embedded stanzas are flattened: their fields are top-level keys.
	names := map[string]bool{}
	for _, f := range jsonFields(reflect.TypeFor[Config]()) {
		names[f.name] = true
	}
	for _, want := range []string{"aadClientSecret", "cloudProviderRateLimitQPS", "cloudProviderBackoffRetries", "loadBalancerRateLimit", "subscriptionId"} {
		if !names[want] {
			t.Errorf("field %q missing from %v", want, names)
		}
	}
	if names["unknownFields"] || names["AuthConfig"] {
		t.Error("unexported or embedded struct name listed as a field")
	}
}

// Every JSON field of Config loads: a document setting each one (to a value
// of the right type) yields no unknown field and no type error.
func TestEveryFieldIsKnown(t *testing.T) {
	var sample func(reflect.Type) any
	sample = func(t reflect.Type) any {
		switch t.Kind() {
		case reflect.Pointer:
			return sample(t.Elem())
		case reflect.String:
			return "x"
		case reflect.Bool:
			return false
		case reflect.Int, reflect.Int32, reflect.Int64:
			return json.Number("1") // as decoded with UseNumber
		case reflect.Float32, reflect.Float64:
			return json.Number("1.5")
		case reflect.Slice:
			return []any{}
		case reflect.Map, reflect.Struct:
			return map[string]any{}
		}
		return nil
	}
	m := map[string]any{}
	for _, f := range jsonFields(reflect.TypeFor[Config]()) {
		m[f.name] = sample(f.typ)
	}
	var chk checker
	chk.object(m, configType, "")
	if len(chk.unknown) != 0 || len(chk.errs) != 0 {
		t.Errorf("unknown %q, errors %v", chk.unknown, chk.errs)
	}
}

func TestLookupFieldPrefersExactMatch(t *testing.T) {
	fields := []jsonField{{name: "abc"}, {name: "ABC"}}
	if f := lookupField(fields, "ABC"); f == nil || f.name != "ABC" {
		t.Errorf("exact match not preferred: %v", f)
	}
	if f := lookupField(fields, "Abc"); f == nil || f.name != "abc" {
		t.Errorf("first case-insensitive match not used: %v", f)
	}
	if f := lookupField(fields, "abd"); f != nil {
		t.Errorf("matched %v", f)
	}
}
