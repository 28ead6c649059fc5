//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package rotation

import (
	"encoding/binary"
	"unsafe"
)

// ld is the little-endian word at byte off from base, a table's bucket
// (its padding keeps every such load inside it).
func ld(base unsafe.Pointer, off uint64) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice((*byte)(unsafe.Add(base, off)), 8))
}
