package schema

// Status says what a Plan found at its path.
type Status uint8

const (
	// Found: the path holds a scalar; its key bytes were appended.
	Found Status = iota
	// Missing: the path is absent from the record or the schema, or holds
	// null, an unset field, an empty string or empty bytes.
	Missing
	// NotScalar: the path holds a record, message, array, map or
	// repeated field.
	NotScalar
	// Undecodable: the record does not decode under the schema
	// (truncated, a bad length, an unknown union branch, ...).
	Undecodable
)

// String is the status as a metric label value.
func (s Status) String() string {
	switch s {
	case Found:
		return "found"
	case Missing:
		return "missing_field"
	case NotScalar:
		return "not_scalar"
	case Undecodable:
		return "undecodable"
	}
	return "unknown"
}

// Plan reads the scalar at one dotted path out of records written with one
// schema. A Plan is immutable and safe for concurrent use; Append must not
// allocate except to grow dst.
type Plan interface {
	// Append appends the canonical key bytes of the field at the path in
	// payload to dst. payload is what follows the registry's 5-byte frame
	// (magic byte and schema id): for Protobuf it starts with the message
	// indexes, which the Plan reads to pick the message. dst is returned
	// unchanged unless the status is Found.
	Append(dst, payload []byte) ([]byte, Status)
	// Static says, from the schema alone, whether the path leads to a
	// scalar: Found, Missing (no such field) or NotScalar. A nullable
	// scalar (an Avro union of null and one scalar, an optional Protobuf
	// field) is Found. `dedup check` reports it.
	Static() Status
}

// Reference is a schema the compiled schema refers to, by the name it
// uses for it: for Avro the full name of a named type defined in that
// schema, for Protobuf the import path of that file. Compile functions
// take references with every schema's own references before it.
type Reference struct {
	Name string
	Text string
}
