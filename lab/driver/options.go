package driver

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Counted is how a count-based experiment (`wqlab wake`, `wqlab
// adaptive`) samples each row: Samples per row in all, Gap between two
// samples of a row, and Slice samples per row per interleaving round
// (Interleave).
type Counted struct {
	Samples int
	Gap     time.Duration
	Slice   int
}

// Normalize returns c with its zero fields set from def, or an error
// wrapping errInvalid (an experiment's ErrInvalidOption) when Samples is
// outside 1..maxSamples, Slice is below 1 or Gap is negative.
func (c Counted) Normalize(def Counted, maxSamples int, errInvalid error) (Counted, error) {
	if c.Samples == 0 {
		c.Samples = def.Samples
	}
	if c.Gap == 0 {
		c.Gap = def.Gap
	}
	if c.Slice == 0 {
		c.Slice = def.Slice
	}
	switch {
	case c.Samples < 1 || c.Samples > maxSamples:
		return c, fmt.Errorf("%w: samples %d (want 1..%d)", errInvalid, c.Samples, maxSamples)
	case c.Slice < 1:
		return c, fmt.Errorf("%w: slice %d (want >= 1)", errInvalid, c.Slice)
	case c.Gap < 0:
		return c, fmt.Errorf("%w: negative gap %v", errInvalid, c.Gap)
	}
	return c, nil
}

// CheckConfigs returns an error wrapping errInvalid for the first name in
// selected that is not in known, nil when all are.
func CheckConfigs(selected, known []string, errInvalid error) error {
	for _, n := range selected {
		if !slices.Contains(known, n) {
			return fmt.Errorf("%w: unknown config %q (want one of: %s)", errInvalid, n, strings.Join(known, ", "))
		}
	}
	return nil
}

// Wants reports whether row name is selected: every row when selected is
// empty.
func Wants(selected []string, name string) bool {
	return len(selected) == 0 || slices.Contains(selected, name)
}

// ShortReason is a skip reason cut for a table cell: the text before its
// first colon when that comes within 60 bytes, else at most 60 bytes.
func ShortReason(s string) string {
	if i := strings.IndexByte(s, ':'); i > 0 && i < 60 {
		return s[:i]
	}
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

// WriteLoad appends to b what a load was: " (name)" when name says more
// than load, and " (CPUs busy: cpu0 N% ...)" from the per-CPU busy
// percentages, when there are.
func WriteLoad(b *strings.Builder, load, name string, pct []float64) {
	if name != "" && name != load {
		fmt.Fprintf(b, " (%s)", name)
	}
	if len(pct) > 0 {
		parts := make([]string, len(pct))
		for i, p := range pct {
			parts[i] = fmt.Sprintf("cpu%d %.0f%%", i, p)
		}
		fmt.Fprintf(b, " (CPUs busy: %s)", strings.Join(parts, " "))
	}
}
