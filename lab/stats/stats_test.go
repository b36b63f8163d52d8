package stats

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// oneToHundred returns samples of 1..100 us.
func oneToHundred(rawLimit int) *Samples {
	s := NewSamples(rawLimit)
	for i := int64(1); i <= 100; i++ {
		s.Add(i * 1000)
	}
	return s
}

func near(t *testing.T, name string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.9g, want %.9g (tol %g)", name, got, want, tol)
	}
}

func TestSummaryKnownData(t *testing.T) {
	// Insert in a scrambled order so sorting is exercised.
	s := NewSamples(0)
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(100) {
		s.Add(int64(i+1) * 1000)
	}
	m := s.Summary()
	if m.Count != 100 || !m.Exact || m.OutOfRange != 0 {
		t.Fatalf("Count=%d Exact=%v OutOfRange=%d", m.Count, m.Exact, m.OutOfRange)
	}
	const tol = 1e-9
	near(t, "Min", m.Min, 1, tol)
	near(t, "Max", m.Max, 100, tol)
	near(t, "Avg", m.Avg, 50.5, tol)
	near(t, "Median", m.Median, 50.5, tol)
	near(t, "Stdev", m.Stdev, math.Sqrt(100*101/12.0), tol) // 29.0114919...
	near(t, "P90", m.P90, 90.1, tol)
	near(t, "P95", m.P95, 95.05, tol)
	near(t, "P98", m.P98, 98.02, tol)
	near(t, "P99", m.P99, 99.01, tol)
	near(t, "P999", m.P999, 99.901, tol)

	for _, c := range []struct{ p, want float64 }{{0, 1}, {25, 25.75}, {100, 100}} {
		got, err := s.Percentile(c.p)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "Percentile", got, c.want, tol)
	}
}

func TestSummaryEdgeCases(t *testing.T) {
	var empty Samples
	if m := empty.Summary(); m.Count != 0 || m.Avg != 0 || m.Max != 0 {
		t.Errorf("empty summary = %+v", m)
	}
	if _, err := empty.Percentile(50); !errors.Is(err, ErrNoSamples) {
		t.Errorf("Percentile on empty: %v", err)
	}
	one := NewSamples(0)
	one.Add(7000)
	m := one.Summary()
	if m.Count != 1 || m.Min != 7 || m.Max != 7 || m.Median != 7 || m.P999 != 7 || m.Stdev != 0 {
		t.Errorf("single sample summary = %+v", m)
	}
	for _, p := range []float64{-1, 100.5, math.NaN()} {
		if _, err := one.Percentile(p); !errors.Is(err, ErrBadArgument) {
			t.Errorf("Percentile(%v) err = %v, want ErrBadArgument", p, err)
		}
	}
	neg := NewSamples(0)
	neg.Add(-5)
	neg.Add(2000)
	if m := neg.Summary(); m.OutOfRange != 1 || m.Min != 0 || m.Max != 2 {
		t.Errorf("negative sample: %+v", m)
	}
}

func TestHistogramModeApproximatesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exact := NewSamples(1 << 20)
	hist := NewSamples(-1)
	for range 200000 {
		// Log-uniform from 1 us to 100 ms, like scheduling latencies.
		ns := int64(1000 * math.Pow(10, 5*rng.Float64()))
		exact.Add(ns)
		hist.Add(ns)
	}
	e, h := exact.Summary(), hist.Summary()
	if !e.Exact || h.Exact {
		t.Fatalf("Exact flags: exact=%v hist=%v", e.Exact, h.Exact)
	}
	if e.Count != h.Count || e.Min != h.Min || e.Max != h.Max {
		t.Errorf("count/min/max differ: %+v vs %+v", e, h)
	}
	rel := func(name string, a, b float64) {
		t.Helper()
		if math.Abs(a-b) > 0.002*math.Abs(a)+0.002 {
			t.Errorf("%s: exact %.4f hist %.4f", name, a, b)
		}
	}
	rel("Avg", e.Avg, h.Avg)
	rel("Stdev", e.Stdev, h.Stdev)
	rel("Median", e.Median, h.Median)
	rel("P90", e.P90, h.P90)
	rel("P99", e.P99, h.P99)
	rel("P999", e.P999, h.P999)
}

func TestRawLimitOverflow(t *testing.T) {
	s := NewSamples(10)
	for i := int64(1); i <= 10; i++ {
		s.Add(i * 1000)
	}
	if !s.Exact() {
		t.Fatal("exact at the limit")
	}
	s.Add(11_000)
	s.Add(20_000_000_000) // 20 s: above the histogram range
	m := s.Summary()
	if m.Exact || m.Count != 12 || m.Min != 1 || m.Max != 20_000_000 || m.OutOfRange != 1 {
		t.Errorf("after overflow: %+v", m)
	}
	near(t, "Median", m.Median, 6.5, 0.01)
}

func TestMerge(t *testing.T) {
	whole := oneToHundred(0)
	a, b := NewSamples(0), NewSamples(0)
	for i := int64(1); i <= 100; i++ {
		if i%3 == 0 {
			a.Add(i * 1000)
		} else {
			b.Add(i * 1000)
		}
	}
	a.Merge(b)
	a.Merge(nil)
	if got, want := a.Summary(), whole.Summary(); !summariesNear(got, want, 1e-9) {
		t.Errorf("merged %v\nwant   %v", got, want)
	}
	// Raw into histogram and histogram into raw.
	h := NewSamples(-1)
	h.Merge(oneToHundred(0))
	r := NewSamples(0)
	r.Merge(oneToHundred(-1))
	for _, x := range []*Samples{h, r} {
		if x.Exact() {
			t.Error("merge with a histogram side must give histogram mode")
		}
		if got := x.Summary(); !summariesNear(got, whole.Summary(), 0.2) {
			t.Errorf("mixed merge %v\nwant        %v", got, whole.Summary())
		}
	}
	// Self merge doubles every sample.
	d := oneToHundred(0)
	d.Merge(d)
	if m := d.Summary(); m.Count != 200 || m.Median != 50.5 || m.Avg != 50.5 {
		t.Errorf("self merge: %v", m)
	}
}

func summariesNear(a, b Summary, tol float64) bool {
	fa := []float64{a.Min, a.Median, a.Avg, a.Max, a.Stdev, a.P90, a.P95, a.P98, a.P99, a.P999}
	fb := []float64{b.Min, b.Median, b.Avg, b.Max, b.Stdev, b.P90, b.P95, b.P98, b.P99, b.P999}
	for i := range fa {
		if math.Abs(fa[i]-fb[i]) > tol {
			return false
		}
	}
	return a.Count == b.Count
}

func TestCDF(t *testing.T) {
	xs, ys, err := oneToHundred(0).CDF(5)
	if err != nil {
		t.Fatal(err)
	}
	wantX := []float64{1, 25.75, 50.5, 75.25, 100}
	wantY := []float64{0, 0.25, 0.5, 0.75, 1}
	for i := range wantX {
		near(t, "x", xs[i], wantX[i], 1e-9)
		near(t, "y", ys[i], wantY[i], 1e-12)
	}
	if _, _, err := oneToHundred(0).CDF(1); !errors.Is(err, ErrBadArgument) {
		t.Errorf("CDF(1): %v", err)
	}
	if _, _, err := new(Samples).CDF(10); !errors.Is(err, ErrNoSamples) {
		t.Errorf("CDF on empty: %v", err)
	}
}

func TestWriteFioClat(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFioClat(&buf, oneToHundred(0)); err != nil {
		t.Fatal(err)
	}
	want := `    clat (usec): min=1, max=100, avg=50.50, stdev=29.01
    clat percentiles (usec):
     |  1.00th=[    1],  5.00th=[    5], 10.00th=[   10], 20.00th=[   20],
     | 30.00th=[   30], 40.00th=[   40], 50.00th=[   50], 60.00th=[   60],
     | 70.00th=[   70], 80.00th=[   80], 90.00th=[   90], 95.00th=[   95],
     | 99.00th=[   99], 99.50th=[  100], 99.90th=[  100], 99.95th=[  100],
     | 99.99th=[  100]
`
	if buf.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", buf.String(), want)
	}

	// Wide values: width grows, three to a line; sub-us values round up.
	s := NewSamples(0)
	s.Add(13_400)        // 13.4 us -> 14
	s.Add(23_882_000)    // 23882 us
	s.Add(123_456_789)   // 123457 us: 6 digits
	s.Add(1_234_567_890) // 1234568 us: 7 digits
	buf.Reset()
	if err := WriteFioClat(&buf, s); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if lines[0] != "    clat (usec): min=13, max=1234567, avg=345480.02, stdev=595131.37" {
		t.Errorf("clat line: %q", lines[0])
	}
	if lines[2] != "     |  1.00th=[     14],  5.00th=[     14], 10.00th=[     14]," {
		t.Errorf("first percentile line: %q", lines[2])
	}
	if !strings.HasSuffix(lines[len(lines)-1], "99.99th=[1234568]") {
		t.Errorf("last line: %q", lines[len(lines)-1])
	}

	if err := WriteFioClat(&buf, new(Samples)); !errors.Is(err, ErrNoSamples) {
		t.Errorf("empty: %v", err)
	}
	if err := WriteFioClat(nil, s); !errors.Is(err, ErrBadArgument) {
		t.Errorf("nil writer: %v", err)
	}
}

func TestChangePct(t *testing.T) {
	// The seeds' tables (000/003: two decimals; headline rounded).
	cases := []struct {
		base, v float64
		dec     int
		want    string
	}{
		{15253, 3514, 2, "-76.96%"},
		{15253, 3514, 0, "-77%"},
		{14001, 3450, 2, "-75.36%"},
		{3117, 3097, 2, "-0.64%"},
		{30170, 4896, 2, "-83.77%"},
		{357805, 174205, 0, "-51%"},
		{11746, 0, 0, "-100%"},
		{100, 112.3, 0, "+12%"},
		{100, 100.001, 2, "0.00%"},
		{100, 99.999, 0, "0%"},
		{0, 5, 0, "n/a"},
	}
	for _, c := range cases {
		if got := FormatPct(ChangePct(c.base, c.v), c.dec); got != c.want {
			t.Errorf("FormatPct(ChangePct(%v, %v), %d) = %q, want %q", c.base, c.v, c.dec, got, c.want)
		}
	}
	if got := FormatPct(-12.5, -3); got != "-12%" && got != "-13%" {
		t.Errorf("negative decimals not clamped: %q", got)
	}
}

func TestNowMonotonic(t *testing.T) {
	prev := Now()
	var wg sync.WaitGroup
	results := make([]int64, 8)
	for i := range results {
		wg.Go(func() { results[i] = Now() })
	}
	wg.Wait()
	for i := range 10000 {
		n := Now()
		if n < prev {
			t.Fatalf("Now went backwards at %d: %d < %d", i, n, prev)
		}
		prev = n
	}
	for _, r := range results {
		if r < 0 || r > prev {
			t.Errorf("goroutine timestamp %d outside [0, %d]", r, prev)
		}
	}
}

func TestLockedConcurrent(t *testing.T) {
	l := NewLocked(0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				l.Add(int64(g*1000+i) * 1000)
			}
		})
	}
	wg.Go(func() {
		for range 10 {
			_ = l.Summary()
		}
	})
	wg.Wait()
	snap := l.Snapshot()
	m := snap.Summary()
	if m.Count != 4000 || m.Min != 0 || m.Max != 3999 {
		t.Errorf("locked summary: %v", m)
	}
	l.Merge(snap)
	if got := l.Summary().Count; got != 8000 {
		t.Errorf("after merge count = %d", got)
	}
}

func BenchmarkNow(b *testing.B) {
	var sink int64
	for b.Loop() {
		sink += Now()
	}
	_ = sink
}

func BenchmarkAdd(b *testing.B) {
	s := NewSamples(0)
	var i int64
	for b.Loop() {
		i++
		s.Add(i & 0xfffff)
	}
}

func BenchmarkAddHistogram(b *testing.B) {
	s := NewSamples(-1)
	var i int64
	for b.Loop() {
		i++
		s.Add(i & 0xfffff)
	}
}
