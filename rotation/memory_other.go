//go:build !linux

package rotation

func adviseHuge([]uint64) {}
