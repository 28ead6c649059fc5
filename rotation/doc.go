// Package rotation keeps the "seen recently?" memory of a deduplicator: a
// pair of Bloom filters, current and previous, that rotate on event-time
// windows.
//
// # Time and the guarantee
//
// Time is the record timestamp (event time), never the wall clock, so
// replaying the same records makes the same decisions. Window boundaries are
// multiples of Options.Window since the Unix epoch. The pair's time is the
// highest window any record has reached; it never moves backwards. When a
// record's timestamp enters the next window, the previous generation is
// dropped, the current one becomes previous, and the dropped one's memory is
// cleared and becomes current (no allocation). A jump of two or more windows
// clears both. A late record (timestamp before the current window) is tested
// and added like any other, to the current generation.
//
// TestAndAdd tests both generations and adds the key to the current one only
// when neither holds it, so each key is held from its first occurrence and
// duplicates do not extend its life. Hence, for keys added with in-order
// timestamps:
//
//   - a key added less than one window earlier (by timestamp) is reported seen:
//     Bloom filters have no false negatives;
//   - a key last added two windows or more earlier is reported new, unless it
//     is a false positive (probability at most Options.FPRate while each
//     window holds at most ExpectedKeys keys);
//   - in between, either.
//
// Precisely: a key added while the current window starts at S is reported
// seen as long as the current window starts at or before S+Window, and
// forgotten once it starts at S+2·Window or later. A late record is added to
// the current window, so it is remembered from that window's start, not from
// its own timestamp. Remove (counting and fingerprint modes) takes a key out of whichever
// generation holds it, after which it is reported new again.
//
// # Sizing and memory
//
// A test checks both generations, so each generation is sized for the rate
// p with 1-(1-p)² = FPRate (p ≈ FPRate/2): with ExpectedKeys keys in each
// generation (the end of a window) a key never added is reported seen with
// probability at most FPRate; earlier in the window it is lower.
//
// Counting mode (the zero Mode; the stage's default is fingerprint mode)
// uses a blocked counting Bloom filter: 4-bit
// saturating counters, 128 to a 64-byte block (one cache line), and a key's
// k counters are drawn (with replacement) from a single block chosen by its
// hash (xxhash64). The two generations are interleaved, so a key's current
// and previous blocks are adjacent lines of one 128-byte bucket: a test of
// both generations costs one memory round trip instead of 2k. A counter that
// reaches 15 is saturated and never decremented. Blocking makes block loads
// uneven, which raises the false-positive rate over a classic filter of the
// same size, so the filter is sized with an exact model of the blocked
// filter: starting from bloom.EstimateParameters, for each k it takes the
// fewest blocks B such that
//
//	Σ_j Poisson(j; n/B) · P(a probe's counters all lie among the non-zero
//	counters of a block holding j keys) ≤ p
//
// (the inner probability is computed exactly by a Markov chain over the
// number of non-zero counters of a block). Memory is 64·B bytes per
// generation, 128·B per pair. At FPRate = 0.001 that is k = 9 and 22.1
// counters, 88.5 bits, per expected key and generation (177 bits per key for
// the pair), against 15.8 bits for a classic bit filter at p and the lower
// bound log2(1/p) = 11.0 bits per key for any structure with
// false-positive rate p (information-theoretic: n·log2(1/p) bits hold any
// set of n keys answered at rate p).
//
// Plain mode, for deployments that never retract, uses bits-and-blooms/bloom/v3
// filters sized by bloom.EstimateParameters(n, p): m = ⌈n·ln(1/p)/ln²2⌉ bits
// (1.44·log2(1/p) bits per key) per generation; 31.6 bits per key for the
// pair at FPRate = 0.001. Remove returns ErrRemoveUnsupported.
//
// Fingerprint mode uses cuckoo filters (fingerprint.go): buckets of four
// f-bit fingerprints, f even, and two candidate buckets per key; the
// generations are interleaved as in counting mode. Buckets are
// semi-sorted (semisort.go): their fingerprints in ascending order, the
// high nibbles of the four stored as one 12-bit index, f-1 bits per slot.
// An insert whose buckets are full moves residents along the shortest
// chain to a free slot (breadth-first), which fills the table to 96 % at
// ExpectedKeys. Each generation takes the even f and load (at most 0.96)
// with the fewest bits per key, (f-1)/load, for which
// 1 - (1 - 1/(2^f - 1))^(2x/N) ≤ p at x = ExpectedKeys keys in N buckets
// (model.go): 24.0 bits per key and generation at FPRate = 1e-6. An insert
// the buckets refuse goes to an exact stash; a full stash rotates the pair
// early, counted in Stats (Overflows, EarlyRotations, ForgottenKeys).
// Little room is left past ExpectedKeys: at about 1.02 times it the
// buckets refuse most inserts and the stash fills.
// PairRate, FalseDropsPerDay and BitsPerKey expose the models of every mode.
//
// A probe of a large pair is a cache (and TLB) miss that TestAndAdd waits
// for. A caller holding several keys can call Locate on each first, which
// hashes the key, places its counters and starts their load without
// waiting, changing nothing observable, and then decide them in order with
// TestAndAddAt: their misses overlap, and no key is hashed twice.
//
// Stats are O(1): counting mode keeps the numbers of non-zero and saturated
// counters up to date on every change and estimates the rate from the
// model; fingerprint mode counts the fingerprints it holds; plain mode
// counts keys added as new and reports the expected fill 1 - e^{-kn/m} and
// the rate fill^k.
//
// # Snapshots
//
// WriteTo and ReadFrom encode the whole pair (options, geometry, window,
// rotations, both generations) in a versioned format protected by CRC-32C
// checksums. A truncated, corrupt or unknown-version snapshot is refused with
// a *CorruptError wrapping ErrTruncated, ErrChecksum, ErrInvalid or
// ErrVersion; the receiver is then left untouched.
//
// A fingerprint pair's snapshot carries its buckets as releases up to
// 0.9.0 held them (four f-bit slots, f/2 bytes a bucket), so each release
// reads the other's. A pair sized as 0.9.0 sized it (load 0.9) decodes
// with Options marked as of another sizing, unequal to any configured
// ones: a partition keeps it read-only beside new filters until its keys
// expire. A pair of this release's sizing is written with FPRate one ulp
// off (its lowest bit flipped, cleared again on reading), so that 0.9.0
// does the same with it.
//
// # Deltas
//
// TakeDelta captures what changed since the previous delta (or since the
// state a snapshot holds, ResetDelta) into a Delta, whose WriteTo encodes it
// (format in delta.go); ApplyDelta replays it on a pair holding that earlier
// state, so a base snapshot plus its deltas in order restore the pair
// exactly. Counting and fingerprint modes mark, in a bitmap of one bit per
// filter word and generation (1/64 of the filters' memory), every word an
// insert, a removal or a displacement writes; clearing a generation clears
// its bitmap. A delta carries the number of generation swaps since the last
// one, the final value of each marked word, the window, counts and stashes:
// its size follows the keys changed, not the size of the pair. Plain mode's
// bit filters place their bits themselves, so its deltas carry every word.
// A delta fits only the state it was taken from (same options, rotations
// equal to its From, the deltas before it in its chain applied: Seq);
// anything else is refused with ErrDeltaMismatch, a damaged delta with a
// *CorruptError, and either way the pair is unchanged. Delta.ReadFrom reads
// and checks a delta without a pair, for a store to inspect or keep.
//
// # Concurrency
//
// A Pair is not safe for concurrent use and takes no locks: one goroutine
// owns it (one Pair per partition). To snapshot without stopping the owner,
// the owner copies the pair with CopyTo into a spare Pair (no allocation)
// and hands the copy to the writer goroutine. TakeDelta, ResetDelta and
// ApplyDelta, like every other method, run on the owner's goroutine; a
// Delta may then be written on another, until the next TakeDelta into it.
//
// # Files
//
// pair.go holds Pair (time, rotation, CopyTo) and generations, the
// interface through which it rotates, copies, streams, counts and checks
// the filters of any mode; options.go and mode.go its Options and Mode;
// counting.go, fingerprint.go (with semisort.go, its bucket layout and
// insertion, and stash.go, its stash's encoding) and plain.go the three
// filter kinds, each implementing generations (the
// per-record path calls their concrete types); sizing.go the counting and
// plain geometry, model.go the fingerprint geometry, the rate models and
// the memory of a pair; probe.go Locate and TestAndAddAt; held.go HeldBy,
// HeldAt and GenerationWindow (which generation holds a key); aging.go SeenAt,
// AdvanceTo and Expired; stats.go Stats; snapshot.go the snapshot format
// (WriteTo, ReadFrom); delta.go the delta format (Delta, TakeDelta,
// ApplyDelta) and dirty.go the tracking of changed words; errors.go the
// errors; memory_linux.go and memory_other.go the huge-page advice;
// ld_le.go and ld_be.go the word loads of semi-sorted buckets;
// prefetch_amd64.go and prefetch_other.go the prefetches of Locate and of the
// change bitmaps.
package rotation
