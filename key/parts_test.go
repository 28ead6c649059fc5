package key

import (
	"reflect"
	"testing"

	"dedup/registry"
)

// TestSchemaParts: the schema-framed parts of a DEDUP_KEY, in order, each
// with the format it reads, its path and its text as DEDUP_KEY spells it
// (blanks around it aside); the other sources are left out.
func TestSchemaParts(t *testing.T) {
	for _, c := range []struct {
		spec string
		want []SchemaPart
	}{
		{"key", nil},
		{"header:tenant,json:id", nil},
		{"avro:order.id", []SchemaPart{{registry.Avro, []string{"order", "id"}, "avro:order.id"}}},
		{"header:tenant, protobuf:id ,key,jsonschema:items.0.sku,avro:x", []SchemaPart{
			{registry.Protobuf, []string{"id"}, "protobuf:id"},
			{registry.JSON, []string{"items", "0", "sku"}, "jsonschema:items.0.sku"},
			{registry.Avro, []string{"x"}, "avro:x"},
		}},
	} {
		ks, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		got := ks.SchemaParts()
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, want %+v", c.spec, got, c.want)
		}
		if (len(got) > 0) != ks.Schemas() {
			t.Errorf("%q: %d schema parts, Schemas() %v", c.spec, len(got), ks.Schemas())
		}
	}
	// The paths are copies: changing one leaves the Source as it was.
	ks, _ := Parse("avro:a.b")
	ks.SchemaParts()[0].Path[0] = "z"
	if p := ks.SchemaParts()[0]; p.Path[0] != "a" || p.Spec != "avro:a.b" {
		t.Errorf("after changing a returned path: %+v", p)
	}
}
