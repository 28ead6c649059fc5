package schema

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// CheckJSONPath says, from a JSON Schema document alone (draft 4 to
// 2020-12, as a registry holds them), whether the dotted path leads to a
// scalar: Found, Missing or NotScalar, as Plan.Static does for the other
// formats; Undecodable when text or a reference's text is not JSON. refs
// are the documents text refers to, by the name its $refs use for them
// (Confluent schema references). Records are read by the JSON scanner of
// package key, not by a Plan; this is for `dedup check`, so it parses
// with encoding/json.
//
// A segment names a member of "properties"; on an array schema a segment
// that is a decimal number goes to "items" (or the tuple's "prefixItems",
// "items" array or "additionalItems"), as the scanner's array indexes do.
// A subschema counts through its "$ref" (a JSON pointer into its own
// document, "#/definitions/..." or "#/$defs/...", or another document by
// its reference name or by its "$id", optionally with a pointer) and its
// "allOf", "anyOf" and "oneOf" branches: the path is Found if any of them
// leads to a scalar, else NotScalar if any leads to an object or array,
// else Missing. At the path's end "type" decides: string, number, integer
// or boolean (alone, or among the types of a type array, "null" beside
// them) is Found, object or array NotScalar, null Missing; without "type",
// a "const" or "enum" of scalars is Found, and "properties", "items" and
// the like make NotScalar. A path the schema does not describe, a $ref
// that does not resolve (anchors included) and the boolean schemas are
// Missing; "additionalProperties" and "patternProperties" are not
// followed, since no field name there is known to exist.
func CheckJSONPath(text string, refs []Reference, path []string) Status {
	var root any
	if err := json.Unmarshal([]byte(text), &root); err != nil {
		return Undecodable
	}
	w := &jsonSchemaWalker{docs: map[string]*jsonSchemaDoc{}, seen: map[jsonSchemaVisit]bool{}}
	for _, r := range refs {
		var v any
		if err := json.Unmarshal([]byte(r.Text), &v); err != nil {
			return Undecodable
		}
		d := jsonSchemaNewDoc(v, r.Name)
		w.add(r.Name, d)
		w.add(jsonSchemaID(v), d)
	}
	main := jsonSchemaNewDoc(root, "")
	w.add(jsonSchemaID(root), main)
	return w.walk(main, root, path)
}

// jsonSchemaDoc is one document: the schema, or a reference.
type jsonSchemaDoc struct {
	root any
	base *url.URL // what its relative $refs resolve against; nil when unknown
}

func jsonSchemaNewDoc(root any, name string) *jsonSchemaDoc {
	d := &jsonSchemaDoc{root: root}
	base := jsonSchemaID(root)
	if base == "" {
		base = name
	}
	if u, err := url.Parse(base); err == nil && base != "" {
		d.base = u
	}
	return d
}

// jsonSchemaID is a document's "$id" (draft 4: "id") without its fragment.
func jsonSchemaID(root any) string {
	obj, _ := root.(map[string]any)
	id, ok := obj["$id"].(string)
	if !ok {
		id, _ = obj["id"].(string)
	}
	id, _, _ = strings.Cut(id, "#")
	return id
}

type jsonSchemaWalker struct {
	docs map[string]*jsonSchemaDoc // by reference name and by $id
	seen map[jsonSchemaVisit]bool
}

// jsonSchemaVisit is a $ref target walked with the path's last rest
// segments. The answer is the best status over every subschema the walk
// reaches, so a target reached again adds nothing: skipping it ends
// recursive schemas and keeps diamond-shaped ones linear.
type jsonSchemaVisit struct {
	doc     *jsonSchemaDoc
	pointer string
	rest    int
}

func (w *jsonSchemaWalker) add(name string, d *jsonSchemaDoc) {
	if _, dup := w.docs[name]; name != "" && !dup {
		w.docs[name] = d
	}
}

// walk is what path leads to from node, a subschema of doc.
func (w *jsonSchemaWalker) walk(doc *jsonSchemaDoc, node any, path []string) Status {
	obj, ok := node.(map[string]any)
	if !ok {
		return Missing // true allows anything and false nothing: neither says what is there
	}
	st := Missing
	if len(path) == 0 {
		st = jsonSchemaLeaf(obj)
	} else if child, ok := jsonSchemaChild(obj, path[0]); ok {
		st = w.walk(doc, child, path[1:])
	}
	if ref, ok := obj["$ref"].(string); ok && st != Found {
		st = jsonSchemaBest(st, w.follow(doc, ref, path))
	}
	for _, k := range [...]string{"allOf", "anyOf", "oneOf"} {
		branches, _ := obj[k].([]any)
		for _, b := range branches {
			if st == Found {
				return Found
			}
			st = jsonSchemaBest(st, w.walk(doc, b, path))
		}
	}
	return st
}

// follow walks path from the subschema ref points to.
func (w *jsonSchemaWalker) follow(doc *jsonSchemaDoc, ref string, path []string) Status {
	target, pointer, ok := w.resolve(doc, ref)
	if !ok {
		return Missing
	}
	v := jsonSchemaVisit{doc: target, pointer: pointer, rest: len(path)}
	if w.seen[v] {
		return Missing
	}
	w.seen[v] = true
	node, ok := jsonSchemaPointer(target.root, pointer)
	if !ok {
		return Missing
	}
	return w.walk(target, node, path)
}

// resolve finds the document ref names (doc itself when ref is only a
// fragment) and the fragment within it.
func (w *jsonSchemaWalker) resolve(doc *jsonSchemaDoc, ref string) (*jsonSchemaDoc, string, bool) {
	name, fragment, _ := strings.Cut(ref, "#")
	if name == "" {
		return doc, fragment, true
	}
	if d, ok := w.docs[name]; ok {
		return d, fragment, true
	}
	u, err := url.Parse(name)
	if err != nil || doc.base == nil {
		return nil, "", false
	}
	if d, ok := w.docs[doc.base.ResolveReference(u).String()]; ok {
		return d, fragment, true
	}
	return nil, "", false
}

// jsonSchemaPointer is the value the fragment's JSON pointer (RFC 6901,
// percent-encoded as a URI fragment) names in root.
func jsonSchemaPointer(root any, fragment string) (any, bool) {
	if fragment == "" {
		return root, true
	}
	p, err := url.PathUnescape(fragment)
	if err != nil || !strings.HasPrefix(p, "/") {
		return nil, false
	}
	node := root
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[tok]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// jsonSchemaChild is the subschema of obj's member or item seg.
func jsonSchemaChild(obj map[string]any, seg string) (any, bool) {
	if props, ok := obj["properties"].(map[string]any); ok {
		if p, ok := props[seg]; ok {
			return p, true
		}
	}
	i, err := strconv.Atoi(seg)
	if err != nil || i < 0 {
		return nil, false
	}
	if prefix, ok := obj["prefixItems"].([]any); ok { // 2020-12: "items" is the rest
		if i < len(prefix) {
			return prefix[i], true
		}
		items, ok := obj["items"]
		return items, ok
	}
	switch items := obj["items"].(type) {
	case []any: // draft 4 to 2019-09 tuples: "additionalItems" is the rest
		if i < len(items) {
			return items[i], true
		}
		more, ok := obj["additionalItems"]
		return more, ok
	case map[string]any, bool:
		return items, true
	}
	return nil, false
}

// jsonSchemaLeaf is what obj says of the value at the path's end, by its
// own keywords.
func jsonSchemaLeaf(obj map[string]any) Status {
	switch t := obj["type"].(type) {
	case string:
		return jsonSchemaType(t)
	case []any:
		st := Missing
		for _, e := range t {
			name, _ := e.(string)
			st = jsonSchemaBest(st, jsonSchemaType(name))
		}
		return st
	}
	if c, ok := obj["const"]; ok {
		return jsonSchemaValue(c)
	}
	if values, ok := obj["enum"].([]any); ok {
		st := Missing
		for _, v := range values {
			st = jsonSchemaBest(st, jsonSchemaValue(v))
		}
		return st
	}
	for _, k := range [...]string{"properties", "required", "additionalProperties", "patternProperties", "items", "prefixItems"} {
		if _, ok := obj[k]; ok {
			return NotScalar
		}
	}
	return Missing
}

func jsonSchemaType(name string) Status {
	switch name {
	case "string", "number", "integer", "boolean":
		return Found
	case "object", "array":
		return NotScalar
	}
	return Missing
}

// jsonSchemaValue is the status of a value a "const" or "enum" allows.
func jsonSchemaValue(v any) Status {
	switch v.(type) {
	case string, float64, bool:
		return Found
	case map[string]any, []any:
		return NotScalar
	}
	return Missing
}

// jsonSchemaBest is the better of two answers: Found, then NotScalar,
// then Missing.
func jsonSchemaBest(a, b Status) Status {
	rank := func(s Status) int {
		switch s {
		case Found:
			return 2
		case NotScalar:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
