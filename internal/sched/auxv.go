package sched

import (
	"encoding/binary"
	"os"
)

const (
	atHWCAP2       = 26
	hwcap2FSGSBASE = 1 << 1 // the kernel lets user space use RDFSBASE and friends
)

// hwcap2 returns the AT_HWCAP2 word of the process's auxiliary vector, 0
// if it cannot be read.
func hwcap2() uint64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 0
	}
	for i := 0; i+16 <= len(b); i += 16 {
		k := binary.NativeEndian.Uint64(b[i:])
		v := binary.NativeEndian.Uint64(b[i+8:])
		if k == atHWCAP2 {
			return v
		}
		if k == 0 {
			break
		}
	}
	return 0
}
