package wqtrace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
)

// ErrNotWorkqueue is returned by ParseLine for a line that is not a
// workqueue tracepoint event: a blank or comment line, another tracepoint,
// a stack-trace line, a trace-cmd or perf header line.
var ErrNotWorkqueue = errors.New("wqtrace: not a workqueue event")

// ErrMalformed is wrapped by the errors for lines that name a workqueue
// tracepoint but whose context or fields cannot be read.
var ErrMalformed = errors.New("wqtrace: malformed workqueue event")

// LineError is the error for one bad input line; it wraps ErrMalformed or
// the I/O error.
type LineError struct {
	Line int    // 1-based line number
	Text string // the line, without its newline, cut to 200 bytes
	Err  error  // wraps ErrMalformed
}

// Error returns "wqtrace: line N: <cause>: <text>".
func (e *LineError) Error() string {
	return fmt.Sprintf("wqtrace: line %d: %v: %q", e.Line, e.Err, e.Text)
}

// Unwrap returns the cause, so errors.Is(err, ErrMalformed) works.
func (e *LineError) Unwrap() error { return e.Err }

// ParseStats counts what a Parser has read so far.
type ParseStats struct {
	Lines     int // lines read
	Events    int // workqueue events returned
	Comments  int // blank lines and lines starting with '#'
	Other     int // lines that are not workqueue events: other tracepoints, stack traces, headers
	Malformed int // lines naming a workqueue tracepoint that could not be read; skipped unless Strict
	// Lost is the sum of the kernel's "CPU:N [LOST M EVENTS]" counts: events
	// the ring buffer dropped, so some work items will look unmatched.
	Lost int64
	// ByKind counts returned events per Kind (index 0 is unused).
	ByKind [ExecuteEnd + 1]int
	// FirstMalformed is the *LineError of the first malformed line, or nil.
	FirstMalformed error
}

// maxLine is the longest line a Parser accepts (1 MiB).
const maxLine = 1 << 20

// Parser reads workqueue events from trace text, one line at a time. It
// accepts, mixed in any order:
//
//   - the kernel's ftrace text (/sys/kernel/tracing/trace or trace_pipe),
//     with or without the latency-format flags column and the tgid column;
//   - trace-cmd report text ("comm-pid [cpu] [flags] secs: event: fields");
//   - perf script text ("comm pid[/tid] [cpu] secs: workqueue:event: fields").
//
// For each tracepoint it reads the current and the older TP_printk formats:
// "work struct=%p" and "work struct %p", pointers with or without "0x",
// the workqueue as a name or as a pointer (kept as text, e.g.
// "ffff888003a4c000"), activate and execute_end with or without "function",
// and cpu printed by %u on old kernels (4294967295 is read as -1). Timestamps
// may have any number of decimals up to 9 (ns); a timestamp without a
// decimal point is taken as ns. Other lines are skipped and counted in Stats.
//
// Blank lines and lines whose first non-blank byte is '#' are comments, so
// a task whose name starts with '#' cannot be read (ftrace's own text has the
// same ambiguity). Lines longer than 1 MiB stop the parse with an error.
//
// A Parser is not safe for concurrent use. Strings (Comm, Function,
// Workqueue, Flags) are interned, so events from one Parser share them.
type Parser struct {
	// Strict makes a malformed workqueue line stop the parse: Next returns
	// false and Err returns a *LineError wrapping ErrMalformed. When false
	// (the default) such lines are skipped and counted in Stats.Malformed.
	Strict bool

	sc    *bufio.Scanner
	lp    lineParser
	ev    Event
	err   error
	stats ParseStats
}

// NewParser returns a Parser reading from r. It reads lazily, as Next is
// called; lines longer than 1 MiB make Err return an error.
func NewParser(r io.Reader) *Parser {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	return &Parser{sc: sc, lp: lineParser{intern: make(map[string]string)}}
}

// Next advances to the next workqueue event and reports whether there is
// one. It returns false at the end of the input or on an error (see Err). It
// blocks while reading from the underlying reader.
func (p *Parser) Next() bool {
	if p.err != nil {
		return false
	}
	for p.sc.Scan() {
		p.stats.Lines++
		line := p.sc.Bytes()
		cls, err := p.lp.parse(line, &p.ev)
		switch cls {
		case clsEvent:
			p.stats.Events++
			p.stats.ByKind[p.ev.Kind]++
			return true
		case clsComment:
			p.stats.Comments++
		case clsLost:
			p.stats.Other++
			p.stats.Lost += p.lp.lost
		case clsOther:
			p.stats.Other++
		case clsMalformed:
			p.stats.Malformed++
			le := &LineError{Line: p.stats.Lines, Text: clip(line), Err: err}
			if p.stats.FirstMalformed == nil {
				p.stats.FirstMalformed = le
			}
			if p.Strict {
				p.err = le
				return false
			}
		}
	}
	if err := p.sc.Err(); err != nil {
		p.err = fmt.Errorf("wqtrace: after line %d: %w", p.stats.Lines, err)
	}
	return false
}

func clip(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// Event returns the event read by the last successful Next.
func (p *Parser) Event() Event { return p.ev }

// Err returns the error that stopped Next: a read error, bufio.ErrTooLong
// (wrapped) for an over-long line, or in Strict mode a *LineError wrapping
// ErrMalformed. It returns nil at a clean end of input.
func (p *Parser) Err() error { return p.err }

// Stats returns the counts so far.
func (p *Parser) Stats() ParseStats { return p.stats }

// All returns an iterator over the remaining events. After the loop, check
// Err. Breaking out of the loop leaves the Parser at the next line.
func (p *Parser) All() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for p.Next() {
			if !yield(p.ev) {
				return
			}
		}
	}
}

// Parse reads all workqueue events from r (see Parser for the accepted
// formats), skipping other and malformed lines. It returns the events in
// input order and the first read error, if any, with the events read before
// it. Use a Parser to get the counts of skipped lines or a strict parse.
func Parse(r io.Reader) ([]Event, error) {
	p := NewParser(r)
	var evs []Event
	for p.Next() {
		evs = append(evs, p.ev)
	}
	return evs, p.Err()
}

// ParseLine parses one line of trace text (with or without its trailing
// newline). It returns ErrNotWorkqueue for a line that is not a workqueue
// event and an error wrapping ErrMalformed for one that cannot be read.
func ParseLine(line string) (Event, error) {
	var lp lineParser
	var ev Event
	cls, err := lp.parse([]byte(line), &ev)
	switch cls {
	case clsEvent:
		return ev, nil
	case clsMalformed:
		return Event{}, err
	default:
		return Event{}, ErrNotWorkqueue
	}
}

type lineClass uint8

const (
	clsEvent lineClass = iota
	clsComment
	clsLost
	clsOther
	clsMalformed
)

// lineParser holds the per-parser state: an intern table and the count of
// the last LOST line.
type lineParser struct {
	intern map[string]string // nil: no interning
	lost   int64
}

// maxIntern bounds the intern table; past it strings are allocated.
const maxIntern = 1 << 16

func (lp *lineParser) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if lp.intern == nil {
		return string(b)
	}
	if s, ok := lp.intern[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(lp.intern) < maxIntern {
		lp.intern[s] = s
	}
	return s
}

var (
	bWorkqueue = []byte("workqueue_")
	bLost      = []byte("[LOST ")
)

func malformed(why string) error { return fmt.Errorf("%w: %s", ErrMalformed, why) }

// namesTracepoint reports whether line mentions one of the four tracepoints
// as an event name ("name:"), used to tell malformed lines from other lines.
func namesTracepoint(line []byte) bool {
	for k := QueueWork; k <= ExecuteEnd; k++ {
		if i := bytes.Index(line, []byte(kindNames[k])); i >= 0 {
			j := i + len(kindNames[k])
			if j < len(line) && line[j] == ':' {
				return true
			}
		}
	}
	return false
}

func (lp *lineParser) parse(line []byte, ev *Event) (lineClass, error) {
	for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
		line = line[:len(line)-1]
	}
	s := trimLeftSpace(line)
	if len(s) == 0 || s[0] == '#' {
		return clsComment, nil
	}
	if !bytes.Contains(line, bWorkqueue) {
		// "CPU:1 [LOST 123 EVENTS]"
		if i := bytes.Index(s, bLost); i >= 0 && bytes.HasPrefix(s, []byte("CPU:")) {
			f := s[i+len(bLost):]
			n, rest, ok := leadingInt(f)
			if ok && bytes.HasPrefix(rest, []byte(" EVENTS]")) {
				lp.lost = n
				return clsLost, nil
			}
		}
		return clsOther, nil
	}
	cls, err := lp.parseEvent(line, ev)
	if cls == clsOther && err != nil && namesTracepoint(line) {
		return clsMalformed, err
	}
	return cls, err
}

// parseEvent reads "<context> <timestamp>: <event>: <fields>". It returns
// clsOther with a nil error for a readable line of another event, clsOther
// with a reason when no context can be read (the caller decides whether that
// is malformed), and clsMalformed when the fields of a workqueue event
// cannot be read.
func (lp *lineParser) parseEvent(line []byte, ev *Event) (lineClass, error) {
	// Find the "[cpu]" bracket whose prefix ends in a pid and which is
	// followed by [flags], a timestamp and a workqueue event name. A comm
	// may itself hold brackets, so try each '[' in turn.
	var c lineContext
	found := false
	kind := Kind(0)
	for from := 0; kind == 0; {
		i := bytes.IndexByte(line[from:], '[')
		if i < 0 {
			break
		}
		i += from
		from = i + 1
		if c.read(line, i) {
			found = true
			kind = kindOfBytes(bytes.TrimPrefix(c.name, []byte("workqueue:")))
		}
	}
	if !found {
		return clsOther, malformed("no \"comm-pid [cpu] [flags] secs: event:\" context")
	}
	if kind == 0 {
		return clsOther, nil
	}
	fields := trimLeftSpace(c.rest)

	*ev = Event{
		Kind:   kind,
		TimeNs: c.ts,
		CPU:    c.cpu,
		TID:    c.tid,
		Comm:   lp.str(c.comm),
		Flags:  lp.str(c.flags),
	}
	if err := lp.parseFields(kind, fields, ev); err != nil {
		return clsMalformed, err
	}
	return clsEvent, nil
}

// lineContext is the part of a line before the event name.
type lineContext struct {
	comm, flags []byte
	tid, cpu    int
	ts          int64
	name        []byte // event name, e.g. "workqueue_queue_work" or "workqueue:workqueue_queue_work"
	rest        []byte // after "name:"
}

// read parses the context with the "[cpu]" bracket at line[i].
func (c *lineContext) read(line []byte, i int) bool {
	cpu, closeAt, ok := bracketInt(line[i:])
	if !ok {
		return false
	}
	comm, tid, ok := parseTaskPID(line[:i])
	if !ok {
		return false
	}
	rest := trimLeftSpace(line[i+closeAt+1:])
	tok, after := nextToken(rest)
	var flags []byte
	if len(tok) == 0 || tok[len(tok)-1] != ':' {
		flags = tok
		tok, after = nextToken(trimLeftSpace(after))
	}
	if len(tok) < 2 || tok[len(tok)-1] != ':' {
		return false
	}
	ts, ok := parseTimestamp(tok[:len(tok)-1])
	if !ok {
		return false
	}
	// Event name up to ": " (or ':' at the end of the line); perf puts the
	// system in front ("workqueue:workqueue_queue_work") and pads on the left.
	rest = trimLeftSpace(after)
	k := -1
	for j := 0; j < len(rest); j++ {
		if rest[j] == ':' && (j+1 == len(rest) || rest[j+1] == ' ') {
			k = j
			break
		}
		if rest[j] == ' ' || rest[j] == '\t' {
			break
		}
	}
	if k <= 0 {
		return false
	}
	*c = lineContext{comm: comm, flags: flags, tid: tid, cpu: cpu, ts: ts, name: rest[:k], rest: rest[k+1:]}
	return true
}

func kindOfBytes(name []byte) Kind {
	for k := QueueWork; k <= ExecuteEnd; k++ {
		if string(name) == kindNames[k] {
			return k
		}
	}
	return 0
}

var (
	bWorkStruct = []byte("work struct")
	bFunctionEq = []byte("function=")
	bFunctionSp = []byte("function ")
	bWQ         = []byte(" workqueue=")
	bReqCPU     = []byte(" req_cpu=")
	bCPU        = []byte(" cpu=")
)

func (lp *lineParser) parseFields(kind Kind, f []byte, ev *Event) error {
	if !bytes.HasPrefix(f, bWorkStruct) {
		return malformed("no \"work struct\"")
	}
	f = f[len(bWorkStruct):]
	if len(f) == 0 || (f[0] != '=' && f[0] != ' ') {
		return malformed("no work pointer")
	}
	f = f[1:]
	j := 0
	for j < len(f) && f[j] != ' ' && f[j] != ':' {
		j++
	}
	w, ok := parseHexPtr(f[:j])
	if !ok {
		return malformed("bad work pointer")
	}
	ev.Work = w
	f = f[j:]

	if kind == QueueWork {
		return lp.parseQueueFields(f, ev)
	}
	// activate: "" | " function=NAME "; start/end: "" | ": function NAME".
	if len(f) > 0 && f[0] == ':' {
		f = f[1:]
	}
	f = trimLeftSpace(f)
	if len(f) == 0 {
		if kind == ExecuteStart {
			return malformed("execute_start without function")
		}
		return nil
	}
	if !bytes.HasPrefix(f, bFunctionEq) && !bytes.HasPrefix(f, bFunctionSp) {
		return malformed("no function")
	}
	ev.Function = lp.str(trimRightSpace(f[len(bFunctionEq):]))
	return nil
}

// parseQueueFields reads " function=F workqueue=W req_cpu=R cpu=C" after
// the work pointer. The keys come in this order; each may be missing (some
// tools print a shortened line), and a value runs up to the next key present,
// so a function like "xlog_cil_push_work [xfs]" keeps its module suffix.
// ReqCPU and TargetCPU are -1 when missing.
func (lp *lineParser) parseQueueFields(f []byte, ev *Event) error {
	ev.ReqCPU, ev.TargetCPU = -1, -1
	f = trimRightSpace(f)
	if len(f) == 0 {
		return nil
	}
	keys := [...][]byte{bFunctionEq, bWQ, bReqCPU, bCPU}
	var start, end [len(keys)]int // value bounds; start -1: key missing
	pos := 0
	for i, k := range keys {
		start[i] = -1
		j := bytes.Index(f[pos:], k)
		if i == 0 && j >= 0 && (pos+j == 0 || f[pos+j-1] != ' ') {
			j = -1 // "function=" must follow a space
		}
		if j < 0 {
			continue
		}
		start[i] = pos + j + len(k)
		pos = start[i]
	}
	first := -1
	for i := range keys {
		if start[i] < 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		end[i] = len(f)
		for n := i + 1; n < len(keys); n++ {
			if start[n] >= 0 {
				end[i] = start[n] - len(keys[n])
				break
			}
		}
	}
	if first < 0 || len(trimLeftSpace(f[:start[first]-len(keys[first])])) != 0 {
		return malformed("queue_work fields not \"function= workqueue= req_cpu= cpu=\"")
	}
	if start[0] >= 0 {
		ev.Function = lp.str(f[start[0]:end[0]])
	}
	if start[1] >= 0 {
		ev.Workqueue = lp.str(f[start[1]:end[1]])
	}
	for i, dst := range [...]*int{2: &ev.ReqCPU, 3: &ev.TargetCPU} {
		if dst == nil || start[i] < 0 {
			continue
		}
		n, ok := parseCPUInt(f[start[i]:end[i]])
		if !ok {
			return malformed("bad req_cpu or cpu")
		}
		*dst = n
	}
	return nil
}

// bracketInt reads "[N]" (N may be negative) at the start of b and returns
// N and the index of ']'.
func bracketInt(b []byte) (int, int, bool) {
	j := 1
	if j < len(b) && b[j] == '-' {
		j++
	}
	start := j
	for j < len(b) && isDigit(b[j]) {
		j++
	}
	if j == start || j >= len(b) || b[j] != ']' || j-start > 9 {
		return 0, 0, false
	}
	n, _ := strconv.Atoi(string(b[1:j]))
	return n, j, true
}

// parseTaskPID reads the text before "[cpu]": "comm-pid" (ftrace,
// trace-cmd), "comm pid" or "comm pid/tid" (perf), each optionally followed
// by ftrace's "(tgid)" column.
func parseTaskPID(p []byte) (comm []byte, tid int, ok bool) {
	p = trimRightSpace(p)
	if len(p) > 0 && p[len(p)-1] == ')' {
		i := bytes.LastIndexByte(p, '(')
		if i < 0 {
			return nil, 0, false
		}
		p = trimRightSpace(p[:i])
	}
	j := len(p)
	for j > 0 && isDigit(p[j-1]) {
		j--
	}
	if j == len(p) || len(p)-j > 10 {
		return nil, 0, false
	}
	t, err := strconv.Atoi(string(p[j:]))
	if err != nil {
		return nil, 0, false
	}
	if j > 0 && p[j-1] == '/' { // perf "pid/tid"
		k := j - 1
		for k > 0 && isDigit(p[k-1]) {
			k--
		}
		if k == j-1 {
			return nil, 0, false
		}
		j = k
	}
	switch {
	case j == 0:
		return nil, t, true
	case p[j-1] == '-':
		return trimLeftSpace(p[:j-1]), t, true
	case p[j-1] == ' ' || p[j-1] == '\t':
		return trimLeftSpace(trimRightSpace(p[:j-1])), t, true
	}
	return nil, 0, false
}

// parseTimestamp reads "secs.frac" (frac up to 9 digits) or an integer (ns).
func parseTimestamp(b []byte) (int64, bool) {
	dot := bytes.IndexByte(b, '.')
	if dot < 0 {
		n, rest, ok := leadingInt(b)
		return n, ok && len(rest) == 0
	}
	sec, rest, ok := leadingInt(b[:dot])
	if !ok || len(rest) != 0 || sec > 9_000_000_000 {
		return 0, false
	}
	frac := b[dot+1:]
	if len(frac) == 0 || len(frac) > 9 {
		return 0, false
	}
	var ns int64
	for i := 0; i < 9; i++ {
		ns *= 10
		if i < len(frac) {
			if !isDigit(frac[i]) {
				return 0, false
			}
			ns += int64(frac[i] - '0')
		}
	}
	return sec*1e9 + ns, true
}

// leadingInt reads a non-negative decimal integer of at most 18 digits.
func leadingInt(b []byte) (int64, []byte, bool) {
	var n int64
	j := 0
	for j < len(b) && isDigit(b[j]) {
		if j == 18 {
			return 0, b, false
		}
		n = n*10 + int64(b[j]-'0')
		j++
	}
	return n, b[j:], j > 0
}

// parseCPUInt reads a %d or %u CPU number; %u values of 2^31..2^32-1 are
// the unsigned print of a negative int (old kernels print the unbound
// pool's cpu -1 as 4294967295).
func parseCPUInt(b []byte) (int, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, false
	}
	if n >= 1<<31 && n < 1<<32 {
		n = int64(int32(uint32(n)))
	}
	if n < -1<<31 || n >= 1<<31 {
		return 0, false
	}
	return int(n), true
}

func parseHexPtr(b []byte) (uintptr, bool) {
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	if len(b) == 0 || len(b) > ptrDigits {
		return 0, false
	}
	var v uintptr
	for _, c := range b {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		v = v<<4 | uintptr(d)
	}
	return v, true
}

func nextToken(b []byte) (tok, rest []byte) {
	j := 0
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[:j], b[j:]
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func trimLeftSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func trimRightSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}
