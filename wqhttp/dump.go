package wqhttp

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gowq/wq"
)

// DumpReport is the body of /dump?format=json: what the kernel's
// tools/workqueue/wq_dump.py prints.
type DumpReport struct {
	// UnboundCPUMask is the process-wide unbound cpumask, hex, as the
	// global attribute "cpumask" prints it.
	UnboundCPUMask string `json:"unbound_cpumask"`
	// AffinityPods maps each affinity scope (cpu, smt, cache_shard, cache, numa,
	// system) to its pods over the online CPUs, each a CPU list ("0-3").
	AffinityPods map[string][]string `json:"affinity_pods"`
	// CacheShardSize is the cache_shard_size global (cores per
	// cache_shard pod, about), as wq.CacheShardSize returns it.
	CacheShardSize int         `json:"cache_shard_size"`
	Pools          []DumpPool  `json:"pools"`
	Workqueues     []DumpQueue `json:"workqueues"`
}

// DumpPool is one worker pool in a DumpReport.
type DumpPool struct {
	ID     int    `json:"id"`
	CPU    int    `json:"cpu"`           // CPU of a per-CPU pool, -1 for unbound pools
	CPUs   string `json:"cpus"`          // CPUs its workers may run on, list format
	Pod    string `json:"pod,omitempty"` // unbound pools: the pod, list format
	Strict bool   `json:"strict"`
	// Class is the worker class: "normal", "highpri" (SCHED_OTHER at a
	// negative nice, worker names ending in "H") or "fifo" (SCHED_FIFO,
	// names ending in "F").
	Class         string       `json:"class"`
	Policy        string       `json:"policy"`     // SCHED_OTHER or SCHED_FIFO
	Prio          int          `json:"prio"`       // RT priority, 0 for SCHED_OTHER
	Nice          int          `json:"nice"`       // the nice its workers run at (wq.PoolInfo.Nice)
	AskedNice     int          `json:"asked_nice"` // the nice of its class; differs from Nice when the process could not lower its inherited nice
	Idle          int          `json:"idle"`
	NrWorkers     int          `json:"nr_workers"`
	Pending       int          `json:"pending"`   // items on its worklist
	NrQueues      int          `json:"nr_queues"` // live workqueues it serves on some CPU
	Disassociated bool         `json:"disassociated"`
	Goroutines    bool         `json:"goroutines"` // workers are goroutines (tid 0), not threads
	Workers       []DumpWorker `json:"workers"`
}

// DumpWorker is one worker thread in a DumpPool.
type DumpWorker struct {
	Name      string `json:"name"` // e.g. "kworker/0:1H"
	TID       int    `json:"tid"`  // 0 for a goroutine worker
	CPU       int    `json:"cpu"`  // CPU it last ran on, -1 unknown
	Idle      bool   `json:"idle"`
	Func      string `json:"func,omitempty"` // current work function
	RunningNs int64  `json:"running_ns"`     // how long the current item has run, ns
}

// DumpQueue is one workqueue's CPU -> pool mapping in a DumpReport.
type DumpQueue struct {
	Name      string `json:"name"`
	Type      string `json:"type"`   // percpu, unbound or ordered
	Strict    bool   `json:"strict"` // unbound: affinity_strict
	Flags     string `json:"flags"`
	Policy    string `json:"policy"`
	MaxActive int    `json:"max_active"`
	// PoolIDs[cpu] is the id of the pool that serves items queued on cpu.
	PoolIDs []int `json:"pool_ids"`
}

var scopeOrder = []string{"cpu", "smt", "cache_shard", "cache", "numa", "system"}

// Dump returns the current pools, pods and workqueue-to-pool mapping of
// every live workqueue (wq.Queues(false)). It reads each worker's last CPU
// from /proc and never blocks on work items.
func Dump() DumpReport {
	mask, _ := wq.GlobalAttr("cpumask")
	d := DumpReport{UnboundCPUMask: mask, AffinityPods: wq.AffinityPods(), CacheShardSize: wq.CacheShardSize(), Pools: []DumpPool{}, Workqueues: []DumpQueue{}}
	nq := map[int]int{}
	for _, q := range wq.Queues(false) {
		pol, _ := q.Attr("policy")
		dq := DumpQueue{Name: q.Name(), Type: queueType(q), Flags: q.Flags().String(), Policy: pol,
			MaxActive: q.MaxActive(), PoolIDs: q.PoolIDs()}
		if dq.Type != "percpu" {
			s, _ := q.Attr("affinity_strict")
			dq.Strict = s == "1"
		}
		seen := map[int]bool{}
		for _, id := range dq.PoolIDs {
			if !seen[id] {
				seen[id] = true
				nq[id]++
			}
		}
		d.Workqueues = append(d.Workqueues, dq)
	}
	for _, p := range wq.Pools() {
		dp := DumpPool{ID: p.ID, CPU: p.CPU, CPUs: p.CPUs, Pod: p.Pod, Strict: p.Strict, Class: poolClass(p),
			Policy: p.Policy, Prio: p.Prio, Nice: p.Nice, AskedNice: p.AskedNice, Idle: p.Idle, NrWorkers: len(p.Workers), Pending: p.Pending,
			NrQueues: nq[p.ID], Disassociated: p.Disassociated, Goroutines: p.Goroutines, Workers: []DumpWorker{}}
		for _, w := range p.Workers {
			dp.Workers = append(dp.Workers, DumpWorker{Name: w.Name, TID: w.TID, CPU: w.CPU, Idle: w.Idle, Func: w.Func, RunningNs: w.Running.Nanoseconds()})
		}
		d.Pools = append(d.Pools, dp)
	}
	return d
}

// poolClass names the class from the policy and the class's nice, not the
// nice the workers kept: a niced process's normal pools stay normal.
func poolClass(p wq.PoolInfo) string {
	switch {
	case p.Policy == "SCHED_FIFO":
		return "fifo"
	case p.AskedNice < 0:
		return "highpri"
	}
	return "normal"
}

func (h *handler) dump(w http.ResponseWriter, r *http.Request) {
	if !checkFormat(w, r) {
		return
	}
	d := Dump()
	if wantJSON(r) {
		writeJSON(w, d)
		return
	}
	textHeader(w)
	_, _ = w.Write([]byte(d.text()))
}

// text renders d like wq_dump.py, with the workers of each pool under it.
func (d DumpReport) text() string {
	var b strings.Builder
	b.WriteString("Affinity Scopes\n===============\n")
	fmt.Fprintf(&b, "wq_unbound_cpumask=%s\n", d.UnboundCPUMask)
	fmt.Fprintf(&b, "wq_cache_shard_size=%d\n", d.CacheShardSize)
	for _, s := range scopeOrder {
		pods, ok := d.AffinityPods[s]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n  nr_pods  %d\n  pod_cpus", strings.ToUpper(s), len(pods))
		cpuPod := map[int]int{}
		for i, p := range pods {
			fmt.Fprintf(&b, " [%d]=%s", i, p)
			for _, c := range parseCPUList(p) {
				cpuPod[c] = i
			}
		}
		b.WriteString("\n  cpu_pod ")
		cpus := make([]int, 0, len(cpuPod))
		for c := range cpuPod {
			cpus = append(cpus, c)
		}
		slices.Sort(cpus)
		for _, c := range cpus {
			fmt.Fprintf(&b, " [%d]=%d", c, cpuPod[c])
		}
		b.WriteByte('\n')
	}

	b.WriteString("\nWorker Pools\n============\n")
	idw := 2
	for _, p := range d.Pools {
		idw = max(idw, len(strconv.Itoa(p.ID)))
	}
	for _, p := range d.Pools {
		pol := p.Policy
		if p.Policy == "SCHED_FIFO" {
			pol += "/" + strconv.Itoa(p.Prio)
		}
		nice := fmt.Sprintf("%3d", p.Nice)
		if p.AskedNice != p.Nice {
			// The workers kept the process's inherited nice.
			nice += fmt.Sprintf(" (asked %d)", p.AskedNice)
		}
		fmt.Fprintf(&b, "pool[%0*d] %-7s nice=%s %-13s idle/workers=%3d/%3d pending=%3d queues=%3d", idw, p.ID, p.Class, nice, pol, p.Idle, p.NrWorkers, p.Pending, p.NrQueues)
		if p.CPU >= 0 {
			fmt.Fprintf(&b, " cpu=%3d", p.CPU)
			if p.Disassociated {
				b.WriteString(" disassociated")
			}
		} else {
			fmt.Fprintf(&b, " cpus=%s pod_cpus=%s", p.CPUs, p.Pod)
			if p.Strict {
				b.WriteString(" strict")
			}
		}
		b.WriteByte('\n')
		for _, w := range p.Workers {
			if w.TID == 0 {
				// A goroutine worker (wq.PoolInfo.Goroutines): no thread.
				fmt.Fprintf(&b, "    %-16s tid=%-7s cpu=%-3d ", w.Name, "goroutine", w.CPU)
			} else {
				fmt.Fprintf(&b, "    %-16s tid=%-7d cpu=%-3d ", w.Name, w.TID, w.CPU)
			}
			if w.Idle || w.Func == "" {
				b.WriteString("idle\n")
				continue
			}
			fmt.Fprintf(&b, "%s running for %s\n", w.Func, strings.ReplaceAll(time.Duration(w.RunningNs).Round(time.Microsecond).String(), "µs", "us"))
		}
	}

	b.WriteString("\nWorkqueue CPU -> pool\n=====================\n")
	ncpu, idWidth := 0, 1
	for _, q := range d.Workqueues {
		ncpu = max(ncpu, len(q.PoolIDs))
		for _, id := range q.PoolIDs {
			idWidth = max(idWidth, len(strconv.Itoa(id)))
		}
	}
	idWidth = max(idWidth, len(strconv.Itoa(ncpu-1)))
	b.WriteString(`[    workqueue     \     type   CPU`)
	for c := range ncpu {
		fmt.Fprintf(&b, " %*d", idWidth, c)
	}
	b.WriteString("]\n")
	for _, q := range d.Workqueues {
		typ := q.Type
		if q.Type == "unbound" && q.Strict {
			typ += ",S"
		}
		fmt.Fprintf(&b, "%-24s %-10s", lastRunes(q.Name, 24), typ)
		for _, id := range q.PoolIDs {
			fmt.Fprintf(&b, " %*d", idWidth, id)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// parseCPUList parses a CPU list such as "0-3,8,10-11"; malformed parts
// are skipped (the lists come from wq, not from the user).
func parseCPUList(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				continue
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out
}
