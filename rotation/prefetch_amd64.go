package rotation

// prefetchBucket asks the CPU to bring both lines of bucket b into its
// caches (prefetch_amd64.s) and returns at once; sink is unused here.
//
//go:noescape
func prefetchBucket(b *[bucketWords]uint64, sink *uint64)

// prefetchLine asks the CPU to bring the line holding *p into its caches
// and returns at once.
//
//go:noescape
func prefetchLine(p *uint64)
