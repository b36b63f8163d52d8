package wq

import "github.com/gowq/wq/internal/topology"

// The effective cpumask of an unbound queue.
//
// An unbound queue's workers may use the CPUs of its own cpumask (the
// "cpumask" attribute, empty for all) that are also in the global unbound
// cpumask (SetUnboundCPUMask, the kernel's wq_unbound_cpumask) and online.
// When that intersection is empty, the global mask alone applies: the
// kernel's apply_wqattrs_prepare ands attrs->cpumask with
// wq_unbound_cpumask and falls back to wq_unbound_cpumask when the result
// is empty, and wq_calc_pod_cpumask then works within it. A queue's own
// cpumask thus narrows the global one, never widens it, and a global
// mask that excludes all of a queue's CPUs moves the queue rather than
// stranding its items. When the global mask has no online CPU (after a
// hotplug), every online CPU is used, so that items always have a CPU.
//
// effectiveCPUs is the one place that computes it: installTable (Alloc,
// attribute writes, hotplug, SetUnboundCPUMask re-applying to the live
// queues) and the validation probe (workerCPUs) both call it.

// effectiveCPUs returns the CPUs an unbound queue with own cpumask own
// uses, with online CPUs online and global unbound cpumask g (nil: all).
func effectiveCPUs(own, online topology.CPUSet, g *topology.CPUSet) topology.CPUSet {
	global := online
	if g != nil {
		if m := g.And(online); !m.IsEmpty() {
			global = m
		}
	}
	if m := own.And(global); !m.IsEmpty() {
		return m
	}
	return global
}
