// Package key finds a record's dedup key, as DEDUP_KEY says: the record's
// key, its value, a header, a scalar at a path in a JSON value, a field of
// a value framed by a Schema Registry (Avro, Protobuf, JSON Schema), or
// several of these forming one identity.
//
// source.go parses DEDUP_KEY into a Source and extracts keys with it
// (composite keys: each part length-prefixed); status.go names why a
// record has no key (the reason label of dedup_unkeyed_total) or that it
// waits for its schema; arena.go is the buffer keys that must be built
// (numbers, composite keys) are appended to, reused per batch so that
// extraction allocates nothing; framed.go reads schema-framed values with
// the plans of package schema, compiled once per schema id from the
// registry client's schemas, and says Waiting while a schema is not known;
// json.go is the JSON scanner behind "json:dotted.path" and
// "jsonschema:", which validates the whole document in one pass without
// building maps, so that a malformed value is never mistaken for a keyed
// one; parts.go lists the schema-framed parts with their format and path,
// for `dedup check` to find each path in the registry's latest schema.
// Knows nothing of Kafka's clients beyond kafka-go's Message.
package key
