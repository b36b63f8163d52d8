package metrics

import (
	"slices"
	"testing"

	"github.com/gowq/wq"
)

func TestCumulativeBuckets(t *testing.T) {
	h := wq.HistSnapshot{Count: 10, Buckets: []wq.HistBucket{
		{LowerNs: 0, Count: 1}, {LowerNs: 1024, Count: 2}, {LowerNs: 1152, Count: 3}, {LowerNs: 2048, Count: 4},
	}}
	for _, c := range []struct {
		bounds []int64
		want   []uint64
	}{
		{[]int64{1024, 2048, 4096}, []uint64{1, 6, 10}}, // boundaries: exact
		{[]int64{1}, []uint64{1}},
		{[]int64{0}, []uint64{0}},
		{[]int64{1100}, []uint64{3}}, // inside [1024, 1152): counted at its lower bound
		{[]int64{1 << 40}, []uint64{10}},
		{nil, []uint64{}},
	} {
		if got := cumulativeBuckets(h, c.bounds); !slices.Equal(got, c.want) {
			t.Errorf("cumulativeBuckets(%v) = %v, want %v", c.bounds, got, c.want)
		}
	}
	if got := cumulativeBuckets(wq.HistSnapshot{}, []int64{1, 2}); !slices.Equal(got, []uint64{0, 0}) {
		t.Errorf("empty: %v", got)
	}
}

func TestMergeHist(t *testing.T) {
	a := wq.HistSnapshot{Count: 3, SumNs: 30, MaxNs: 20, Buckets: []wq.HistBucket{{LowerNs: 8, Count: 1}, {LowerNs: 16, Count: 2}}}
	b := wq.HistSnapshot{Count: 2, SumNs: 100, MaxNs: 90, Buckets: []wq.HistBucket{{LowerNs: 16, Count: 1}, {LowerNs: 80, Count: 1}}}
	m := mergeHist(a, b)
	want := []wq.HistBucket{{LowerNs: 8, Count: 1}, {LowerNs: 16, Count: 3}, {LowerNs: 80, Count: 1}}
	if m.Count != 5 || m.SumNs != 130 || m.MaxNs != 90 || !slices.Equal(m.Buckets, want) {
		t.Errorf("mergeHist = %+v", m)
	}
	if len(a.Buckets) != 2 || a.Buckets[1].Count != 2 {
		t.Error("mergeHist modified its argument")
	}
}

func TestDefaultBucketsArePowersOfTwoNs(t *testing.T) {
	c, err := NewCollector(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, ns := range c.boundsNs {
		if want := int64(1) << (minBucketExp + i); ns != want {
			t.Errorf("bound %d = %d ns, want %d", i, ns, want)
		}
	}
}
