#include "textflag.h"

// func prefetchBucket(b *[bucketWords]uint64, sink *uint64)
//
// PREFETCHT0 of both 64-byte lines of the bucket: unlike a load, a prefetch
// retires at once, so a batch of them does not fill the reorder buffer
// while their misses are outstanding.
TEXT ·prefetchBucket(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ b+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	RET

// func prefetchLine(p *uint64)
//
// PREFETCHT0 of the line holding *p.
TEXT ·prefetchLine(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET
