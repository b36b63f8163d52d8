package scenario

import "slices"

// SeedsExplained says, in one sentence, what a "seed" is; the CLI, the
// tables and the report use the word.
const SeedsExplained = `A "seed" is one of the five public Linux kernel mailing-list threads and commits (numbered 000-004) ` +
	`whose experiments the lab reproduces; each scenario names the seeds it reproduces.`

// SeedInfo describes one seed: the source thread and what it measured.
type SeedInfo struct {
	ID        string   // "000".."004"
	Source    string   // the thread or commit
	Adds      string   // what it adds to the kernel's workqueues
	Scenarios []string // the scenarios that reproduce its measurement
}

// Seeds returns the five seeds with the scenarios that reproduce each,
// in seed order.
func Seeds() []SeedInfo {
	out := []SeedInfo{
		{ID: "000", Source: "a reply to the WQ_SCHED_FIFO patch (Nathan Huckleberry, January 2023) with dm-verity fio figures",
			Adds: "a SCHED_FIFO per-CPU pool for latency-critical work (dm-verity): avg clat 29.56 -> 19.96 us under fio cpuio load"},
		{ID: "001", Source: "another reply in the review of that patch",
			Adds: "HIGHPRI vs SCHED_FIFO vs UNBOUND for EROFS and verity: erofs wait UNBOUND 357805 us, HIGHPRI -51%, SCHED_FIFO -63%"},
		{ID: "002", Source: "[PATCH v8 5/6] workqueue: Imply strict CPU affinity for WQ_RT (Tvrtko Ursulin)",
			Adds: "WQ_RT with strict affinity: GPU submit latency p98 2922 / 63 / 51 us (default / WQ_RT / +strict)"},
		{ID: "003", Source: "EROFS per-CPU kthread_worker pool (Sandeep Dhavale)",
			Adds: "high-priority per-CPU kthread workers for decompression: scheduling latency avg 15253 -> 2914 us"},
		{ID: "004", Source: "Linux commit: delayed work on an unbound workqueue may run on any CPU of the node",
			Adds: "a delayed item queued from a hogged CPU escapes it: queue->start up to 30 ms before, at most 6 us after"},
	}
	for i := range out {
		for _, d := range scenarioDefs {
			if slices.Contains(d.seeds, out[i].ID) {
				out[i].Scenarios = append(out[i].Scenarios, d.name)
			}
		}
	}
	return out
}
