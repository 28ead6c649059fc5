package schema

import (
	"strconv"
	"strings"
	"testing"
)

// jsonSchemaOrder is a draft-07 document of the kind JsonSchemaConverter
// and the Confluent serializers register: definitions, $ref, nullable
// types, composition.
const jsonSchemaOrder = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "title": "Order",
  "type": "object",
  "definitions": {
    "Id": {"type": "string", "minLength": 1},
    "Customer": {
      "type": "object",
      "properties": {"id": {"$ref": "#/definitions/Id"}, "tags": {"type": "array", "items": {"type": "string"}}}
    }
  },
  "properties": {
    "id": {"type": "string"},
    "seq": {"type": "integer"},
    "price": {"type": "number"},
    "paid": {"type": "boolean"},
    "note": {"type": ["null", "string"]},
    "gone": {"type": "null"},
    "kind": {"enum": ["a", "b", null]},
    "version": {"const": 2},
    "loose": {"description": "anything"},
    "customer": {"$ref": "#/definitions/Customer"},
    "maybe_customer": {"oneOf": [{"type": "null"}, {"$ref": "#/definitions/Customer"}]},
    "either": {"anyOf": [{"type": "object"}, {"type": "integer"}]},
    "merged": {"allOf": [{"type": "object"}, {"properties": {"ref": {"type": "string"}}}]},
    "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "object"}], "additionalItems": {"type": "integer"}},
    "meta": {"type": "object", "additionalProperties": {"type": "string"}},
    "weird~/name": {"type": "string"},
    "pointer": {"$ref": "#/properties/weird~0~1name"}
  }
}`

func jsonSchemaPath(p string) []string { return strings.Split(p, ".") }

// TestCheckJSONPath: each path of jsonSchemaOrder as the JSON scanner
// would meet it in a record: scalars (nullable ones too) Found, objects and
// arrays NotScalar, what the schema does not describe Missing.
func TestCheckJSONPath(t *testing.T) {
	for path, want := range map[string]Status{
		"id":                      Found,
		"seq":                     Found,
		"price":                   Found,
		"paid":                    Found,
		"note":                    Found, // null or a string
		"gone":                    Missing,
		"kind":                    Found,
		"version":                 Found,
		"loose":                   Missing, // no type: nothing says a scalar is there
		"absent":                  Missing,
		"id.more":                 Missing, // past a scalar
		"customer":                NotScalar,
		"customer.id":             Found, // through two $refs
		"customer.tags":           NotScalar,
		"customer.name":           Missing,
		"maybe_customer.id":       Found, // through oneOf, then $ref
		"maybe_customer":          NotScalar,
		"either":                  Found, // one branch is a scalar
		"merged":                  NotScalar,
		"merged.ref":              Found, // a property from an allOf branch
		"lines":                   NotScalar,
		"lines.0":                 NotScalar,
		"lines.3.sku":             Found, // array index into items
		"lines.sku":               Missing,
		"lines.-1.sku":            Missing,
		"pair.0":                  Found,
		"pair.1":                  NotScalar,
		"pair.7":                  Found, // additionalItems
		"meta":                    NotScalar,
		"meta.x":                  Missing, // additionalProperties: no name known to exist
		"weird~/name":             Found,
		"pointer":                 Found, // ~0 and ~1 unescaped
		"definitions.Id":          Missing,
		"customer.id.nothing":     Missing,
		"maybe_customer.tags.0":   Found,
		"maybe_customer.tags.0.x": Missing,
	} {
		if got := CheckJSONPath(jsonSchemaOrder, nil, jsonSchemaPath(path)); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

// TestCheckJSONPathDrafts: the same question under draft 4 (definitions,
// "id"), 2019-09 and 2020-12 ($defs, prefixItems).
func TestCheckJSONPathDrafts(t *testing.T) {
	for _, c := range []struct {
		name, text, path string
		want             Status
	}{
		{"draft 4", `{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://example.com/o.json","definitions":{"Id":{"type":"integer"}},"properties":{"id":{"$ref":"#/definitions/Id"}}}`, "id", Found},
		{"draft 4 missing", `{"$schema":"http://json-schema.org/draft-04/schema#","definitions":{"Id":{"type":"integer"}},"properties":{"id":{"$ref":"#/definitions/Id"}}}`, "key", Missing},
		{"2019-09", `{"$schema":"https://json-schema.org/draft/2019-09/schema","$defs":{"Id":{"type":["string","null"]}},"properties":{"id":{"$ref":"#/$defs/Id"}}}`, "id", Found},
		{"2020-12 $defs object", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"O":{"type":"object"}},"properties":{"o":{"$ref":"#/$defs/O"}}}`, "o", NotScalar},
		{"2020-12 prefixItems", `{"properties":{"t":{"type":"array","prefixItems":[{"type":"object"}],"items":{"type":"string"}}}}`, "t.0", NotScalar},
		{"2020-12 items after prefixItems", `{"properties":{"t":{"type":"array","prefixItems":[{"type":"object"}],"items":{"type":"string"}}}}`, "t.4", Found},
		{"$ref beside type (2019+)", `{"$defs":{"S":{"minLength":1}},"properties":{"id":{"type":"string","$ref":"#/$defs/S"}}}`, "id", Found},
		{"percent-encoded pointer", `{"$defs":{"a b":{"type":"string"}},"properties":{"id":{"$ref":"#/$defs/a%20b"}}}`, "id", Found},
		{"unresolvable $ref", `{"properties":{"id":{"$ref":"#/$defs/Nope"}}}`, "id", Missing},
		{"anchor $ref (not followed)", `{"$defs":{"S":{"$anchor":"s","type":"string"}},"properties":{"id":{"$ref":"#s"}}}`, "id", Missing},
		{"boolean schema", `{"properties":{"id":true}}`, "id", Missing},
		{"root scalar", `{"type":"string"}`, "id", Missing},
		{"object by its keywords", `{"properties":{"o":{"properties":{"a":{"type":"string"}}}}}`, "o", NotScalar},
		{"type array without scalars", `{"properties":{"o":{"type":["object","null"]}}}`, "o", NotScalar},
		{"not JSON", `{"properties":`, "id", Undecodable},
	} {
		if got := CheckJSONPath(c.text, nil, jsonSchemaPath(c.path)); got != c.want {
			t.Errorf("%s: %s: %v, want %v", c.name, c.path, got, c.want)
		}
	}
}

// TestCheckJSONPathReferences: a $ref to another document goes by the
// reference's name (as Confluent schema references give it), with or
// without a pointer into it, by a name relative to the document's $id, and
// by the referenced document's own $id; that document's own "#/..." refs
// point into it, not into the schema.
func TestCheckJSONPathReferences(t *testing.T) {
	customer := Reference{Name: "customer.json", Text: `{
	  "$id": "https://schemas.example.com/customer.json",
	  "type": "object",
	  "definitions": {"Id": {"type": "string"}},
	  "properties": {"id": {"$ref": "#/definitions/Id"}, "address": {"$ref": "address.json"}}
	}`}
	address := Reference{Name: "address.json", Text: `{"type":"object","properties":{"zip":{"type":"string"},"lines":{"type":"array"}}}`}
	refs := []Reference{address, customer}
	text := `{
	  "$id": "https://schemas.example.com/order.json",
	  "definitions": {"Id": {"type": "object"}},
	  "properties": {
	    "customer": {"$ref": "customer.json"},
	    "customer_id": {"$ref": "customer.json#/definitions/Id"},
	    "by_id": {"$ref": "https://schemas.example.com/customer.json#/properties/id"},
	    "relative": {"$ref": "./customer.json"},
	    "local": {"$ref": "#/definitions/Id"},
	    "unknown": {"$ref": "nowhere.json"}
	  }
	}`
	for path, want := range map[string]Status{
		"customer":               NotScalar,
		"customer.id":            Found,     // customer.json's own #/definitions/Id, a string
		"local":                  NotScalar, // the schema's #/definitions/Id, an object
		"customer_id":            Found,
		"by_id":                  Found,
		"relative.id":            Found,
		"customer.address.zip":   Found, // a reference's reference
		"customer.address.lines": NotScalar,
		"customer.address.city":  Missing,
		"unknown":                Missing,
	} {
		if got := CheckJSONPath(text, refs, jsonSchemaPath(path)); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
	if got := CheckJSONPath(text, []Reference{{Name: "customer.json", Text: "{"}}, []string{"customer"}); got != Undecodable {
		t.Errorf("a reference that is not JSON: %v, want undecodable", got)
	}
}

// TestCheckJSONPathRecursive: recursive schemas, through $ref and through
// composition that loops without going down the path, end; a path that
// goes down a recursive type is followed as deep as it goes.
func TestCheckJSONPathRecursive(t *testing.T) {
	node := `{"$defs":{"Node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"$ref":"#/$defs/Node"}}}},"$ref":"#/$defs/Node"}`
	for path, want := range map[string]Status{
		"v":                     Found,
		"next.next.next.v":      Found,
		"next.next":             NotScalar,
		"next.next.w":           Missing,
		"next.next.next.next.w": Missing,
	} {
		if got := CheckJSONPath(node, nil, jsonSchemaPath(path)); got != want {
			t.Errorf("linked list %s: %v, want %v", path, got, want)
		}
	}
	loops := []string{
		`{"$ref":"#"}`,
		`{"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"anyOf":[{"$ref":"#/$defs/A"},{"$ref":"#"}]}},"$ref":"#/$defs/A"}`,
	}
	for _, text := range loops {
		if got := CheckJSONPath(text, nil, []string{"id"}); got != Missing {
			t.Errorf("%s: %v, want missing", text, got)
		}
	}
	// A loop with a scalar on it: found whichever way round it is entered.
	text := `{"$defs":{"A":{"anyOf":[{"$ref":"#/$defs/B"},{"properties":{"a":{"type":"object"}}}]},"B":{"anyOf":[{"$ref":"#/$defs/A"},{"properties":{"a":{"type":"string"}}}]}},"$ref":"#/$defs/A"}`
	if got := CheckJSONPath(text, nil, []string{"a"}); got != Found {
		t.Errorf("loop with a scalar: %v, want found", got)
	}
	// Each $ref below doubles the ways to the bottom: visiting every
	// target once keeps this linear, not 2^40.
	var b strings.Builder
	b.WriteString(`{"$defs":{`)
	const levels = 40
	for i := range levels {
		next := `{"type":"object"}`
		if i < levels-1 {
			next = `{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"}`
		}
		b.WriteString(`"d` + strconv.Itoa(i) + `":{"anyOf":[` + next + `,` + next + `]},`)
	}
	b.WriteString(`"end":{}},"properties":{"id":{"$ref":"#/$defs/d0"}}}`)
	if got := CheckJSONPath(b.String(), nil, []string{"id"}); got != NotScalar {
		t.Errorf("diamond chain: %v, want not_scalar", got)
	}
}
