//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package rotation

import "unsafe"

// ld is the little-endian word at byte off from base, a table's bucket
// (its padding keeps every such load inside it): on a little-endian
// machine, one load, without the overflow check of unsafe.Slice.
func ld(base unsafe.Pointer, off uint64) uint64 {
	return *(*uint64)(unsafe.Add(base, off))
}
