package key

import (
	"strings"

	"dedup/registry"
)

// SchemaPart is one schema-framed part of a Source, for `dedup check` to
// look its path up in the subject's latest schema.
type SchemaPart struct {
	Format registry.Format // the schema format the part reads
	Path   []string
	Spec   string // the part as DEDUP_KEY spells it: "avro:order.id"
}

// SchemaParts are k's schema-framed parts, in DEDUP_KEY's order; none
// when Schemas is false.
func (k Source) SchemaParts() []SchemaPart {
	var out []SchemaPart
	for _, p := range k.parts {
		var f registry.Format
		var prefix string
		switch p.kind {
		case fromAvro:
			f, prefix = registry.Avro, "avro:"
		case fromProtobuf:
			f, prefix = registry.Protobuf, "protobuf:"
		case fromJSONSchema:
			f, prefix = registry.JSON, "jsonschema:"
		default:
			continue
		}
		out = append(out, SchemaPart{
			Format: f,
			Path:   append([]string(nil), p.path...),
			// Parse splits on dots and refuses empty segments, so
			// joining gives the part's text back.
			Spec: prefix + strings.Join(p.path, "."),
		})
	}
	return out
}
