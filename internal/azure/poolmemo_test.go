package azure

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

)

// TestPoolMemo: an answer equal to the remembered one gives the pool the
// SDK decodes, as a private copy (changing one result, down to the values
// its pointers reach, changes no other); a different answer is decoded
// afresh; errors are the codec's.
func TestPoolMemo(t *testing.T) {
	var m poolMemo
	r := rand.New(rand.NewPCG(5, 6))
	var bodies [][]byte
	for len(bodies) < 40 {
		p := randomPool(r, 200)
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) >= memoMinBody {
			bodies = append(bodies, b)
		}
	}
	for i, body := range bodies {
		want := sdkDecode(t, body)
		first, err := m.decode("rg/lb/pool", body)
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.decode("RG/lb/POOL", append([]byte(nil), body...))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, want) || !reflect.DeepEqual(again, want) {
			t.Fatalf("body %d: the memo's pools differ from the SDK's", i)
		}
		scribble(reflect.ValueOf(&first).Elem())
		third, err := m.decode("rg/lb/pool", body)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, want) || !reflect.DeepEqual(third, want) {
			t.Fatalf("body %d: changing one decoded pool changed another", i)
		}
	}
	if _, err := m.decode("rg/lb/pool", []byte(`{"name":5}`+strings.Repeat(" ", memoMinBody))); err == nil ||
		!strings.Contains(err.Error(), "BackendAddressPool") {
		t.Errorf("bad body: err = %v; want the codec's error", err)
	}
}

// scribble overwrites every string and integer reachable from v.
func scribble(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			scribble(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				scribble(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			scribble(v.Index(i))
		}
	case reflect.String:
		v.SetString("scribbled")
	case reflect.Int32, reflect.Int64:
		v.SetInt(-7)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	}
}

// TestPoolMemoBounded: the memo keeps at most memoMaxBytes of answers.
func TestPoolMemoBounded(t *testing.T) {
	var m poolMemo
	body, err := json.Marshal(benchPool(400))
	if err != nil {
		t.Fatal(err)
	}
	n := 3*memoMaxBytes/len(body) + 1
	for i := range n {
		if _, err := m.decode(fmt.Sprintf("rg/lb/pool-%d", i), body); err != nil {
			t.Fatal(err)
		}
	}
	if m.size > memoMaxBytes || m.size != len(m.entries)*len(body) {
		t.Errorf("memo holds %d bytes in %d entries; want at most %d", m.size, len(m.entries), memoMaxBytes)
	}
}
