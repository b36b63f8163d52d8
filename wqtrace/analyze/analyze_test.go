package analyze

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gowq/wq/wqtrace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ktraceDir = "../../testdata/ktrace/"

func load(t *testing.T, name string) []wqtrace.Event {
	t.Helper()
	f, err := os.Open(ktraceDir + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := wqtrace.NewParser(f)
	p.Strict = true
	var evs []wqtrace.Event
	for p.Next() {
		evs = append(evs, p.Event())
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

// The expected values below were computed independently of this package,
// with awk over the capture text, e.g. for kblockd queue->start:
//
//	awk '/workqueue_queue_work:/ && /workqueue=kblockd/ { ts=$4; sub(":","",ts);
//	       split($0,a,"work struct="); split(a[2],b," "); q[b[1]]=ts }
//	     /workqueue_execute_start:/ { ts=$4; sub(":","",ts); split($0,a,"work struct ");
//	       split(a[2],b,":"); if (b[1] in q) { print int((ts-q[b[1]])*1e6+0.5); delete q[b[1]] } }' \
//	    idle-plus-fsync.txt | sort -n
//
// and nearest-rank percentiles read off the sorted list with sed -n.
type wqFacts struct {
	count                  int
	q2sMin, q2sMax, q2sAvg float64
	p50, p90, p99          float64
	execN                  int
	execMin, execMax       float64
}

func TestCaptureIdle(t *testing.T) {
	r := Analyze(load(t, "idle-plus-fsync.txt"))
	if r.Events != 2876 || len(r.Items) != 719 || r.Unmatched != (Unmatched{}) {
		t.Errorf("events %d items %d unmatched %+v; want 2876, 719, none", r.Events, len(r.Items), r.Unmatched)
	}
	checkWQ(t, r, "kblockd", wqFacts{count: 398, q2sMin: 2, q2sMax: 74, q2sAvg: 10.151, p50: 9, p90: 16, p99: 41,
		execN: 398, execMin: 3, execMax: 33})
	checkWQ(t, r, "ext4-rsv-conversion", wqFacts{count: 201, q2sMin: 3, q2sMax: 6431, q2sAvg: 696.204, p50: -1,
		execN: 201, execMin: 3, execMax: 50})
	checkWQ(t, r, "events", wqFacts{count: 66, q2sMin: 3, q2sMax: 1150, q2sAvg: 43.5, p50: -1, execN: 66, execMin: 2, execMax: 15})
	checkWQ(t, r, "kvfree_rcu_reclaim", wqFacts{count: 1, q2sMin: 33, q2sMax: 33, q2sAvg: 33, p50: 33, p90: 33, p99: 33,
		execN: 1, execMin: 6, execMax: 6})
	if len(r.Workqueues) != 10 {
		t.Errorf("%d workqueues, want 10", len(r.Workqueues))
	}
	// Sorted by count: kblockd 398, ext4-rsv-conversion 201, events 66, ...
	if names := groupNames(r.Workqueues[:3]); names != "kblockd ext4-rsv-conversion events" {
		t.Errorf("workqueue order %q", names)
	}
	// kblockd's histogram: 206 items took 8..15 us (awk: $1>=8 && $1<=15).
	h := r.Workqueue("kblockd").Hist
	if h.Total() != 398 || h.Buckets[Bucket(8)] != 206 || h.Buckets[0] != 0 {
		t.Errorf("kblockd hist %v", h.Buckets)
	}
	// grep -o 'function=[a-z_]* workqueue=kblockd' | sort | uniq -c
	for fn, n := range map[string]int{"blk_mq_run_work_fn": 198, "blk_mq_requeue_work": 198, "blk_mq_timeout_work": 2} {
		if g := r.Function("kblockd", fn); g == nil || g.Count != n || g.Queued != n || g.Hist != nil {
			t.Errorf("kblockd/%s: %+v, want count %d", fn, g, n)
		}
	}
}

func TestCaptureFio(t *testing.T) {
	r := Analyze(load(t, "fio-cpuio-8x90-plus-fsync.txt"))
	// The capture opens with an execute_start/end pair whose queue came
	// before it: one unmatched start, its end consumed with it.
	if want := (Unmatched{Start: 1}); r.Unmatched != want {
		t.Errorf("unmatched %+v, want %+v", r.Unmatched, want)
	}
	if len(r.Items) != 713 {
		t.Errorf("items %d, want 713", len(r.Items))
	}
	checkWQ(t, r, "kblockd", wqFacts{count: 399, q2sMin: 2, q2sMax: 70, q2sAvg: 8.885, p50: 8, p90: 14, p99: 46,
		execN: 399, execMin: 3, execMax: 394})
	checkWQ(t, r, "mm_percpu_wq", wqFacts{count: 13, q2sMin: 7, q2sMax: 8020, q2sAvg: 638.846, p50: -1, execN: 13, execMin: 4, execMax: 76})
	// vmstat_update 00000000610ee798 is queued again while it runs (lines
	// 2684-2689): start 589.909489, requeue 589.909492, end 589.909565,
	// start again 589.909566.
	var got []Item
	for _, it := range r.Items {
		if it.Work == 0x610ee798 && it.StartNs >= 589_909_489_000 && it.StartNs <= 589_909_566_000 {
			got = append(got, it)
		}
	}
	if len(got) != 2 ||
		got[0].QueueNs != 589_909_474_000 || got[0].EndNs != 589_909_565_000 ||
		got[1].QueueNs != 589_909_492_000 || got[1].ActivateNs != 589_909_493_000 || got[1].StartNs != 589_909_566_000 ||
		got[1].Workqueue != "mm_percpu_wq" || got[1].Function != "vmstat_update" || got[1].ReqCPU != 1 || got[1].WorkerTID != 979 {
		t.Errorf("requeue while running paired wrongly: %+v", got)
	}
}

func checkWQ(t *testing.T, r *Report, name string, f wqFacts) {
	t.Helper()
	g := r.Workqueue(name)
	if g == nil {
		t.Fatalf("no workqueue %q", name)
	}
	s := g.QueueToStart
	if g.Count != f.count || s.Count != f.count || s.Min != f.q2sMin || s.Max != f.q2sMax || math.Abs(s.Avg-f.q2sAvg) > 0.0005 {
		t.Errorf("%s: count %d queue->start %+v; want count %d min %v max %v avg %v", name, g.Count, s, f.count, f.q2sMin, f.q2sMax, f.q2sAvg)
	}
	if f.p50 >= 0 && (s.P50 != f.p50 || s.P90 != f.p90 || s.P99 != f.p99) {
		t.Errorf("%s: p50/p90/p99 %v/%v/%v, want %v/%v/%v", name, s.P50, s.P90, s.P99, f.p50, f.p90, f.p99)
	}
	if e := g.Exec; e.Count != f.execN || e.Min != f.execMin || e.Max != f.execMax {
		t.Errorf("%s: exec %+v, want n %d min %v max %v", name, e, f.execN, f.execMin, f.execMax)
	}
	if g.Queued < g.Count {
		t.Errorf("%s: queued %d < count %d", name, g.Queued, g.Count)
	}
}

func groupNames(gs []*Group) string {
	var s []string
	for _, g := range gs {
		s = append(s, g.Workqueue)
	}
	return strings.Join(s, " ")
}

// ev builds events for the hand-made cases; times are in us.
func q(us int64, work uintptr, fn, wq string) wqtrace.Event {
	return wqtrace.Event{Kind: wqtrace.QueueWork, TimeNs: us * 1000, Work: work, Function: fn, Workqueue: wq, ReqCPU: wqtrace.WorkCPUUnbound, TargetCPU: -1, TID: 1}
}
func a(us int64, work uintptr, fn string) wqtrace.Event {
	return wqtrace.Event{Kind: wqtrace.ActivateWork, TimeNs: us * 1000, Work: work, Function: fn, TID: 1}
}
func s(us int64, work uintptr, fn string, tid int) wqtrace.Event {
	return wqtrace.Event{Kind: wqtrace.ExecuteStart, TimeNs: us * 1000, Work: work, Function: fn, TID: tid}
}
func e(us int64, work uintptr, fn string, tid int) wqtrace.Event {
	return wqtrace.Event{Kind: wqtrace.ExecuteEnd, TimeNs: us * 1000, Work: work, Function: fn, TID: tid}
}

func TestPairEdgeCases(t *testing.T) {
	type span struct{ q, a, s, e int64 } // us; -1 when missing
	cases := []struct {
		name   string
		events []wqtrace.Event
		items  []span
		un     Unmatched
	}{
		{"complete", []wqtrace.Event{q(10, 1, "f", "w"), a(11, 1, "f"), s(15, 1, "f", 7), e(20, 1, "f", 7)},
			[]span{{10, 11, 15, 20}}, Unmatched{}},
		{"missing start and queue at the beginning", []wqtrace.Event{s(1, 1, "f", 7), e(2, 1, "f", 7), q(10, 1, "f", "w"), s(12, 1, "f", 7), e(13, 1, "f", 7)},
			[]span{{10, -1, 12, 13}}, Unmatched{Start: 1}},
		{"activate without queue at the beginning", []wqtrace.Event{a(1, 1, "f"), s(2, 1, "f", 7), e(3, 1, "f", 7)},
			nil, Unmatched{Activate: 1, Start: 1}},
		{"missing end", []wqtrace.Event{q(10, 1, "f", "w"), a(11, 1, "f"), s(15, 1, "f", 7)},
			[]span{{10, 11, 15, -1}}, Unmatched{NoEnd: 1}},
		{"missing start at the end", []wqtrace.Event{q(10, 1, "f", "w"), a(11, 1, "f"), q(12, 2, "g", "w")},
			nil, Unmatched{Queue: 2}},
		{"end without start", []wqtrace.Event{e(5, 1, "f", 7)}, nil, Unmatched{End: 1}},
		{"requeue while running", []wqtrace.Event{
			q(10, 1, "f", "w"), a(11, 1, "f"), s(12, 1, "f", 7),
			q(14, 1, "f", "w"), a(15, 1, "f"),
			e(20, 1, "f", 7), s(21, 1, "f", 7), e(30, 1, "f", 7)},
			[]span{{10, 11, 12, 20}, {14, 15, 21, 30}}, Unmatched{}},
		{"requeue runs on another worker", []wqtrace.Event{
			q(10, 1, "f", "w"), s(12, 1, "f", 7), q(14, 1, "f", "w"), s(16, 1, "f", 8), e(20, 1, "f", 7), e(22, 1, "f", 8)},
			[]span{{10, -1, 12, 20}, {14, -1, 16, 22}}, Unmatched{}},
		{"superseded (cancelled) queue", []wqtrace.Event{q(10, 1, "f", "w"), q(20, 1, "f", "w"), s(25, 1, "f", 7), e(26, 1, "f", 7)},
			[]span{{20, -1, 25, 26}}, Unmatched{Queue: 1, Superseded: 1}},
		{"address reused by another function", []wqtrace.Event{q(10, 1, "f", "w"), s(12, 1, "g", 7), e(13, 1, "g", 7)},
			nil, Unmatched{Queue: 1, Start: 1}},
		{"second activate", []wqtrace.Event{q(10, 1, "f", "w"), a(11, 1, "f"), a(12, 1, "f"), s(13, 1, "f", 7), e(14, 1, "f", 7)},
			[]span{{10, 11, 13, 14}}, Unmatched{Activate: 1}},
		{"lost end, then next execution on the same thread", []wqtrace.Event{
			q(1, 1, "f", "w"), s(2, 1, "f", 7), q(3, 1, "f", "w"), s(4, 1, "f", 7), e(5, 1, "f", 7)},
			[]span{{1, -1, 2, -1}, {3, -1, 4, 5}}, Unmatched{NoEnd: 1}},
		{"old format: no function on activate and end", []wqtrace.Event{q(10, 1, "f", "w"), a(11, 1, ""), s(12, 1, "f", 7), e(13, 1, "", 7)},
			[]span{{10, 11, 12, 13}}, Unmatched{}},
		{"invalid kinds ignored", []wqtrace.Event{{Kind: 0, Work: 1}, q(1, 1, "f", "w"), {Kind: 9, Work: 1}, s(2, 1, "f", 7), e(3, 1, "f", 7)},
			[]span{{1, -1, 2, 3}}, Unmatched{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items, un := Pair(tc.events)
			if un != tc.un {
				t.Errorf("unmatched %+v, want %+v", un, tc.un)
			}
			var got []span
			for _, it := range items {
				sp := span{it.QueueNs / 1000, -1, it.StartNs / 1000, -1}
				if it.HasActivate {
					sp.a = it.ActivateNs / 1000
				}
				if it.HasEnd {
					sp.e = it.EndNs / 1000
				}
				got = append(got, sp)
				if it.Workqueue != "w" || it.Function != "f" {
					t.Errorf("workqueue/function not carried: %+v", it)
				}
			}
			if !slices.Equal(got, tc.items) {
				t.Errorf("items %v, want %v", got, tc.items)
			}
			// Order of the input does not matter: the events are sorted by
			// time (the cases have no equal timestamps).
			rev := slices.Clone(tc.events)
			slices.Reverse(rev)
			slices.SortStableFunc(rev, func(x, y wqtrace.Event) int { return int(x.TimeNs - y.TimeNs) })
			if items2, un2 := Pair(rev); un2 != un || len(items2) != len(items) {
				t.Errorf("shuffled input gives %+v %d items", un2, len(items2))
			}
		})
	}
}

func TestUnsortedInput(t *testing.T) {
	evs := []wqtrace.Event{e(20, 1, "f", 7), s(15, 1, "f", 7), a(11, 1, "f"), q(10, 1, "f", "w")}
	orig := slices.Clone(evs)
	items, un := Pair(evs)
	if len(items) != 1 || un != (Unmatched{}) || items[0].QueueToStartNs() != 5000 {
		t.Errorf("unsorted: %+v %+v", items, un)
	}
	if !slices.Equal(evs, orig) {
		t.Error("Pair modified its input")
	}
}

// TestParsedOldFormat runs text in older kernels' formats, with other
// tracepoints interleaved, through wqtrace.Parse and Analyze.
func TestParsedOldFormat(t *testing.T) {
	text := `# tracer: nop
#
          <idle>-0     [000] d.s. 236969.439359: workqueue_queue_work: work struct=ffff880106c110e8 function=od_dbs_timer workqueue=ffff880101220540 req_cpu=0 cpu=0
          <idle>-0     [000] d.s. 236969.439360: workqueue_activate_work: work struct ffff880106c110e8
          <idle>-0     [000] dN.. 236969.439361: sched_wakeup: comm=kworker/0:1 pid=31 prio=120 success=1 target_cpu=000
          <idle>-0     [000] d... 236969.439370: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=kworker/0:1 next_pid=31 next_prio=120
     kworker/0:1-31    [000] .... 236969.439375: workqueue_execute_start: work struct ffff880106c110e8: function od_dbs_timer
     kworker/0:1-31    [000] d... 236969.439376: workqueue_queue_work: work struct=ffff880106c11200 function=vmstat_update workqueue=ffff880101220540 req_cpu=0 cpu=0
     kworker/0:1-31    [000] d... 236969.439376: workqueue_activate_work: work struct ffff880106c11200
     kworker/0:1-31    [000] .... 236969.439400: workqueue_execute_end: work struct ffff880106c110e8
     kworker/0:1-31    [000] .... 236969.439401: workqueue_execute_start: work struct ffff880106c11200: function vmstat_update
     kworker/0:1-31    [000] .... 236969.439420: workqueue_execute_end: work struct ffff880106c11200
     kworker/0:1-31    [000] d... 236969.439430: sched_switch: prev_comm=kworker/0:1 prev_pid=31 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
`
	p := wqtrace.NewParser(strings.NewReader(text))
	var evs []wqtrace.Event
	for ev := range p.All() {
		evs = append(evs, ev)
	}
	if err := p.Err(); err != nil || p.Stats().Other != 3 || len(evs) != 8 {
		t.Fatalf("parse: %v, stats %+v, %d events", err, p.Stats(), len(evs))
	}
	r := Analyze(evs)
	g := r.Workqueue("ffff880101220540")
	if g == nil || g.Count != 2 || r.Unmatched != (Unmatched{}) {
		t.Fatalf("pointer workqueue group %+v, unmatched %+v", g, r.Unmatched)
	}
	if g.QueueToStart.Min != 16 || g.QueueToStart.Max != 25 || g.Exec.Min != 19 || g.Exec.Max != 25 {
		t.Errorf("stats q2s %+v exec %+v", g.QueueToStart, g.Exec)
	}
	if f := r.Function("ffff880101220540", "vmstat_update"); f == nil || f.Count != 1 || f.ActivateToStart.Max != 25 || f.Exec.Max != 19 {
		t.Errorf("vmstat_update group %+v", f)
	}
}

// TestRecorderAndWriterAgree: events from gowq kept by a Recorder, and the
// same events through FtraceWriter and Parse, give the same report.
func TestRecorderAndWriterAgree(t *testing.T) {
	rec := wqtrace.NewRecorder(0)
	var buf bytes.Buffer
	fw := wqtrace.NewFtraceWriter(&buf)
	emit := func(ev wqtrace.Event) { rec.Trace(&ev); fw.Trace(&ev) }
	for i := range 200 {
		t0 := int64(1_000_000 + i*1000)
		work := uintptr(0xc000010000 + i%7*64)
		wq, fn := "gowq-hi", "main.handle"
		if i%3 == 0 {
			wq, fn = "gowq-unbound", "main.flush"
		}
		emit(wqtrace.Event{Kind: wqtrace.QueueWork, TimeNs: t0 * 1000, Work: work, Function: fn, Workqueue: wq, ReqCPU: wqtrace.WorkCPUUnbound, TargetCPU: -1, Comm: "main", TID: 10})
		emit(wqtrace.Event{Kind: wqtrace.ActivateWork, TimeNs: (t0 + 1) * 1000, Work: work, Function: fn, Comm: "main", TID: 10})
		emit(wqtrace.Event{Kind: wqtrace.ExecuteStart, TimeNs: (t0 + 2 + int64(i%50)) * 1000, Work: work, Function: fn, Comm: "wq/0:1F", TID: 20 + i%2})
		emit(wqtrace.Event{Kind: wqtrace.ExecuteEnd, TimeNs: (t0 + 60 + int64(i%50)) * 1000, Work: work, Function: fn, Comm: "wq/0:1F", TID: 20 + i%2})
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	parsed, err := wqtrace.Parse(&buf)
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := Analyze(rec.Events()), Analyze(parsed)
	var j1, j2 bytes.Buffer
	if err := r1.WriteJSON(&j1); err != nil {
		t.Fatal(err)
	}
	if err := r2.WriteJSON(&j2); err != nil {
		t.Fatal(err)
	}
	if j1.String() != j2.String() {
		t.Errorf("reports differ:\n%s\n%s", j1.String(), j2.String())
	}
	if g := r1.Workqueue("gowq-hi"); g == nil || g.Count != 133 || g.QueueToActivate.Max != 1 {
		t.Errorf("gowq-hi: %+v", g)
	}
}

func TestStatsOf(t *testing.T) {
	ns := []int64{10000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 1000}
	st := StatsOf(ns)
	want := Stats{Count: 10, Min: 1, P50: 5, P90: 9, P95: 10, P98: 10, P99: 10, P999: 10, Max: 10, Avg: 5.5}
	sd := st.Stdev
	st.Stdev = 0
	if st != want {
		t.Errorf("StatsOf = %+v, want %+v", st, want)
	}
	// Sample stdev of 1..10 is sqrt(82.5/9) = 3.02765.
	if math.Abs(sd-3.0276503540974917) > 1e-9 {
		t.Errorf("stdev %v", sd)
	}
	if ns[0] != 10000 {
		t.Error("StatsOf modified its input")
	}
	if (StatsOf(nil) != Stats{}) {
		t.Error("empty stats not zero")
	}
	one := StatsOf([]int64{-5})
	if one.Count != 1 || one.Min != 0 || one.Stdev != 0 {
		t.Errorf("single negative sample %+v", one)
	}
	var smp Samples
	for i := 1000; i >= 1; i-- {
		smp.Add(int64(i))
	}
	if smp.Percentile(99.9) != 999 || smp.Percentile(50) != 500 || smp.Percentile(0) != 1 || smp.Percentile(200) != 1000 || smp.Len() != 1000 {
		t.Errorf("percentiles of 1..1000: %d %d %d %d", smp.Percentile(99.9), smp.Percentile(50), smp.Percentile(0), smp.Percentile(200))
	}
	if v := smp.Values(); !slices.IsSorted(v) || len(v) != 1000 {
		t.Error("Values not sorted")
	}
}

func TestLog2Hist(t *testing.T) {
	for us, b := range map[uint64]int{0: 0, 1: 0, 2: 1, 3: 1, 4: 2, 7: 2, 8: 3, 15: 3, 16: 4, 1 << 40: 40} {
		if got := Bucket(us); got != b {
			t.Errorf("Bucket(%d) = %d, want %d", us, got, b)
		}
		lo, hi := BucketRange(b)
		if us < lo || us > hi {
			t.Errorf("BucketRange(%d) = %d..%d does not hold %d", b, lo, hi, us)
		}
	}
	var h Log2Hist
	var buf bytes.Buffer
	if err := h.WriteText(&buf, "usecs"); err != nil || buf.Len() != 0 {
		t.Errorf("empty histogram wrote %q", buf.String())
	}
	for range 3 {
		h.AddNs(1999) // 1 us
	}
	for range 10 {
		h.Add(5)
	}
	h.AddNs(20_000)
	h.AddNs(-1)
	if err := h.WriteText(&buf, "usecs"); err != nil {
		t.Fatal(err)
	}
	// What bcc's print_log2_hist prints for the same buckets.
	want := `     usecs               : count     distribution
         0 -> 1          : 4        |****************                        |
         2 -> 3          : 0        |                                        |
         4 -> 7          : 10       |****************************************|
         8 -> 15         : 0        |                                        |
        16 -> 31         : 1        |****                                    |
`
	if buf.String() != want {
		t.Errorf("histogram text:\n%s\nwant:\n%s", buf.String(), want)
	}
	if h.Total() != 15 {
		t.Errorf("total %d", h.Total())
	}
}

func TestWriteTextAndJSON(t *testing.T) {
	r := Analyze(load(t, "idle-plus-fsync.txt"))
	var buf bytes.Buffer
	if err := r.WriteText(&buf, TextOptions{Top: 2, Histograms: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"events: 2876 (queue 719, activate 719, start 719, end 719)",
		"unmatched: queue 0 (superseded 0), activate 0, start 0, end 0, no end 0",
		"kblockd                 398     398  queue->start          2.0       9.0      16.0      41.0      74.0      74.0      10.2",
		"         8 -> 15         : 206      |****************************************|",
		"ext4-rsv-conversion/ext4_end_io_rsv_work",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	// Top 2: (all) + kblockd + ext4 in the workqueue table, no "events" row.
	if strings.Contains(out, "\nevents ") || strings.Index(out, "kblockd ") > strings.Index(out, "ext4-rsv-conversion ") {
		t.Errorf("Top or order not applied:\n%s", out)
	}
	buf.Reset()
	if err := r.WriteText(&buf, TextOptions{HideFunctions: true}); err != nil || strings.Contains(buf.String(), "per function") {
		t.Errorf("HideFunctions: %v", err)
	}

	buf.Reset()
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Events     int
		Workqueues []struct {
			Workqueue    string
			Count        int
			QueueToStart map[string]float64 `json:"queue_to_start"`
			Hist         *Log2Hist          `json:"queue_to_start_hist"`
		}
		Unmatched Unmatched
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	k := back.Workqueues[0]
	if back.Events != 2876 || k.Workqueue != "kblockd" || k.Count != 398 || k.QueueToStart["max_us"] != 74 ||
		k.QueueToStart["p99_9_us"] != 74 || k.Hist == nil || k.Hist.Buckets[3] != 206 {
		t.Errorf("JSON round trip: %+v", back)
	}
}

func TestEmptyReport(t *testing.T) {
	r := Analyze(nil)
	var buf bytes.Buffer
	if err := r.WriteText(&buf, TextOptions{Histograms: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if r.Events != 0 || len(r.Workqueues) != 0 || r.Total.Count != 0 || r.Workqueue("x") != nil || r.Function("x", "y") != nil {
		t.Errorf("empty report %+v", r)
	}
}

func TestQueuedNeverStartedHasRow(t *testing.T) {
	r := Analyze([]wqtrace.Event{q(1, 1, "f", "idlewq"), q(2, 2, "g", "busy"), s(3, 2, "g", 5), e(4, 2, "g", 5)})
	g := r.Workqueue("idlewq")
	if g == nil || g.Count != 0 || g.Queued != 1 || r.Unmatched.Queue != 1 {
		t.Fatalf("idlewq %+v unmatched %+v", g, r.Unmatched)
	}
	if r.Workqueues[0].Workqueue != "busy" || r.Function("idlewq", "f") == nil {
		t.Errorf("order or function row wrong: %s", groupNames(r.Workqueues))
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Join(strings.Fields(line), " ") == "idlewq 0 1 queue->start -" {
			found = true
		}
	}
	if !found {
		t.Errorf("empty stats row not shown as '-':\n%s", buf.String())
	}
}
