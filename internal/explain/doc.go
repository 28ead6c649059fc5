// Package explain is `dedup explain KEY` and the shape of the key probe's
// answers: what a partition's filters say of one dedup key (held or not, in
// which generation, the windows they cover and the chance that a key never
// seen reads as held), asked without adding the key.
//
// explain.go restores each partition's newest intact checkpoint chain from
// a store's listing, read-only (a restore's Load would set damaged pieces
// aside; this only reads), and asks it (partition.Snapshot.Ask); answer.go
// is the answer one partition gives, from a checkpoint or from a running
// worker (the key probe), with REPARTITION_TOPIC the partition hop 1 routes
// the key to, and the human and JSON renderings.
package explain
