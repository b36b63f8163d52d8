package wq

import "fmt"

// publicFlags is every flag a caller may pass to Alloc and AllocOrdered:
// the exported ones. Bits above them, and the private ordered bit that
// only AllocOrdered sets, are refused, as alloc_workqueue refuses flags
// it does not know: a private bit would build a queue whose type and
// attributes contradict each other (an "ordered" per-CPU queue).
const publicFlags = PerCPU | Unbound | HighPri | CPUIntensive | Freezable | MemReclaim | PowerEfficient | Sysfs | RT

// checkPublicFlags returns ErrInvalidFlags, naming the bits, when flags
// holds a bit that is not an exported flag.
func checkPublicFlags(name string, flags Flags) error {
	if bad := flags &^ publicFlags; bad != 0 {
		return fmt.Errorf("alloc_workqueue(%q): %w: bits %#x are not gowq flags", name, ErrInvalidFlags, uint32(bad))
	}
	return nil
}
