//go:build !amd64

package rotation

// prefetchBucket loads one word of each line of bucket b and folds them into
// *sink, so that the compiler keeps the loads. The loads of consecutive calls
// do not depend on each other, so several are in flight together (fewer than
// with a prefetch instruction: a load that misses holds the reorder buffer).
func prefetchBucket(b *[bucketWords]uint64, sink *uint64) {
	*sink += b[0] + b[blockWords]
}

// prefetchLine does nothing where there is no prefetch instruction: a load
// would wait for the line.
func prefetchLine(*uint64) {}
