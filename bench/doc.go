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
//   - stage-counting, stage-plain and stage-fingerprint: this project's processor (processor.New(...).Run);
//   - boom-counting: the same loop with two tylertreat/BoomFilters counting
//     Bloom filters per partition (a filter from another library with deletion);
//   - cuckoo: the same loop with two seiflotfy/cuckoofilter filters per
//     partition (fixed 8-bit fingerprints, so its false-positive rate is not
//     configurable; off by default).
//
// The input's timestamps span two windows by default, so that every filter
// contender rotates once and ends with both generations holding keys, as it
// would in steady state; the exact set, which forgets nothing, holds every
// key. Filters are sized for the most new keys any partition sees in one
// window.
//
// The kafka-go loop contenders use the stage's client settings (reader queue,
// writer batching, records in flight per partition) and add the same source
// headers to what they forward, so that every contender writes the same
// bytes and what differs is the deduplication.
//
// Throughput is measured inside each contender: for the loop contenders from
// the first input record read to the last output record acknowledged; for
// the stage, which publishes its counts only every 100ms, from the moment it
// reports every partition consuming (Ready) to the last change of the output
// topic's end offsets, polled every 5ms. Peak memory is the contender
// process's own high-water resident set (VmHWM, read before it exits; see
// peakRSS for why not getrusage). Repeated runs are interleaved and the run
// with the median throughput is reported.
//
// Nothing here is timed in tests: the test only checks that the harness runs
// every contender and that their counts agree.
package bench
