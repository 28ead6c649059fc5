package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// peakRSS returns this process's peak resident set size in bytes (VmHWM in
// /proc/self/status, Linux).
//
// The harness cannot use the rusage it gets when a contender exits: Go starts
// processes with clone(CLONE_VM|CLONE_VFORK) and exec, and the kernel folds
// the high-water mark of the memory the child shared until exec (the
// harness's, broker included) into the child's ru_maxrss. VmHWM belongs to
// the address space exec gave the contender, so it is the contender's own.
func peakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read peak rss: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "VmHWM:" {
			kib, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", f[1], err)
			}
			return kib * 1024, nil
		}
	}
	return 0, fmt.Errorf("read peak rss: no VmHWM in /proc/self/status")
}
