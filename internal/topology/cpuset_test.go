package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

func TestParseListExamples(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"", nil},
		{"\n", nil},
		{"0", []int{0}},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}},
		{" 5 , 1-2 ", []int{1, 2, 5}},
		{"3,3,2-3", []int{2, 3}},
		{"0-7:1/2", []int{0, 2, 4, 6}},
		{"0-9:2/5", []int{0, 1, 5, 6}},
		{"63-65", []int{63, 64, 65}},
		{"1023,1024", []int{1023, 1024}},
	} {
		got, err := ParseList(tc.in)
		if err != nil {
			t.Errorf("ParseList(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got.List(), tc.want) {
			t.Errorf("ParseList(%q) = %v, want %v", tc.in, got.List(), tc.want)
		}
	}
}

func TestParseListErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
	}{
		{",", ErrSyntax},
		{"1,,2", ErrSyntax},
		{"3-1", ErrSyntax},
		{"-1", ErrSyntax},
		{"1-", ErrSyntax},
		{"a", ErrSyntax},
		{"+1", ErrSyntax},
		{"0x3", ErrSyntax},
		{"1:1/2", ErrSyntax},
		{"0-7:3/2", ErrSyntax},
		{"0-7:0/2", ErrSyntax},
		{"0-7:1/0", ErrSyntax},
		{"0-7:1", ErrSyntax},
		{"65536", ErrRange},
		{"0-99999999999999999999", ErrRange},
	} {
		got, err := ParseList(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("ParseList(%q) = %v, %v; want error %v", tc.in, got, err, tc.want)
		}
	}
}

func TestMaskExamples(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		mask string
	}{
		{nil, "0"},
		{[]int{0, 1}, "3"},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, "ff"},
		{[]int{31}, "80000000"},
		{[]int{0, 1, 32}, "1,00000003"},
		{[]int{64}, "1,00000000,00000000"},
		{[]int{4, 100}, "10,00000000,00000000,00000010"},
	} {
		s := NewCPUSet(tc.cpus...)
		if got := s.Mask(); got != tc.mask {
			t.Errorf("%v.Mask() = %q, want %q", tc.cpus, got, tc.mask)
		}
		back, err := ParseMask(tc.mask)
		if err != nil || !back.Equal(s) {
			t.Errorf("ParseMask(%q) = %v, %v; want %v", tc.mask, back, err, s)
		}
	}
}

func TestParseMaskForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // list format
	}{
		{"00000000,00000003\n", "0-1"}, // kernel's padded form for 64 CPUs
		{"03", "0-1"},
		{"0x3", "0-1"},
		{"0XfF", "0-7"},
		{"100000003", "0-1,32"}, // taskset form, no commas
		{"1,3", "0-1,32"},       // short groups are zero-extended
		{"0", ""},
		{"0,00000000", ""},
		{strings.Repeat("0", 20000) + "1", "0"}, // leading zeros beyond MaxCPUs are fine
	} {
		got, err := ParseMask(tc.in)
		if err != nil || got.String() != tc.want {
			t.Errorf("ParseMask(%.20q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{"", ErrSyntax},
		{"0x", ErrSyntax},
		{"g", ErrSyntax},
		{"1,,2", ErrSyntax},
		{",1", ErrSyntax},
		{"1,123456789", ErrSyntax}, // a group has at most 8 digits
		{"-1", ErrSyntax},
		{"1" + strings.Repeat("0", MaxCPUs/4), ErrRange},
	} {
		got, err := ParseMask(tc.in)
		if !errors.Is(err, tc.want) {
			t.Errorf("ParseMask(%.20q) = %v, %v; want error %v", tc.in, got, err, tc.want)
		}
	}
}

func TestNewCPUSetIgnoresInvalidIDs(t *testing.T) {
	s := NewCPUSet(-1, 3, MaxCPUs, 1<<40, 3)
	if got := s.String(); got != "3" {
		t.Fatalf("NewCPUSet = %q, want \"3\"", got)
	}
	if !NewCPUSet(-5).IsEmpty() || NewCPUSet().First() != -1 || NewCPUSet().Last() != -1 {
		t.Fatal("empty set misbehaves")
	}
	var zero CPUSet
	if !zero.Equal(NewCPUSet()) || zero.String() != "" || zero.Mask() != "0" || zero.List() != nil {
		t.Fatal("zero CPUSet is not the empty set")
	}
	// Sets built by different operations compare equal when their CPUs do.
	if !NewCPUSet(1, 200).And(NewCPUSet(1)).Equal(NewCPUSet(1)) {
		t.Fatal("And result with a high CPU removed is not trimmed")
	}
}

func TestUnixConversion(t *testing.T) {
	s := NewCPUSet(0, 5, 63, 64, 1023)
	u, err := s.Unix()
	if err != nil {
		t.Fatal(err)
	}
	if u.Count() != 5 || !u.IsSet(1023) || !u.IsSet(64) || u.IsSet(1) {
		t.Fatalf("Unix() = %v", u)
	}
	if back := FromUnix(&u); !back.Equal(s) {
		t.Fatalf("FromUnix(Unix(%v)) = %v", s, back)
	}
	if _, err := NewCPUSet(1024).Unix(); !errors.Is(err, ErrRange) {
		t.Fatalf("Unix() of CPU 1024: err = %v, want ErrRange", err)
	}
	if !FromUnix(nil).IsEmpty() {
		t.Fatal("FromUnix(nil) not empty")
	}
	var empty unix.CPUSet
	if !FromUnix(&empty).IsEmpty() {
		t.Fatal("FromUnix(empty) not empty")
	}
}

// genCPUs draws a set of CPU ids that spans several 64-bit words and
// crosses the 1024-CPU limit of unix.CPUSet.
func genCPUs(t *rapid.T, label string) map[int]bool {
	ids := rapid.SliceOfN(rapid.IntRange(0, 2100), 0, 60).Draw(t, label)
	m := map[int]bool{}
	for _, c := range ids {
		m[c] = true
	}
	return m
}

func setOf(m map[int]bool) CPUSet {
	var ids []int
	for c := range m {
		ids = append(ids, c)
	}
	return NewCPUSet(ids...)
}

func sortedKeys(m map[int]bool) []int {
	var out []int
	for c, ok := range m {
		if ok {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func TestCPUSetModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ma, mb := genCPUs(t, "a"), genCPUs(t, "b")
		a, b := setOf(ma), setOf(mb)

		if got, want := a.List(), sortedKeys(ma); !slices.Equal(got, want) {
			t.Fatalf("List = %v, want %v", got, want)
		}
		if a.Len() != len(ma) || a.IsEmpty() != (len(ma) == 0) {
			t.Fatalf("Len = %d, IsEmpty = %v, model has %d", a.Len(), a.IsEmpty(), len(ma))
		}
		if want := sortedKeys(ma); len(want) > 0 && (a.First() != want[0] || a.Last() != want[len(want)-1]) {
			t.Fatalf("First/Last = %d/%d, want %d/%d", a.First(), a.Last(), want[0], want[len(want)-1])
		}
		for c := -1; c < 2200; c += 7 {
			if a.Has(c) != ma[c] {
				t.Fatalf("Has(%d) = %v", c, a.Has(c))
			}
		}
		and, or, andNot := map[int]bool{}, map[int]bool{}, map[int]bool{}
		for c := range ma {
			or[c] = true
			if mb[c] {
				and[c] = true
			} else {
				andNot[c] = true
			}
		}
		for c := range mb {
			or[c] = true
		}
		if !a.And(b).Equal(setOf(and)) || !a.Or(b).Equal(setOf(or)) || !a.AndNot(b).Equal(setOf(andNot)) {
			t.Fatalf("set algebra wrong for %v, %v", a, b)
		}
		if a.IsSubset(b) != (len(andNot) == 0) || !a.And(b).IsSubset(a) {
			t.Fatalf("IsSubset wrong for %v, %v", a, b)
		}
		if a.Equal(b) != slices.Equal(sortedKeys(ma), sortedKeys(mb)) {
			t.Fatalf("Equal(%v, %v) = %v", a, b, a.Equal(b))
		}
	})
}

func TestListRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := setOf(genCPUs(t, "cpus"))
		str := s.String()
		back, err := ParseList(str)
		if err != nil {
			t.Fatalf("ParseList(%q): %v", str, err)
		}
		if !back.Equal(s) {
			t.Fatalf("ParseList(%q) = %v, want %v", str, back.List(), s.List())
		}
		if back.String() != str {
			t.Fatalf("String not canonical: %q then %q", str, back.String())
		}
	})
}

func TestMaskRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := setOf(genCPUs(t, "cpus"))
		m := s.Mask()
		back, err := ParseMask(m)
		if err != nil {
			t.Fatalf("ParseMask(%q): %v", m, err)
		}
		if !back.Equal(s) {
			t.Fatalf("ParseMask(%q) = %v, want %v", m, back, s)
		}
		// The same mask without commas (taskset style) and with the
		// kernel's zero padding parses to the same set.
		groups := strings.Split(m, ",")
		plain := strings.Join(groups, "")
		padded := fmt.Sprintf("0x%08s", groups[0])
		if len(groups) > 1 {
			padded = fmt.Sprintf("%08s,%s", groups[0], strings.Join(groups[1:], ","))
		}
		for _, alt := range []string{plain, padded} {
			if got, err := ParseMask(alt); err != nil || !got.Equal(s) {
				t.Fatalf("ParseMask(%q) = %v, %v; want %v", alt, got, err, s)
			}
		}
		if s.Last() < 1024 {
			u, err := s.Unix()
			if err != nil || !FromUnix(&u).Equal(s) {
				t.Fatalf("unix.CPUSet round trip of %v failed: %v", s, err)
			}
		}
	})
}

// TestParseListModel writes random lists with ranges and strides, as a
// user or the kernel might, and checks ParseList against an expansion.
func TestParseListModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "n")
		model := map[int]bool{}
		var parts []string
		for i := range n {
			lo := rapid.IntRange(0, 1500).Draw(t, fmt.Sprint("lo", i))
			switch rapid.IntRange(0, 2).Draw(t, fmt.Sprint("kind", i)) {
			case 0:
				parts = append(parts, fmt.Sprint(lo))
				model[lo] = true
			case 1:
				hi := lo + rapid.IntRange(0, 200).Draw(t, fmt.Sprint("len", i))
				parts = append(parts, fmt.Sprintf("%d-%d", lo, hi))
				for c := lo; c <= hi; c++ {
					model[c] = true
				}
			case 2:
				hi := lo + rapid.IntRange(0, 200).Draw(t, fmt.Sprint("len", i))
				g := rapid.IntRange(1, 9).Draw(t, fmt.Sprint("group", i))
				u := rapid.IntRange(1, g).Draw(t, fmt.Sprint("used", i))
				parts = append(parts, fmt.Sprintf("%d-%d:%d/%d", lo, hi, u, g))
				for c := lo; c <= hi; c++ {
					if (c-lo)%g < u {
						model[c] = true
					}
				}
			}
		}
		list := strings.Join(parts, ",")
		got, err := ParseList(list)
		if err != nil {
			t.Fatalf("ParseList(%q): %v", list, err)
		}
		if !slices.Equal(got.List(), sortedKeys(model)) {
			t.Fatalf("ParseList(%q) = %v, want %v", list, got, setOf(model))
		}
	})
}

func TestParseNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringMatching(`[0-9a-fxX,:/\- ]{0,40}`).Draw(t, "s")
		_, _ = ParseList(s)
		_, _ = ParseMask(s)
		_, _ = ParseScope(s)
	})
}
