package wq

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gowq/wq/internal/topology"
)

// Runtime attributes: the equivalent of the kernel's
// /sys/devices/virtual/workqueue/<name>/ files and of the workqueue module
// parameters. Values are strings in the kernel's formats. Each attribute
// is one row of a table: the queues that have it, whether a write is
// refused on a queue (a read-only sysfs file), how it reads from Attrs,
// and how a written string parses into Attrs. A write parses into the
// queue's current Attrs and goes through the one apply path (applyAttrs),
// as the kernel's sysfs store functions call apply_workqueue_attrs.
// Invalid values return an error wrapping ErrInvalidArgument and change
// nothing; writes to attributes that the queue fixes return ErrReadOnly.

// queueAttr is one per-queue attribute.
type queueAttr struct {
	name string
	has  func(q *Workqueue) bool // which queues have the attribute
	ro   func(q *Workqueue) bool // writes refused with ErrReadOnly (nil: never)
	get  func(q *Workqueue, a Attrs) string
	set  func(q *Workqueue, a *Attrs, v string) error // parse v into a
}

func allQueues(*Workqueue) bool       { return true }
func unboundQueues(q *Workqueue) bool { return q.unbound }
func perCPUQueues(q *Workqueue) bool  { return !q.unbound }

// queueAttrTable lists the per-queue attributes, in sysfs order.
var queueAttrTable = []queueAttr{
	{name: "per_cpu", has: allQueues, ro: allQueues,
		get: func(q *Workqueue, _ Attrs) string { return b01(!q.unbound) }},
	{name: "max_active", has: allQueues,
		get: func(_ *Workqueue, a Attrs) string { return strconv.Itoa(a.MaxActive) },
		set: func(_ *Workqueue, a *Attrs, v string) (err error) {
			a.MaxActive, err = parseInt("max_active", v, 1, MaxActive)
			return err
		}},
	{name: "policy", has: allQueues, ro: (*Workqueue).rt,
		get: func(_ *Workqueue, a Attrs) string { return a.Policy.String() },
		set: func(_ *Workqueue, a *Attrs, v string) error {
			p, err := parsePolicy(v)
			if err != nil {
				return err
			}
			if p == PolicyNormal && a.Policy != PolicyNormal {
				a.Nice = 0 // leaving another class: the normal class's nice
			}
			a.Policy = p
			return nil
		}},
	{name: "nice", has: unboundQueues, ro: (*Workqueue).rt,
		get: func(_ *Workqueue, a Attrs) string { return strconv.Itoa(a.Nice) },
		set: func(_ *Workqueue, a *Attrs, v string) (err error) {
			a.Policy = PolicyNormal
			a.Nice, err = parseInt("nice", v, -20, 19)
			return err
		}},
	{name: "cpumask", has: unboundQueues,
		get: func(_ *Workqueue, a Attrs) string {
			if len(a.CPUs) == 0 {
				return currentTopology().Possible.Mask()
			}
			return topology.NewCPUSet(a.CPUs...).Mask()
		},
		set: func(_ *Workqueue, a *Attrs, v string) error {
			m, err := topology.ParseMask(v)
			if err != nil {
				return fmt.Errorf("%w: cpumask %q: %v", ErrInvalidArgument, v, err)
			}
			if m.IsEmpty() {
				return fmt.Errorf("%w: cpumask %q: empty", ErrInvalidArgument, v)
			}
			a.CPUs = m.List()
			return nil
		}},
	{name: "affinity_scope", has: unboundQueues, ro: func(q *Workqueue) bool { return q.rt() || q.ordered },
		get: func(_ *Workqueue, a Attrs) string { return a.Scope.String() },
		set: func(_ *Workqueue, a *Attrs, v string) error {
			s, err := topology.ParseScope(v) // "default" is ScopeDefault
			if err != nil {
				return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
			}
			a.Scope = s
			return nil
		}},
	{name: "affinity_strict", has: unboundQueues, ro: (*Workqueue).rt,
		get: func(_ *Workqueue, a Attrs) string { return b01(a.Strict) },
		set: func(_ *Workqueue, a *Attrs, v string) (err error) {
			a.Strict, err = parseBool01("affinity_strict", v)
			return err
		}},
	{name: "escape_after", has: perCPUQueues,
		get: func(_ *Workqueue, a Attrs) string {
			if a.EscapeAfter == 0 {
				return "0"
			}
			return strings.ReplaceAll(a.EscapeAfter.String(), "µ", "u")
		},
		set: func(_ *Workqueue, a *Attrs, v string) (err error) {
			a.EscapeAfter, err = parseEscapeAfter(v)
			return err
		}},
}

func lookupQueueAttr(q *Workqueue, name string) *queueAttr {
	for i := range queueAttrTable {
		if e := &queueAttrTable[i]; e.name == name && e.has(q) {
			return e
		}
	}
	return nil
}

// AttrNames returns the names of q's attributes: per_cpu, max_active and
// policy for every queue, then nice, cpumask, affinity_scope and
// affinity_strict for unbound queues, escape_after (a gowq extension) for
// per-CPU queues. Never blocks.
func (q *Workqueue) AttrNames() []string {
	var out []string
	for _, e := range queueAttrTable {
		if e.has(q) {
			out = append(out, e.name)
		}
	}
	return out
}

// Attr reads attribute name of q: per_cpu ("0"/"1"), max_active, policy
// ("normal", "highpri", "fifo"), and for unbound queues nice, cpumask (hex
// mask of the queue's own cpumask, as the kernel prints it; all possible
// CPUs when it has none), affinity_scope ("default" or a scope name) and
// affinity_strict ("0"/"1"), and for per-CPU queues escape_after (a Go
// duration such as "50us", "0" when off; a gowq extension, see
// SetEscapeAfter). Unknown names: ErrInvalidArgument. Never blocks beyond
// q's attribute lock; safe from any goroutine.
func (q *Workqueue) Attr(name string) (string, error) {
	if q == nil {
		return "", errNilQueue
	}
	e := lookupQueueAttr(q, name)
	if e == nil {
		return "", fmt.Errorf("%w: workqueue %s has no attribute %q", ErrInvalidArgument, q.name, name)
	}
	return e.get(q, q.Attrs()), nil
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// SetAttr writes attribute name of q (see Attr for names and formats): it
// parses value into q's current Attrs and applies them as ApplyAttrs does,
// so every error of ApplyAttrs can come back. per_cpu is read-only
// (ErrReadOnly), and so are, on RT queues, nice, affinity_scope,
// affinity_strict and policy (fixed at Alloc), and affinity_scope of an
// ordered queue; a write to a read-only attribute is refused whatever its
// value, as a write to a read-only sysfs file is. Numbers are decimal and
// range-checked (max_active 1..2048, nice -20..19); escape_after takes a
// Go duration ("50us", "1ms") or a number of microseconds ("50") that
// fits in a time.Duration. A value that does not parse or is out of range
// returns ErrInvalidArgument. Items already running finish on their old
// workers; new ones go to pools with the new attributes. Blocks for the
// probe threads when the pools change (see SetPolicy). Safe from any
// goroutine.
func (q *Workqueue) SetAttr(name, value string) error {
	if q == nil {
		return errNilQueue
	}
	e, err := q.writableAttr(name)
	if err != nil {
		return err
	}
	return q.applyAttrs(name, func(a *Attrs) error { return e.set(q, a, value) })
}

// writableAttr returns q's attribute name, or the error a write to it
// gets: ErrInvalidArgument when q has none, ErrReadOnly when q fixes it.
func (q *Workqueue) writableAttr(name string) (*queueAttr, error) {
	e := lookupQueueAttr(q, name)
	if e == nil {
		kind := "unbound"
		if !q.unbound {
			kind = "per-CPU"
		}
		return nil, fmt.Errorf("%w: workqueue %s (%s) has no attribute %q", ErrInvalidArgument, q.name, kind, name)
	}
	if e.ro != nil && e.ro(q) {
		return nil, fmt.Errorf("%w: %s of workqueue %s", ErrReadOnly, name, q.name)
	}
	return e, nil
}

// parseEscapeAfter reads an escape_after value: a Go duration ("50us",
// "1ms") or a plain number of microseconds ("50"), not negative and at
// most what a time.Duration holds.
func parseEscapeAfter(v string) (time.Duration, error) {
	return parseDuration("escape_after", v, time.Microsecond, true)
}

// Globals.

// globalAttr is one process-wide attribute.
type globalAttr struct {
	name string
	get  func() string
	set  func(v string) error // parses v and calls the typed setter
}

// globalAttrTable lists the process-wide attributes, in listing order.
var globalAttrTable = []globalAttr{
	{"default_affinity_scope",
		func() string { return defaultScope().String() },
		func(v string) error {
			s, err := topology.ParseScope(v)
			if err != nil || s == topology.ScopeDefault {
				return fmt.Errorf("%w: default_affinity_scope %q: want a scope name other than default", ErrInvalidArgument, v)
			}
			return SetDefaultAffinityScope(s)
		}},
	{"cache_shard_size", cacheShardAttr,
		func(v string) error {
			n, err := parseInt("cache_shard_size", v, 1, topology.MaxCacheShardSize)
			if err != nil {
				return err
			}
			return SetCacheShardSize(n)
		}},
	{"cpu_intensive_thresh_us",
		func() string { return strconv.FormatInt(cpuIntensiveThresh.Load()/int64(time.Microsecond), 10) },
		func(v string) error {
			d, err := parseDuration("cpu_intensive_thresh_us", v, time.Microsecond, false)
			if err != nil {
				return err
			}
			return SetCPUIntensiveThresh(d)
		}},
	{"watchdog_thresh",
		func() string { return strconv.FormatInt(wdog.thresh.Load()/int64(time.Second), 10) },
		func(v string) error {
			d, err := parseDuration("watchdog_thresh", v, time.Second, false)
			if err != nil {
				return err
			}
			return SetWatchdogThresh(d)
		}},
	{"cpumask",
		func() string {
			if m := unboundMask.Load(); m != nil {
				return m.Mask()
			}
			return currentTopology().Possible.Mask()
		},
		func(v string) error {
			m, err := topology.ParseMask(v)
			if err != nil {
				return fmt.Errorf("%w: cpumask %q: %v", ErrInvalidArgument, v, err)
			}
			if m.IsEmpty() {
				return fmt.Errorf("%w: cpumask %q: empty mask", ErrInvalidArgument, v)
			}
			return SetUnboundCPUMask(m.List())
		}},
	{"highpri_policy",
		func() string { return HighPriPolicy().String() },
		func(v string) error {
			p, err := parsePolicy(v)
			if err != nil {
				return err
			}
			return SetHighPriPolicy(p)
		}},
	{"rt_priority",
		func() string { return strconv.Itoa(RTPriority()) },
		func(v string) error {
			n, err := parseInt("rt_priority", v, 1, 99)
			if err != nil {
				return err
			}
			return SetRTPriority(n)
		}},
	{"power_efficient",
		func() string {
			if powerEfficient.Load() {
				return "Y"
			}
			return "N"
		},
		func(v string) error {
			switch strings.ToUpper(strings.TrimSpace(v)) {
			case "Y", "1":
				SetPowerEfficient(true)
			case "N", "0":
				SetPowerEfficient(false)
			default:
				return fmt.Errorf("%w: power_efficient %q: want Y or N", ErrInvalidArgument, v)
			}
			return nil
		}},
}

func lookupGlobalAttr(name string) *globalAttr {
	for i := range globalAttrTable {
		if globalAttrTable[i].name == name {
			return &globalAttrTable[i]
		}
	}
	return nil
}
