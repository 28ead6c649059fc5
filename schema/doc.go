// Package schema takes one scalar out of a record encoded under a schema,
// without decoding the rest of the record into values: the Avro, Protobuf
// and JSON Schema formats a Schema Registry frames. A Plan is compiled
// once per (schema, dotted path) and then reads records written with that
// schema, skipping every field the path does not go through and appending
// the field's canonical key bytes to a caller's buffer (no allocation per
// record).
//
// Canonical key bytes make the same identity the same key whatever schema
// version or format wrote it: a string is its UTF-8 bytes, bytes and fixed
// are their raw bytes, every integer (Avro int and long, Protobuf's
// int32/int64/uint32/uint64/sint*/fixed*/sfixed*) is its decimal text, a
// float is the shortest decimal text that reads back to it at its own
// width, a boolean is "true" or "false", an enum its symbol name (Protobuf:
// the value's name when the schema knows it, else its number in decimal).
// An unset field, a null, an empty string and empty bytes are Missing.
//
// Knows nothing of Kafka or of the registry's HTTP API: wire.go reads the
// registry's framing (magic byte, schema id, Protobuf message indexes).
// jsonschema.go says from a JSON Schema document alone whether a path
// leads to a scalar (CheckJSONPath, for `dedup check`): JSON Schema values
// are read by package key's JSON scanner, not by a Plan.
package schema
