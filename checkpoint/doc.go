// Package checkpoint stores snapshots of per-partition filter state together
// with the input offset they cover, restores them, and performs the replay
// scan of the output topic that makes output exactly-once.
package checkpoint
