package driver_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gowq/wq/lab/driver"
)

// TestCountedNormalize: zero fields take the defaults, and each bound
// is an error wrapping the experiment's ErrInvalidOption.
func TestCountedNormalize(t *testing.T) {
	errX := driver.InvalidOption("x")
	def := driver.Counted{Samples: 10, Gap: time.Millisecond, Slice: 2}
	c, err := driver.Counted{}.Normalize(def, 100, errX)
	if err != nil || c != def {
		t.Errorf("zero: %+v, %v; want the defaults", c, err)
	}
	for _, bad := range []driver.Counted{{Samples: -1}, {Samples: 101}, {Slice: -1}, {Gap: -time.Nanosecond}} {
		if _, err := bad.Normalize(def, 100, errX); !errors.Is(err, errX) || !errors.Is(err, driver.ErrInvalidOption) {
			t.Errorf("%+v: %v, want x's invalid option", bad, err)
		}
	}
	if errX.Error() != "x: invalid option" {
		t.Errorf("InvalidOption text %q", errX)
	}
}

// TestConfigSelection: unknown names are errors that list the known
// ones; no selection selects every row.
func TestConfigSelection(t *testing.T) {
	known := []string{"a", "b"}
	errX := driver.InvalidOption("x")
	if err := driver.CheckConfigs([]string{"b", "a"}, known, errX); err != nil {
		t.Errorf("known names: %v", err)
	}
	if err := driver.CheckConfigs([]string{"a", "c"}, known, errX); !errors.Is(err, errX) || !strings.Contains(err.Error(), `"c" (want one of: a, b)`) {
		t.Errorf("unknown name: %v", err)
	}
	if !driver.Wants(nil, "a") || !driver.Wants([]string{"a"}, "a") || driver.Wants([]string{"a"}, "b") {
		t.Error("Wants")
	}
	if driver.ShortReason("SCHED_FIFO: not permitted") != "SCHED_FIFO" || len(driver.ShortReason(strings.Repeat("x", 80))) != 60 {
		t.Error("ShortReason")
	}
	var b strings.Builder
	driver.WriteLoad(&b, "hogs", "2 hogs", []float64{99.6, 50})
	if b.String() != " (2 hogs) (CPUs busy: cpu0 100% cpu1 50%)" {
		t.Errorf("WriteLoad %q", b.String())
	}
}
