package wq_test

import (
	"errors"
	"testing"

	"github.com/gowq/wq"
)

// TestAllocRefusesPrivateAndUnknownFlags catches Alloc and AllocOrdered
// accepting a bit that is not an exported flag (the private ordered bit
// built a per-CPU queue that called itself ordered and kept no order).
func TestAllocRefusesPrivateAndUnknownFlags(t *testing.T) {
	bad := []wq.Flags{
		wq.Flags(1 << 9),            // the private ordered bit
		wq.Flags(1<<9) | wq.Unbound, // with a valid flag
		wq.Flags(1 << 10),           // the first unused bit
		wq.Flags(1 << 31),           // the top bit
		wq.Flags(1<<9) | wq.PerCPU | wq.Sysfs,
	}
	for _, f := range bad {
		if q, err := wq.Alloc("flags-bad", f, 8); !errors.Is(err, wq.ErrInvalidFlags) {
			if q != nil {
				q.Destroy()
			}
			t.Errorf("Alloc(%v) = %v, want ErrInvalidFlags", f, err)
		}
		if q, err := wq.AllocOrdered("flags-bad-ord", f&^wq.PerCPU); !errors.Is(err, wq.ErrInvalidFlags) {
			if q != nil {
				q.Destroy()
			}
			t.Errorf("AllocOrdered(%v) = %v, want ErrInvalidFlags", f&^wq.PerCPU, err)
		}
	}
	// Every exported flag alone is still accepted (RT may need privileges).
	for _, f := range []wq.Flags{0, wq.PerCPU, wq.Unbound, wq.CPUIntensive, wq.Freezable, wq.MemReclaim, wq.PowerEfficient, wq.Sysfs} {
		q, err := wq.Alloc("flags-good", f, 8)
		if err != nil {
			t.Errorf("Alloc(%v) = %v, want nil", f, err)
			continue
		}
		q.Destroy()
	}
	q, err := wq.AllocOrdered("flags-good-ord", wq.Sysfs)
	if err != nil {
		t.Fatalf("AllocOrdered(Sysfs) = %v", err)
	}
	if q.Type() != wq.TypeOrdered {
		t.Errorf("AllocOrdered type %v", q.Type())
	}
	q.Destroy()
}
