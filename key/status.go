package key

// Status says what Extract found: a key, why a record has none, or that
// the record waits for its schema.
type Status uint8

const (
	// Keyed: the record has a dedup key.
	Keyed Status = iota
	// Empty: the record key, value or header the source reads is absent or
	// empty.
	Empty
	// Malformed: a JSON value that is not one well-formed document.
	Malformed
	// MissingField: the path is absent, null, unset or an empty string.
	MissingField
	// NotScalar: the path holds a record, object, array, map or repeated
	// field.
	NotScalar
	// NotFramed: the value is not in the Schema Registry wire format.
	NotFramed
	// UnknownSchema: the registry answered that it has no schema of the
	// value's id (error code 40403).
	UnknownSchema
	// Undecodable: the value does not decode under its schema, or its
	// schema is of another format than the source reads, or does not
	// compile.
	Undecodable
	// Waiting: the value's schema is not known yet (being fetched, or the
	// registry cannot be reached): the record must wait (Source.Wait) and
	// be extracted again. Never a reason to forward it unkeyed.
	Waiting

	numStatus
)

// Unkeyed lists the statuses of records without a key, in label order.
var Unkeyed = []Status{Empty, Malformed, MissingField, NotScalar, NotFramed, UnknownSchema, Undecodable}

// String is the status as a metric label value (the reason label of
// dedup_unkeyed_total).
func (s Status) String() string {
	switch s {
	case Keyed:
		return "keyed"
	case Empty:
		return "empty"
	case Malformed:
		return "malformed"
	case MissingField:
		return "missing_field"
	case NotScalar:
		return "not_scalar"
	case NotFramed:
		return "not_framed"
	case UnknownSchema:
		return "unknown_schema"
	case Undecodable:
		return "undecodable"
	case Waiting:
		return "waiting"
	}
	return "unknown"
}

// NumStatus is the number of statuses, for arrays indexed by Status.
const NumStatus = int(numStatus)
