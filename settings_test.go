package wq_test

import (
	"errors"
	"testing"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/topology"
)

// TestSetGlobalAttrRefusesBadValues: malformed or out-of-range process-wide
// values return ErrInvalidArgument and change nothing.
func TestSetGlobalAttrRefusesBadValues(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"cpumask", ""}, {"cpumask", "zz"}, {"cpumask", "0"}, {"cpumask", "100000000"}, {"cpumask", "-1"},
		{"highpri_policy", "normal"}, {"highpri_policy", "bogus"}, {"highpri_policy", ""},
		{"rt_priority", "0"}, {"rt_priority", "100"}, {"rt_priority", "-1"}, {"rt_priority", "x"}, {"rt_priority", "1.5"},
		{"default_affinity_scope", "bogus"}, {"default_affinity_scope", "default"}, {"default_affinity_scope", ""},
		{"power_efficient", "maybe"},
	} {
		old, _ := wq.GlobalAttr(c.name)
		if err := wq.SetGlobalAttr(c.name, c.value); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(%s, %q) = %v, want ErrInvalidArgument", c.name, c.value, err)
		}
		if now, _ := wq.GlobalAttr(c.name); now != old {
			t.Errorf("refused SetGlobalAttr(%s, %q) changed %q -> %q", c.name, c.value, old, now)
		}
	}
	if err := wq.SetDefaultAffinityScope(topology.ScopeDefault); !errors.Is(err, wq.ErrInvalidArgument) {
		t.Errorf("SetDefaultAffinityScope(default) = %v, want ErrInvalidArgument", err)
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

// TestCacheShardSizeRefused: a size outside 1..4096, or not a number, is
// refused with ErrInvalidArgument and changes nothing. Fault caught: a
// zero size (division by zero) or a silently clamped value.
func TestCacheShardSizeRefused(t *testing.T) {
	for _, n := range []int{0, -3, 4097} {
		if err := wq.SetCacheShardSize(n); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetCacheShardSize(%d) = %v, want ErrInvalidArgument", n, err)
		}
	}
	for _, v := range []string{"0", "x", "", "9999"} {
		if err := wq.SetGlobalAttr("cache_shard_size", v); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetGlobalAttr(cache_shard_size, %q) = %v, want ErrInvalidArgument", v, err)
		}
	}
	if got := wq.CacheShardSize(); got != wq.DefaultCacheShardSize {
		t.Errorf("CacheShardSize() = %d after refused writes, want %d", got, wq.DefaultCacheShardSize)
	}
}

// TestSetUnboundCPUMaskRefusesOutOfRangeCPUs catches SetUnboundCPUMask
// accepting CPU ids that cannot name a CPU (negative, or at or above
// topology.MaxCPUs) by dropping them silently, where SetCPUMask and
// ApplyAttrs refuse them: bad input must be refused with
// ErrInvalidArgument and change nothing, as the kernel's cpumask_parse
// refuses bits beyond nr_cpumask_bits.
func TestSetUnboundCPUMaskRefusesOutOfRangeCPUs(t *testing.T) {
	online := wq.OnlineCPUs()
	defer wq.SetUnboundCPUMask(nil)
	before, err := wq.GlobalAttr("cpumask")
	if err != nil {
		t.Fatal(err)
	}
	for _, cpus := range [][]int{
		{online[0], -1},
		{online[0], topology.MaxCPUs},
		{online[0], 1 << 40},
	} {
		if err := wq.SetUnboundCPUMask(cpus); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("SetUnboundCPUMask(%v) = %v, want ErrInvalidArgument", cpus, err)
		}
		if got, _ := wq.GlobalAttr("cpumask"); got != before {
			t.Errorf("refused SetUnboundCPUMask(%v) changed the global cpumask from %s to %s", cpus, before, got)
		}
	}
}
