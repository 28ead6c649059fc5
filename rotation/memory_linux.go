package rotation

import (
	"syscall"
	"unsafe"
)

// hugeThreshold is the filter size from which transparent huge pages pay:
// a probe of a large filter is a TLB miss as well as a cache miss, and with
// 4 KiB pages the page-table walk itself misses the cache.
const hugeThreshold = 8 << 20

// adviseHuge asks Linux to back words with transparent huge pages (effective
// when THP is in "madvise" or "always" mode; harmless otherwise).
func adviseHuge(words []uint64) {
	if len(words)*8 < hugeThreshold {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	_ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) // advice only: failure costs speed, not correctness
}
