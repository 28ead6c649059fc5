// Package key finds a record's dedup key, as DEDUP_KEY says: the record's
// key, its value, a header, or a scalar at a path in a JSON value.
//
// source.go parses DEDUP_KEY into a Source and extracts keys with it;
// json.go is the JSON scanner behind "json:dotted.path", which validates
// the whole document in one pass without building maps, so that a
// malformed value is never mistaken for a keyed one. Knows nothing of
// Kafka's clients beyond kafka-go's Message.
package key
