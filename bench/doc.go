// Package bench measures the deduplication stage against the alternatives a
// user would otherwise choose, on the user's own machine, in one run.
//
// A run starts one embedded Kafka-protocol broker (kfake) in the harness
// process, loads one input topic with deterministically generated records
// (the generator knows which records are first occurrences of their key),
// and then runs each contender as a separate process, one after the other,
// so that each contender's peak resident memory is its own and no two
// contenders compete for the CPU. Every contender reads the same input topic
// and writes its own output topic; the harness reads each output back and
// checks it against the generator: how many duplicates were dropped, how many
// first occurrences were dropped as false positives (false drops), and
// whether any record was forwarded twice.
//
// The contenders are:
//
//   - copy: a plain consume→produce loop on kafka-go (no deduplication; the ceiling);
//   - exact-set: the same loop with a Go map of every key per partition (the naive answer);
//   - stage-counting and stage-plain: this project's processor (processor.New(...).Run);
//   - boom-counting: the same loop with two tylertreat/BoomFilters counting
//     Bloom filters per partition (a filter from another library with deletion);
//   - cuckoo: the same loop with two seiflotfy/cuckoofilter filters per
//     partition (fixed 8-bit fingerprints, so its false-positive rate is not
//     configurable; off by default).
//
// Throughput is measured inside each contender, from the first input record
// read to the last output record acknowledged by the broker. Peak memory is
// the contender process's maximum resident set size as reported by the
// kernel when it exits (getrusage). Nothing here is timed in tests: the test
// only checks that the harness runs every contender and that their counts
// agree.
package bench
