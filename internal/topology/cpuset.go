package topology

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// MaxCPUs is the exclusive upper bound of the CPU ids a CPUSet can hold
// (65536). It is far above the kernel's largest NR_CPUS (8192); ParseList
// and ParseMask reject ids at or above it with ErrRange.
const MaxCPUs = 1 << 16

// Errors returned by the parsers of this package. They are wrapped with
// the offending input; test for them with errors.Is.
var (
	// ErrSyntax reports a CPU list, CPU mask or scope name that is malformed.
	ErrSyntax = errors.New("topology: syntax error")
	// ErrRange reports a CPU id outside [0, MaxCPUs), or a CPUSet that does
	// not fit the destination (unix.CPUSet holds 1024 CPUs).
	ErrRange = errors.New("topology: CPU id out of range")
)

// CPUSet is an immutable set of CPU ids, the Go counterpart of the kernel's
// struct cpumask. The zero value is the empty set. A CPUSet is a small value
// (one slice header) that is safe to copy and to share between goroutines:
// no method modifies it, the set operations return new sets.
//
// Internally it is a bitmap of 64-bit words without trailing zero words,
// so it is as large as its highest CPU id needs (128 bytes for CPU 1023).
type CPUSet struct {
	w []uint64 // bit c%64 of w[c/64] is CPU c; no trailing zero word; never mutated
}

// trim drops trailing zero words and returns the set that owns w.
func trim(w []uint64) CPUSet {
	for len(w) > 0 && w[len(w)-1] == 0 {
		w = w[:len(w)-1]
	}
	if len(w) == 0 {
		return CPUSet{}
	}
	return CPUSet{w: w}
}

// NewCPUSet returns the set of the given CPU ids. Duplicates are allowed.
// Ids outside [0, MaxCPUs) are ignored (they cannot name a CPU); use
// ParseList when the input comes from a user and must be validated.
// It allocates one bitmap.
func NewCPUSet(cpus ...int) CPUSet {
	hi := -1
	for _, c := range cpus {
		if c >= 0 && c < MaxCPUs && c > hi {
			hi = c
		}
	}
	if hi < 0 {
		return CPUSet{}
	}
	w := make([]uint64, hi/64+1)
	for _, c := range cpus {
		if c >= 0 && c < MaxCPUs {
			w[c/64] |= 1 << (uint(c) % 64)
		}
	}
	return trim(w)
}

// rangeSet returns the set of CPUs lo..hi inclusive; 0 <= lo <= hi < MaxCPUs.
func rangeSet(lo, hi int) CPUSet {
	w := make([]uint64, hi/64+1)
	for c := lo; c <= hi; c++ {
		w[c/64] |= 1 << (uint(c) % 64)
	}
	return trim(w)
}

// Has reports whether cpu is in the set. Negative or huge ids are never in it.
func (s CPUSet) Has(cpu int) bool {
	if cpu < 0 || cpu/64 >= len(s.w) {
		return false
	}
	return s.w[cpu/64]&(1<<(uint(cpu)%64)) != 0
}

// Len returns the number of CPUs in the set (the kernel's cpumask_weight).
func (s CPUSet) Len() int {
	n := 0
	for _, x := range s.w {
		n += bits.OnesCount64(x)
	}
	return n
}

// IsEmpty reports whether the set holds no CPU.
func (s CPUSet) IsEmpty() bool { return len(s.w) == 0 }

// First returns the lowest CPU id in the set, or -1 when the set is empty
// (the kernel's cpumask_first, which returns nr_cpu_ids instead).
func (s CPUSet) First() int {
	for i, x := range s.w {
		if x != 0 {
			return i*64 + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// Last returns the highest CPU id in the set, or -1 when the set is empty.
func (s CPUSet) Last() int {
	if len(s.w) == 0 {
		return -1
	}
	i := len(s.w) - 1
	return i*64 + 63 - bits.LeadingZeros64(s.w[i])
}

// All returns an iterator over the CPU ids of the set in increasing order
// (the kernel's for_each_cpu). It does not allocate.
func (s CPUSet) All() iter.Seq[int] {
	return func(yield func(int) bool) {
		for i, x := range s.w {
			for x != 0 {
				b := bits.TrailingZeros64(x)
				if !yield(i*64 + b) {
					return
				}
				x &= x - 1
			}
		}
	}
}

// List returns the CPU ids of the set in increasing order, in a new slice
// (nil for the empty set).
func (s CPUSet) List() []int {
	if s.IsEmpty() {
		return nil
	}
	out := make([]int, 0, s.Len())
	for c := range s.All() {
		out = append(out, c)
	}
	return out
}

// Equal reports whether s and o hold the same CPUs.
func (s CPUSet) Equal(o CPUSet) bool {
	if len(s.w) != len(o.w) {
		return false
	}
	for i := range s.w {
		if s.w[i] != o.w[i] {
			return false
		}
	}
	return true
}

// And returns the intersection of s and o (cpumask_and).
func (s CPUSet) And(o CPUSet) CPUSet {
	n := min(len(s.w), len(o.w))
	w := make([]uint64, n)
	for i := range n {
		w[i] = s.w[i] & o.w[i]
	}
	return trim(w)
}

// Or returns the union of s and o (cpumask_or).
func (s CPUSet) Or(o CPUSet) CPUSet {
	a, b := s.w, o.w
	if len(a) < len(b) {
		a, b = b, a
	}
	w := make([]uint64, len(a))
	copy(w, a)
	for i := range b {
		w[i] |= b[i]
	}
	return trim(w)
}

// AndNot returns the CPUs of s that are not in o (cpumask_andnot).
func (s CPUSet) AndNot(o CPUSet) CPUSet {
	w := make([]uint64, len(s.w))
	copy(w, s.w)
	for i := range min(len(w), len(o.w)) {
		w[i] &^= o.w[i]
	}
	return trim(w)
}

// IsSubset reports whether every CPU of s is also in o (cpumask_subset).
func (s CPUSet) IsSubset(o CPUSet) bool {
	if len(s.w) > len(o.w) { // s's last word is not zero
		return false
	}
	for i, x := range s.w {
		if x&^o.w[i] != 0 {
			return false
		}
	}
	return true
}

// String returns the set in the kernel's CPU list format, as printed by
// sysfs files such as /sys/devices/system/cpu/online and "%*pbl":
// ascending ranges, e.g. "0-3,5,8-9". The empty set is "".
// ParseList(s.String()) returns a set equal to s.
func (s CPUSet) String() string {
	var b strings.Builder
	lo, prev := -1, -2
	flush := func() {
		if lo < 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(lo))
		if prev > lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(prev))
		}
	}
	for c := range s.All() {
		if c != prev+1 {
			flush()
			lo = c
		}
		prev = c
	}
	flush()
	return b.String()
}

// Mask returns the set as a hexadecimal CPU mask in the kernel's "%*pb"
// format: 32-bit groups, most significant first, separated by commas, every
// group but the first zero-padded to 8 digits, e.g. "3" for CPUs 0-1 and
// "1,00000003" for CPUs 0, 1 and 32. Unlike the kernel, which pads the first
// group to the width of nr_cpu_ids, the first group has no leading zeros.
// The empty set is "0". ParseMask(s.Mask()) returns a set equal to s.
func (s CPUSet) Mask() string {
	if s.IsEmpty() {
		return "0"
	}
	group := func(g int) uint32 { return uint32(s.w[g/2] >> (32 * uint(g%2))) }
	top := s.Last() / 32
	var b strings.Builder
	b.WriteString(strconv.FormatUint(uint64(group(top)), 16))
	for g := top - 1; g >= 0; g-- {
		fmt.Fprintf(&b, ",%08x", group(g))
	}
	return b.String()
}

// ParseList parses a CPU list in the kernel's format (cpulist_parse), as
// found in /sys/devices/system/cpu/online, cpuset.cpus or taskset -c:
// comma-separated ids and inclusive ranges "a-b", optionally with a stride
// "a-b:used/group" (the first used CPUs of every group of group CPUs, e.g.
// "0-7:1/2" is 0,2,4,6). Surrounding white space and a trailing newline are
// ignored; the empty string is the empty set. It returns an error wrapping
// ErrSyntax for a malformed list (empty element, descending range, bad
// stride) and ErrRange for an id at or above MaxCPUs.
func ParseList(list string) (CPUSet, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		return CPUSet{}, nil
	}
	var spans []spanT
	hi := 0
	for tok := range strings.SplitSeq(list, ",") {
		tok = strings.TrimSpace(tok)
		sp, err := parseSpan(tok)
		if err != nil {
			return CPUSet{}, fmt.Errorf("cpu list %q: %w", list, err)
		}
		spans = append(spans, sp)
		hi = max(hi, sp.hi)
	}
	w := make([]uint64, hi/64+1)
	for _, sp := range spans {
		for c := sp.lo; c <= sp.hi; c++ {
			if (c-sp.lo)%sp.group < sp.used {
				w[c/64] |= 1 << (uint(c) % 64)
			}
		}
	}
	return trim(w), nil
}

type spanT struct{ lo, hi, used, group int }

// parseSpan parses "a", "a-b" or "a-b:used/group".
func parseSpan(tok string) (spanT, error) {
	if tok == "" {
		return spanT{}, fmt.Errorf("%w: empty element", ErrSyntax)
	}
	rng, stride, hasStride := strings.Cut(tok, ":")
	loS, hiS, isRange := strings.Cut(rng, "-")
	lo, err := parseID(loS)
	if err != nil {
		return spanT{}, err
	}
	hi := lo
	if isRange {
		if hi, err = parseID(hiS); err != nil {
			return spanT{}, err
		}
		if hi < lo {
			return spanT{}, fmt.Errorf("%w: descending range %q", ErrSyntax, rng)
		}
	}
	sp := spanT{lo: lo, hi: hi, used: 1, group: 1}
	if hasStride {
		if !isRange {
			return spanT{}, fmt.Errorf("%w: stride %q without a range", ErrSyntax, tok)
		}
		uS, gS, ok := strings.Cut(stride, "/")
		if !ok {
			return spanT{}, fmt.Errorf("%w: stride %q is not used/group", ErrSyntax, stride)
		}
		u, err1 := parseID(uS)
		g, err2 := parseID(gS)
		if err1 != nil || err2 != nil || u == 0 || g == 0 || u > g {
			return spanT{}, fmt.Errorf("%w: bad stride %q", ErrSyntax, stride)
		}
		sp.used, sp.group = u, g
	}
	return sp, nil
}

// parseID parses a decimal CPU id without sign.
func parseID(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: missing number", ErrSyntax)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < '0' || ch > '9' {
			return 0, fmt.Errorf("%w: %q is not a CPU id", ErrSyntax, s)
		}
		n = n*10 + int(ch-'0')
		if n >= MaxCPUs {
			return 0, fmt.Errorf("%w: %s >= %d", ErrRange, s, MaxCPUs)
		}
	}
	return n, nil
}

// ParseMask parses a hexadecimal CPU mask as the kernel prints and accepts
// it (cpumask_parse, /sys/.../cpuN/topology/thread_siblings, taskset):
// either comma-separated 32-bit groups of 1 to 8 hex digits, most
// significant first ("1,00000003"), or one hex number of any length
// ("ff", "100000003"). An optional "0x" prefix, surrounding white space and
// a trailing newline are ignored; "0" is the empty set. It returns an error
// wrapping ErrSyntax for an empty or malformed mask and ErrRange for a set
// bit at or above MaxCPUs.
func ParseMask(mask string) (CPUSet, error) {
	orig := mask
	mask = strings.TrimSpace(mask)
	if len(mask) >= 2 && mask[0] == '0' && (mask[1] == 'x' || mask[1] == 'X') {
		mask = mask[2:]
	}
	if mask == "" {
		return CPUSet{}, fmt.Errorf("cpu mask %q: %w: empty", orig, ErrSyntax)
	}
	// nibbles, least significant first
	var nib []byte
	groups := strings.Split(mask, ",")
	for gi := len(groups) - 1; gi >= 0; gi-- {
		g := groups[gi]
		if g == "" || (len(groups) > 1 && len(g) > 8) {
			return CPUSet{}, fmt.Errorf("cpu mask %q: %w: bad group %q", orig, ErrSyntax, g)
		}
		for i := len(g) - 1; i >= 0; i-- {
			v, ok := hexVal(g[i])
			if !ok {
				return CPUSet{}, fmt.Errorf("cpu mask %q: %w: %q is not hex", orig, ErrSyntax, g[i])
			}
			nib = append(nib, v)
		}
		if len(groups) > 1 && gi > 0 {
			for i := len(g); i < 8; i++ {
				nib = append(nib, 0)
			}
		}
	}
	top := len(nib) - 1
	for top >= 0 && nib[top] == 0 {
		top--
	}
	if top < 0 {
		return CPUSet{}, nil
	}
	if hiBit := top*4 + bits.Len8(nib[top]) - 1; hiBit >= MaxCPUs {
		return CPUSet{}, fmt.Errorf("cpu mask %q: %w: CPU %d >= %d", orig, ErrRange, hiBit, MaxCPUs)
	}
	w := make([]uint64, top/16+1)
	for i := 0; i <= top; i++ {
		w[i/16] |= uint64(nib[i]) << (4 * uint(i%16))
	}
	return trim(w), nil
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unixSetSize is the number of CPUs a unix.CPUSet holds (CPU_SETSIZE, 1024).
const unixSetSize = int(unsafe.Sizeof(unix.CPUSet{})) * 8

// FromUnix converts a unix.CPUSet, as filled by unix.SchedGetaffinity, to a
// CPUSet. A nil pointer gives the empty set.
func FromUnix(u *unix.CPUSet) CPUSet {
	if u == nil {
		return CPUSet{}
	}
	w := make([]uint64, unixSetSize/64)
	for c := range unixSetSize {
		if u.IsSet(c) {
			w[c/64] |= 1 << (uint(c) % 64)
		}
	}
	return trim(w)
}

// Unix converts the set to a unix.CPUSet for unix.SchedSetaffinity. It
// returns an error wrapping ErrRange, and a zero unix.CPUSet, when the set
// holds a CPU id at or above 1024 (CPU_SETSIZE), which a unix.CPUSet cannot
// represent.
func (s CPUSet) Unix() (unix.CPUSet, error) {
	var u unix.CPUSet
	if last := s.Last(); last >= unixSetSize {
		return u, fmt.Errorf("%w: CPU %d does not fit a unix.CPUSet (%d CPUs)", ErrRange, last, unixSetSize)
	}
	for c := range s.All() {
		u.Set(c)
	}
	return u, nil
}
