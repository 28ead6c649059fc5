// Package check is `dedup check`: everything the stage needs from its
// surroundings, checked with the stage's own environment before it is
// deployed (check.go: configuration, brokers, topics, committed offsets;
// store.go: the checkpoint store and the sizing; registry.go: with a
// schema-framed DEDUP_KEY, the Schema Registry and each part's path in the
// subject's latest schema).
package check
