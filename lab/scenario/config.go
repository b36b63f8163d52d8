package scenario

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gowq/wq"
)

// Kind says what runs a configuration's work items.
type Kind string

// Kinds of configurations.
const (
	KindGowq     Kind = "gowq"     // a gowq workqueue (wq.Alloc)
	KindKthread  Kind = "kthread"  // gowq's per-CPU kthread_worker pool
	KindBaseline Kind = "baseline" // a Go executor from lab/baseline
	// KindKernel rows are the kernel's own kworkers, recorded through
	// tracefs during the same run (Options.Kernel); they are not a
	// configuration and never take part in the verdict.
	KindKernel Kind = "kernel"
)

// Class is the worker class of a configuration.
type Class string

// Worker classes. Baselines have ClassGo.
const (
	ClassNormal  Class = "normal"  // SCHED_OTHER, nice 0
	ClassHighPri Class = "highpri" // SCHED_OTHER, nice -20
	ClassRT      Class = "rt"      // SCHED_FIFO at the lowest RT priority
	ClassGo      Class = "go"      // ordinary goroutines
	ClassKernel  Class = "kernel"  // the kernel's kworkers (KindKernel rows)
)

// ConfigInfo describes one configuration (one row of a table).
type ConfigInfo struct {
	ID    string   // short name accepted by Options.Configs, e.g. "rt-percpu"
	Label string   // row label, e.g. "RT per-CPU"
	Kind  Kind     // what runs the items
	Class Class    // worker class
	Flags wq.Flags // workqueue flags (KindGowq only)
	// Batch > 0: the throughput scenario queues its back-to-back items
	// with wq.Workqueue.QueueBatch, Batch at a time (KindGowq only; the
	// other scenarios do not list such rows).
	Batch int
}

// The configurations. Their IDs are what --configs accepts.
var allConfigs = []ConfigInfo{
	{ID: "normal-percpu", Label: "normal per-CPU", Kind: KindGowq, Class: ClassNormal, Flags: wq.PerCPU},
	{ID: "normal-unbound", Label: "normal unbound", Kind: KindGowq, Class: ClassNormal, Flags: wq.Unbound},
	{ID: "highpri-percpu", Label: "highpri per-CPU", Kind: KindGowq, Class: ClassHighPri, Flags: wq.PerCPU | wq.HighPri},
	{ID: "highpri-unbound", Label: "highpri unbound", Kind: KindGowq, Class: ClassHighPri, Flags: wq.Unbound | wq.HighPri},
	{ID: "rt-percpu", Label: "RT per-CPU", Kind: KindGowq, Class: ClassRT, Flags: wq.PerCPU | wq.RT},
	{ID: "rt-unbound", Label: "RT unbound strict", Kind: KindGowq, Class: ClassRT, Flags: wq.Unbound | wq.RT},
	{ID: "rt-percpu-batch", Label: "RT per-CPU, batches of 64", Kind: KindGowq, Class: ClassRT, Flags: wq.PerCPU | wq.RT, Batch: throughputRing},
	{ID: "rt-unbound-batch", Label: "RT unbound strict, batches of 64", Kind: KindGowq, Class: ClassRT, Flags: wq.Unbound | wq.RT, Batch: throughputRing},
	{ID: "kthread", Label: "kthread per-CPU", Kind: KindKthread, Class: ClassNormal},
	{ID: "kthread-fifo", Label: "kthread per-CPU FIFO-low", Kind: KindKthread, Class: ClassRT},
	{ID: "go", Label: "go statement", Kind: KindBaseline, Class: ClassGo},
	{ID: "chan", Label: "chan pool", Kind: KindBaseline, Class: ClassGo},
	{ID: "ants", Label: "ants/v2", Kind: KindBaseline, Class: ClassGo},
	{ID: "pond", Label: "pond/v2", Kind: KindBaseline, Class: ClassGo},
}

// Configs returns every configuration, in table order.
func Configs() []ConfigInfo { return slices.Clone(allConfigs) }

func configByID(id string) (ConfigInfo, bool) {
	for _, c := range allConfigs {
		if c.ID == id {
			return c, true
		}
	}
	return ConfigInfo{}, false
}

// configGroups are the group names Options.Configs accepts besides IDs.
var configGroups = map[string]func(ConfigInfo) bool{
	"all":       func(ConfigInfo) bool { return true },
	"gowq":      func(c ConfigInfo) bool { return c.Kind != KindBaseline },
	"baselines": func(c ConfigInfo) bool { return c.Kind == KindBaseline },
	"normal":    func(c ConfigInfo) bool { return c.Class == ClassNormal },
	"highpri":   func(c ConfigInfo) bool { return c.Class == ClassHighPri },
	"rt":        func(c ConfigInfo) bool { return c.Class == ClassRT },
	"kthreads":  func(c ConfigInfo) bool { return c.Kind == KindKthread },
}

// ConfigGroups returns the group names Options.Configs accepts besides
// configuration IDs, sorted.
func ConfigGroups() []string {
	var g []string
	for k := range configGroups {
		g = append(g, k)
	}
	slices.Sort(g)
	return g
}

// configFilter is the parsed form of Options.Configs: nil accepts all.
type configFilter map[string]bool

func parseConfigs(list []string) (configFilter, error) {
	var f configFilter
	for _, item := range list {
		for _, id := range strings.Split(item, ",") {
			id = strings.ToLower(strings.TrimSpace(id))
			if id == "" {
				continue
			}
			if f == nil {
				f = configFilter{}
			}
			if g, ok := configGroups[id]; ok {
				for _, c := range allConfigs {
					if g(c) {
						f[c.ID] = true
					}
				}
				continue
			}
			if _, ok := configByID(id); !ok {
				return nil, fmt.Errorf("%w: unknown config %q (want one of %s, or a group: %s)",
					ErrInvalidOption, id, strings.Join(configIDs(), ", "), strings.Join(ConfigGroups(), ", "))
			}
			f[id] = true
		}
	}
	return f, nil
}

func (f configFilter) has(id string) bool { return f == nil || f[id] }

func configIDs() []string {
	ids := make([]string, len(allConfigs))
	for i, c := range allConfigs {
		ids[i] = c.ID
	}
	return ids
}

// rowDef is a configuration as one scenario uses it.
type rowDef struct {
	ConfigInfo
	Note string // scenario-specific remark shown after the label, e.g. "(default erofs)"
}

func row(id, note string) rowDef {
	c, ok := configByID(id)
	if !ok {
		panic("scenario: unknown config " + id) // programming error in the tables below
	}
	return rowDef{ConfigInfo: c, Note: note}
}

func baselineRows() []rowDef {
	return []rowDef{row("go", ""), row("chan", ""), row("ants", ""), row("pond", "")}
}
