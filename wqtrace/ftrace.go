package wqtrace

import (
	"bufio"
	"errors"
	"io"
	"strconv"
	"sync"
)

// DefaultFlags is the latency-format column FtraceWriter writes for an event
// whose Flags is empty: gowq knows nothing of IRQ or preemption state, so
// every position is '.' (irqs on, no resched, task context, preempt depth 0,
// migration enabled), as the kernel prints for workqueue_execute_* lines.
const DefaultFlags = "....."

// ptrDigits is the width of the kernel's %p: 16 hex digits on 64-bit.
const ptrDigits = strconv.IntSize / 4

// ErrClosed is returned by FtraceWriter methods after Close.
var ErrClosed = errors.New("wqtrace: writer closed")

// AppendFtrace appends ev as one line of the kernel's ftrace text format
// (the /sys/kernel/tracing/trace layout with the latency-format column),
// ending in '\n', and returns the extended buffer. It does not allocate when
// dst has room. An event with an invalid Kind appends nothing.
//
// The layout is the kernel's trace_print_context "%16s-%-7d [%03d] %s %5lu.%06lu: "
// followed by the tracepoint's name and its TP_printk text:
//
//	workqueue_queue_work: work struct=%p function=%ps workqueue=%s req_cpu=%d cpu=%d
//	workqueue_activate_work: work struct %p function=%ps   (the kernel ends it with a space)
//	workqueue_execute_start: work struct %p: function %ps
//	workqueue_execute_end: work struct %p: function %ps
//
// Work is written as 16 zero-padded hex digits like %p (the kernel hashes
// pointers unless booted with no_hash_pointers; gowq writes the real
// address); newlines in Comm, Function and Workqueue become '?'; TimeNs is truncated
// to microseconds, and a negative TimeNs is written as 0. Flags is written
// when it is non-empty and holds no space, else DefaultFlags.
func AppendFtrace(dst []byte, ev *Event) []byte {
	if ev == nil || !ev.Kind.Valid() {
		return dst
	}
	// "%16s-"
	for i := len(ev.Comm); i < 16; i++ {
		dst = append(dst, ' ')
	}
	dst = appendText(dst, ev.Comm)
	dst = append(dst, '-')
	// "%-7d "
	n := len(dst)
	dst = strconv.AppendInt(dst, int64(ev.TID), 10)
	for i := len(dst) - n; i < 7; i++ {
		dst = append(dst, ' ')
	}
	// " [%03d] "
	dst = append(dst, ' ', '[')
	dst = appendPadInt(dst, int64(ev.CPU), 3, '0')
	dst = append(dst, ']', ' ')
	if f := ev.Flags; f != "" && !hasSpace(f) {
		dst = append(dst, f...)
	} else {
		dst = append(dst, DefaultFlags...)
	}
	// " %5lu.%06lu: "
	t := ev.TimeNs
	if t < 0 {
		t = 0
	}
	dst = append(dst, ' ')
	dst = appendPadInt(dst, t/1e9, 5, ' ')
	dst = append(dst, '.')
	dst = appendPadInt(dst, t%1e9/1e3, 6, '0')
	dst = append(dst, ':', ' ')
	dst = append(dst, ev.Kind.String()...)
	dst = append(dst, ':', ' ')
	switch ev.Kind {
	case QueueWork:
		dst = append(dst, "work struct="...)
		dst = appendPtr(dst, ev.Work)
		dst = append(dst, " function="...)
		dst = appendText(dst, ev.Function)
		dst = append(dst, " workqueue="...)
		dst = appendText(dst, ev.Workqueue)
		dst = append(dst, " req_cpu="...)
		dst = strconv.AppendInt(dst, int64(ev.ReqCPU), 10)
		dst = append(dst, " cpu="...)
		dst = strconv.AppendInt(dst, int64(ev.TargetCPU), 10)
	case ActivateWork:
		dst = append(dst, "work struct "...)
		dst = appendPtr(dst, ev.Work)
		dst = append(dst, " function="...)
		dst = appendText(dst, ev.Function)
		dst = append(dst, ' ')
	case ExecuteStart, ExecuteEnd:
		dst = append(dst, "work struct "...)
		dst = appendPtr(dst, ev.Work)
		dst = append(dst, ": function "...)
		dst = appendText(dst, ev.Function)
	}
	return append(dst, '\n')
}

// appendText appends s with '\n' and '\r' replaced by '?', so that one
// event is always one line.
func appendText(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' || c == '\r' {
			c = '?'
		}
		dst = append(dst, c)
	}
	return dst
}

func hasSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' || s[i] == '\t' || s[i] == '\n' {
			return true
		}
	}
	return false
}

// appendPadInt appends v like printf("%0*d") (pad '0') or "%*d" (pad ' ').
func appendPadInt(dst []byte, v int64, width int, pad byte) []byte {
	var tmp [24]byte
	b := strconv.AppendInt(tmp[:0], v, 10)
	neg := len(b) > 0 && b[0] == '-'
	if neg && pad == '0' {
		dst = append(dst, '-')
		b = b[1:]
		width--
	}
	for i := len(b); i < width; i++ {
		dst = append(dst, pad)
	}
	return append(dst, b...)
}

func appendPtr(dst []byte, p uintptr) []byte {
	const hex = "0123456789abcdef"
	for shift := (ptrDigits - 1) * 4; shift >= 0; shift -= 4 {
		dst = append(dst, hex[(p>>uint(shift))&0xf])
	}
	return dst
}

// Header describes the comment block the kernel prints at the top of
// /sys/kernel/tracing/trace.
type Header struct {
	Entries uint64 // events in the buffer ("entries-in-buffer")
	Written uint64 // events ever written ("entries-written")
	CPUs    int    // number of CPUs ("#P:")
}

// AppendHeader appends the kernel's "# tracer: nop" comment block with the
// latency-format legend, exactly as the nop tracer prints it, and returns the
// extended buffer.
func AppendHeader(dst []byte, h Header) []byte {
	dst = append(dst, "# tracer: nop\n#\n# entries-in-buffer/entries-written: "...)
	dst = strconv.AppendUint(dst, h.Entries, 10)
	dst = append(dst, '/')
	dst = strconv.AppendUint(dst, h.Written, 10)
	dst = append(dst, "   #P:"...)
	dst = strconv.AppendInt(dst, int64(h.CPUs), 10)
	dst = append(dst, '\n')
	return append(dst, headerLegend...)
}

const headerLegend = `#
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
`

// FtraceWriter is a Tracer that writes one line per event in the kernel's
// ftrace text format (see AppendFtrace), so that the output of gowq can be
// read by the same tools as /sys/kernel/tracing/trace, including Parse and
// package analyze.
//
// It is safe for concurrent use: lines are formatted and buffered under a
// mutex, so lines from different goroutines never interleave. Trace does not
// block on anything but that mutex, except when the 64 KiB buffer is full: then
// the calling goroutine writes it to the underlying io.Writer. Put a Recorder
// on latency-critical paths and write its events later when that matters.
type FtraceWriter struct {
	mu     sync.Mutex
	bw     *bufio.Writer // guarded by mu
	line   []byte        // guarded by mu; scratch for one line
	err    error         // guarded by mu; first write error, sticky
	closed bool          // guarded by mu
}

// NewFtraceWriter returns an FtraceWriter that writes to w through a 64 KiB
// buffer. Call Flush or Close to push buffered lines to w; Close does not
// close w.
func NewFtraceWriter(w io.Writer) *FtraceWriter {
	return &FtraceWriter{bw: bufio.NewWriterSize(w, 64<<10), line: make([]byte, 0, 256)}
}

// Trace formats ev as one ftrace line and buffers it. Events with an invalid
// Kind, events after Close and events after a write error are dropped; the
// error is reported by Err, Flush and Close.
func (fw *FtraceWriter) Trace(ev *Event) {
	if ev == nil || !ev.Kind.Valid() {
		return
	}
	fw.mu.Lock()
	if fw.err == nil && !fw.closed {
		fw.line = AppendFtrace(fw.line[:0], ev)
		if _, err := fw.bw.Write(fw.line); err != nil {
			fw.err = err
		}
	}
	fw.mu.Unlock()
}

// WriteHeader buffers the kernel's "# tracer: nop" comment block (see
// AppendHeader). Call it before the first event if the output should look
// like a whole /sys/kernel/tracing/trace file; the parser skips it either way.
// It returns the first write error or ErrClosed.
func (fw *FtraceWriter) WriteHeader(h Header) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.closed {
		return ErrClosed
	}
	if fw.err == nil {
		_, fw.err = fw.bw.Write(AppendHeader(nil, h))
	}
	return fw.err
}

// Flush writes buffered lines to the underlying writer; it blocks for as long
// as that write does. It returns the first write error seen so far, or
// ErrClosed after Close.
func (fw *FtraceWriter) Flush() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.closed {
		return ErrClosed
	}
	if fw.err == nil {
		fw.err = fw.bw.Flush()
	}
	return fw.err
}

// Err returns the first write error, or nil. It does not block on I/O.
func (fw *FtraceWriter) Err() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.err
}

// Close flushes buffered lines and makes later calls drop their events. It
// does not close the underlying writer. It returns the first write error, or
// ErrClosed when already closed.
func (fw *FtraceWriter) Close() error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if fw.closed {
		return ErrClosed
	}
	fw.closed = true
	if fw.err == nil {
		fw.err = fw.bw.Flush()
	}
	return fw.err
}
