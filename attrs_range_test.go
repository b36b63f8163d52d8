package wq_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
)

// hugeDelays are delays whose deadline, now plus the delay, does not fit
// in an int64 of nanoseconds.
var hugeDelays = []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 1<<63 - 1<<40}

// TestHugeDelayOnRTQueueDoesNotFire catches a delayed item armed on an RT
// timer thread with a delay near the int64 limit running at once, because
// now plus the delay wrapped into the past. Go-timer queues are checked
// too. RT variants skip where SCHED_FIFO is refused.
func TestHugeDelayOnRTQueueDoesNotFire(t *testing.T) {
	for _, c := range []struct {
		name  string
		flags wq.Flags
	}{{"percpu-rt", wq.PerCPU | wq.RT}, {"unbound-rt", wq.Unbound | wq.RT}, {"percpu", wq.PerCPU}, {"unbound", wq.Unbound}} {
		t.Run(c.name, func(t *testing.T) {
			q, err := wq.Alloc("huge-delay-"+c.name, c.flags, 1)
			if errors.Is(err, wq.ErrPermission) {
				t.Skipf("RT queues refused here: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer q.Destroy()
			for _, d := range hugeDelays {
				var runs atomic.Int32
				dw := wq.NewDelayedWork(func() { runs.Add(1) })
				if !q.QueueDelayed(dw, d) {
					t.Fatalf("QueueDelayed(%d) of an idle item = false", int64(d))
				}
				time.Sleep(20 * time.Millisecond)
				q.Flush()
				if n := runs.Load(); n != 0 {
					t.Errorf("delay %d: ran %d times at once", int64(d), n)
				}
				if !dw.Cancel() {
					t.Errorf("delay %d: Cancel = false: the item was no longer armed", int64(d))
				}
				// ModDelayed goes through the same arming.
				dw2 := wq.NewDelayedWork(func() { runs.Add(1) })
				q.ModDelayed(dw2, d)
				time.Sleep(5 * time.Millisecond)
				q.Flush()
				if n := runs.Load(); n != 0 {
					t.Errorf("ModDelayed %d: ran %d times at once", int64(d), n)
				}
				dw2.Cancel()
			}
		})
	}
}

// TestQueueAttrNumbersRangeChecked catches a per-queue attribute whose
// number overflows into another value (escape_after in us times 1000
// wrapped to 384 ns) instead of being refused: every out-of-range or
// malformed value returns ErrInvalidArgument and changes nothing.
func TestQueueAttrNumbersRangeChecked(t *testing.T) {
	pq := mustAlloc(t, "range-percpu", wq.PerCPU, 16)
	uq := mustAlloc(t, "range-unbound", wq.Unbound, 16)
	if err := pq.SetEscapeAfter(20 * time.Microsecond); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		q     *wq.Workqueue
		name  string
		value string
	}{
		{pq, "escape_after", "18446744073709552"},    // 2^64 ns in us: wrapped to 384 ns
		{pq, "escape_after", "9223372036854776"},     // one us past a time.Duration
		{pq, "escape_after", "99999999999999999999"}, // past int64
		{pq, "escape_after", "-1"},
		{pq, "escape_after", "300000000h"}, // a Go duration past int64
		{pq, "escape_after", "-5us"},
		{pq, "max_active", "4294967297"}, // 2^32+1: 1 in 32 bits
		{pq, "max_active", "99999999999999999999"},
		{pq, "max_active", "0"},
		{pq, "max_active", "2049"},
		{pq, "max_active", "-1"},
		{uq, "nice", "4294967296"}, // 2^32: 0 in 32 bits
		{uq, "nice", "-21"},
		{uq, "nice", "20"},
		{uq, "nice", "1e3"},
		{uq, "max_active", "18446744073709551617"},
		{uq, "cpumask", "1" + strings.Repeat("0", 20000)}, // CPU far past the limit
	}
	for _, c := range cases {
		before := c.q.Attrs()
		err := c.q.SetAttr(c.name, c.value)
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("%s SetAttr(%s, %.40q) = %v, want ErrInvalidArgument", c.q.Name(), c.name, c.value, err)
		}
		if after := c.q.Attrs(); !reflect.DeepEqual(before, after) {
			t.Errorf("%s SetAttr(%s, %.40q) changed %+v into %+v", c.q.Name(), c.name, c.value, before, after)
		}
	}
	// The largest values that fit are accepted and read back as written.
	if err := pq.SetAttr("escape_after", "9223372036854775"); err != nil {
		t.Errorf("escape_after at the limit: %v", err)
	} else if d := pq.EscapeAfter(); d != 9223372036854775*time.Microsecond {
		t.Errorf("escape_after at the limit read back as %v", d)
	}
}

// TestGlobalAttrNumbersRangeChecked catches a process-wide attribute
// whose number overflows into another value (watchdog_thresh in s times
// 1e9 in force as 290 ms, cpu_intensive_thresh_us likewise): every
// out-of-range value returns ErrInvalidArgument and changes nothing.
func TestGlobalAttrNumbersRangeChecked(t *testing.T) {
	cases := []struct{ name, value string }{
		{"watchdog_thresh", "18446744074"},          // 2^64 ns in s
		{"watchdog_thresh", "9223372037"},           // one s past a time.Duration
		{"watchdog_thresh", "99999999999999999999"}, // past int64
		{"watchdog_thresh", "-1"},
		{"watchdog_thresh", "30s"},
		{"cpu_intensive_thresh_us", "18446744073709552"},
		{"cpu_intensive_thresh_us", "9223372036854776"},
		{"cpu_intensive_thresh_us", "-10"},
		{"cpu_intensive_thresh_us", "99999999999999999999"},
		{"rt_priority", "4294967297"}, // 2^32+1: 1 in 32 bits
		{"rt_priority", "0"},
		{"rt_priority", "100"},
		{"default_affinity_scope", "default"},
		{"power_efficient", "maybe"},
	}
	for _, c := range cases {
		before, _ := wq.GlobalAttr(c.name)
		wdBefore, ciBefore := wq.WatchdogThresh(), wq.CPUIntensiveThresh()
		err := wq.SetGlobalAttr(c.name, c.value)
		if !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(%s, %q) = %v, want ErrInvalidArgument", c.name, c.value, err)
		}
		if after, _ := wq.GlobalAttr(c.name); after != before {
			t.Errorf("SetGlobalAttr(%s, %q) changed %q into %q", c.name, c.value, before, after)
		}
		if wq.WatchdogThresh() != wdBefore || wq.CPUIntensiveThresh() != ciBefore {
			t.Errorf("SetGlobalAttr(%s, %q) changed a threshold in force: %v/%v -> %v/%v",
				c.name, c.value, wdBefore, ciBefore, wq.WatchdogThresh(), wq.CPUIntensiveThresh())
			_ = wq.SetWatchdogThresh(wdBefore)
			_ = wq.SetCPUIntensiveThresh(ciBefore)
		}
	}
	// The largest values that fit are accepted and read back as written.
	wdBefore, ciBefore := wq.WatchdogThresh(), wq.CPUIntensiveThresh()
	defer func() {
		_ = wq.SetWatchdogThresh(wdBefore)
		_ = wq.SetCPUIntensiveThresh(ciBefore)
	}()
	for _, c := range []struct{ name, value string }{{"watchdog_thresh", "9223372036"}, {"cpu_intensive_thresh_us", "9223372036854775"}} {
		if err := wq.SetGlobalAttr(c.name, c.value); err != nil {
			t.Errorf("SetGlobalAttr(%s, %s) at the limit: %v", c.name, c.value, err)
		} else if got, _ := wq.GlobalAttr(c.name); got != c.value {
			t.Errorf("%s at the limit read back as %q", c.name, got)
		}
	}
}

// TestHugeEscapeAfterDoesNotEscapeAtOnce catches an escape deadline,
// activation time plus escape_after, that wraps for a long escape_after
// and makes every item overdue at once.
func TestHugeEscapeAfterDoesNotEscapeAtOnce(t *testing.T) {
	cpu := escapeCPU(t)
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 - 1, 9223372036854775 * time.Microsecond} {
		q := allocEscape(t, "esc-huge", wq.PerCPU, 0, d)
		release := holdPool(t, q, cpu)
		ran := make(chan int, 1)
		var w wq.Work
		w.Init(func() { ran <- wq.GetCPU() })
		q.QueueOn(cpu, &w)
		select {
		case c := <-ran:
			// The hold is not airtight on a loaded machine (another worker
			// of the pool may start it): running on its own CPU is fine,
			// running elsewhere is an escape.
			if c != cpu {
				t.Errorf("escape_after %d: item escaped at once to CPU %d", int64(d), c)
			}
			release()
		case <-time.After(50 * time.Millisecond):
			release()
			<-ran
		}
		if st := q.Stats(); st.ESC != 0 {
			t.Errorf("escape_after %d: ESC %d", int64(d), st.ESC)
		}
	}
}
