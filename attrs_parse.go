package wq

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Parsing of attribute values.
//
// Every string attribute, per queue (SetAttr) and process-wide
// (SetGlobalAttr), reads its numbers through parseNum, and its durations
// through parseDuration, which is parseNum in the attribute's unit. A
// value that is not a decimal integer, or that lies outside the
// attribute's range, is refused with ErrInvalidArgument before anything
// changes: strconv's overflow is an error here, never a wrapped or
// clamped value, and a duration in us or s whose nanoseconds do not fit
// in an int64 is out of range rather than multiplied into another number.

// parseNum parses value (surrounding space ignored) as a base-10 integer
// in [lo, hi]. The error wraps ErrInvalidArgument and names the attribute
// and the range.
func parseNum(name, value string, lo, hi int64) (int64, error) {
	v := strings.TrimSpace(value)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%w: %s %q: out of range [%d, %d]", ErrInvalidArgument, name, value, lo, hi)
		}
		return 0, fmt.Errorf("%w: %s %q: want a decimal integer in [%d, %d]", ErrInvalidArgument, name, value, lo, hi)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%w: %s %q: out of range [%d, %d]", ErrInvalidArgument, name, value, lo, hi)
	}
	return n, nil
}

// parseInt is parseNum for an int attribute.
func parseInt(name, value string, lo, hi int) (int, error) {
	n, err := parseNum(name, value, int64(lo), int64(hi))
	return int(n), err
}

// maxIn returns the largest count of unit that fits in a time.Duration.
func maxIn(unit time.Duration) int64 { return math.MaxInt64 / int64(unit) }

// parseDuration parses value as a non-negative count of unit (us for
// *_us attributes, s for watchdog_thresh), at most what a time.Duration
// holds. With goSyntax, a Go duration ("50us", "1.5ms") is accepted too;
// it must not be negative or overflow (time.ParseDuration refuses
// overflow).
func parseDuration(name, value string, unit time.Duration, goSyntax bool) (time.Duration, error) {
	v := strings.TrimSpace(value)
	if goSyntax && v != "" && strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '-' && r != '+' }) >= 0 {
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%w: %s %q: want a duration (50us) or a count of %v: %v", ErrInvalidArgument, name, value, unit, err)
		}
		if d < 0 {
			return 0, fmt.Errorf("%w: %s %q: negative", ErrInvalidArgument, name, value)
		}
		return d, nil
	}
	n, err := parseNum(name+" ("+unitName(unit)+")", v, 0, maxIn(unit))
	if err != nil {
		return 0, err
	}
	return time.Duration(n) * unit, nil
}

func unitName(unit time.Duration) string {
	switch unit {
	case time.Nanosecond:
		return "ns"
	case time.Microsecond:
		return "us"
	case time.Millisecond:
		return "ms"
	case time.Second:
		return "s"
	}
	return unit.String()
}

// parseBool01 parses "0" or "1" (as the kernel's affinity_strict).
func parseBool01(name, value string) (bool, error) {
	switch strings.TrimSpace(value) {
	case "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("%w: %s %q (want 0 or 1)", ErrInvalidArgument, name, value)
}
