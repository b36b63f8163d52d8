package ktrace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq/wqtrace"
)

// Errors returned by this package; test with errors.Is.
var (
	// ErrPermission is wrapped by Start when tracefs cannot be mounted or
	// its files cannot be opened for lack of privilege.
	ErrPermission = errors.New("ktrace: recording kernel workqueue events needs root (or CAP_SYS_ADMIN and access to tracefs)")
	// ErrUnavailable is wrapped by Start when there is no tracefs (the
	// kernel lacks it, or Config.Root is not a tracefs directory) or it has
	// no workqueue events.
	ErrUnavailable = errors.New("ktrace: tracefs with workqueue events is not available")
	// ErrBusy is wrapped by Start when its context ended while another gowq
	// recording of the same tracefs held the lock.
	ErrBusy = errors.New("ktrace: another gowq recording is using tracefs")
	// ErrRestore is wrapped by Session.Stop when some of the tracefs state
	// could not be put back; the error names each file.
	ErrRestore = errors.New("ktrace: could not restore tracefs state")
	// ErrStopped is returned by Session.Stop when called a second time.
	ErrStopped = errors.New("ktrace: session already stopped")
)

// DefaultRoot is where tracefs is mounted on current systems, and where
// Start mounts it when nothing is mounted there.
const DefaultRoot = "/sys/kernel/tracing"

// DefaultPollInterval is how often a recording reads trace_pipe when
// Config.PollInterval is zero.
const DefaultPollInterval = 100 * time.Millisecond

// Config selects how a recording is made. The zero value records the
// system's tracefs in a private instance.
type Config struct {
	// Root is the tracefs directory. "" or DefaultRoot means the system's:
	// mounted at DefaultRoot first when nothing is mounted there (and
	// unmounted afterwards). Any other directory is used as it is, never
	// mounted; tests point it at a fake tree of plain files.
	Root string
	// BufferKB is the per-CPU ring buffer size in KiB while recording
	// (buffer_size_kb); 0 means DefaultBufferKB(). In top-level mode the
	// buffer is only ever enlarged, never shrunk.
	BufferKB int
	// TopLevel records in the top-level buffer, saving and restoring its
	// state, even when trace instances are available.
	TopLevel bool
	// PollInterval is how often trace_pipe is read while recording;
	// 0 means DefaultPollInterval.
	PollInterval time.Duration

	noLock bool // tests that hold the lock themselves
}

// DefaultBufferKB returns the per-CPU ring buffer size a recording uses
// when Config.BufferKB is 0, in KiB: 32 MiB shared by the CPUs, at least
// 1024 and at most 4096 KiB per CPU.
func DefaultBufferKB() int {
	return min(4096, max(1024, 32768/max(runtime.NumCPU(), 1)))
}

// Recording is what a Session recorded.
type Recording struct {
	// Raw is the text read from trace_pipe, exactly as the kernel wrote it
	// (ftrace text without the "# tracer" header).
	Raw []byte
	// Events are the workqueue events parsed from Raw, in order.
	Events []wqtrace.Event
	// Stats are the parser's counts for Raw (lines, events, other,
	// malformed, lost).
	Stats wqtrace.ParseStats
	// Root is the tracefs directory used.
	Root string
	// Instance is the name of the trace instance used, "" for the
	// top-level buffer.
	Instance string
	// Mounted is true when Start mounted tracefs at Root (and Stop
	// unmounted it).
	Mounted bool
	// Duration is the time tracing was on.
	Duration time.Duration
	// Notes are one-line remarks on what could not be left exactly as it
	// was found, or what was changed to make the recording.
	Notes []string
}

// Session is a recording in progress, returned by Start. Its methods are
// safe for concurrent use.
type Session struct {
	cfg      Config
	root     string // tracefs root
	dir      string // root or the instance directory
	instance string
	mounted  bool
	lock     *os.File
	undo     []undoStep // in the order they were set up; run in reverse
	notes    []string
	pipe     int // trace_pipe fd, -1 when closed
	started  time.Time

	stopReq chan struct{}
	done    chan struct{}

	mu      sync.Mutex
	raw     bytes.Buffer // guarded by mu
	readErr error        // guarded by mu

	stopped atomic.Bool
}

type undoStep struct {
	what string
	fn   func() error
}

var instanceSeq atomic.Int64

// mkdir creates an instance directory; tests replace it to make a fake
// tree behave like tracefs.
var mkdir = func(path string) error { return os.Mkdir(path, 0o755) }

// Start prepares tracefs for a recording of the workqueue events and
// starts reading them in the background; call Stop to end it. It blocks
// while it waits for another gowq recording of the same tracefs to end
// (until ctx ends: ErrBusy), and while it mounts and configures tracefs
// (milliseconds).
//
// It returns an error wrapping ErrPermission when this process may not
// mount or open tracefs, ErrUnavailable when there is no tracefs with
// workqueue events at the root, ErrBusy, or the error of a tracefs file.
// Whatever it changed before failing is put back before it returns.
func Start(ctx context.Context, cfg Config) (*Session, error) {
	if cfg.BufferKB <= 0 {
		cfg.BufferKB = DefaultBufferKB()
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	system := cfg.Root == "" || filepath.Clean(cfg.Root) == DefaultRoot
	root := DefaultRoot
	if !system {
		root = filepath.Clean(cfg.Root)
	}
	s := &Session{cfg: cfg, root: root, pipe: -1, stopReq: make(chan struct{}), done: make(chan struct{})}
	if !cfg.noLock {
		lk, err := lock(ctx, root, system)
		if err != nil {
			return nil, err
		}
		s.lock = lk
	}
	if err := s.setup(system); err != nil {
		if rerr := s.restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		s.unlock()
		return nil, err
	}
	s.started = time.Now()
	go s.read()
	return s, nil
}

// Record records the kernel's workqueue events for d (less when ctx ends
// first) and returns them: Start, a wait, Stop. It blocks for d plus the
// setup and the final read. When ctx ends during the wait it stops early
// and returns the shorter recording together with ctx's error; it
// returns the errors of Start and Stop (see there).
func Record(ctx context.Context, cfg Config, d time.Duration) (*Recording, error) {
	s, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var ctxErr error
	select {
	case <-t.C:
	case <-ctx.Done():
		ctxErr = ctx.Err()
	}
	rec, err := s.Stop()
	return rec, errors.Join(err, ctxErr)
}

// Root returns the tracefs directory the session records from.
func (s *Session) Root() string { return s.root }

// Instance returns the name of the session's trace instance, or "" when
// it records in the top-level buffer.
func (s *Session) Instance() string { return s.instance }

// Stop ends the recording: it turns tracing off, reads what is left of
// trace_pipe, restores tracefs (removes the instance, or writes back the
// saved top-level files; unmounts tracefs when Start mounted it) and
// parses the text. It blocks for that (milliseconds, plus parsing).
//
// It returns the recording, also when restoring failed; then the error
// wraps ErrRestore and names what is left changed. A read error of
// trace_pipe is returned too (with the text read before it). A second
// call returns nil and ErrStopped.
func (s *Session) Stop() (*Recording, error) {
	if !s.stopped.CompareAndSwap(false, true) {
		return nil, ErrStopped
	}
	dur := time.Since(s.started)
	// Stop tracing first, so that the final read ends.
	offErr := writeFile(filepath.Join(s.dir, "tracing_on"), "0")
	close(s.stopReq)
	<-s.done
	s.closePipe()
	var errs []error
	if offErr != nil {
		errs = append(errs, fmt.Errorf("%w: tracing_on: %v", ErrRestore, offErr))
	}
	if err := s.restore(); err != nil {
		errs = append(errs, err)
	}
	s.unlock()

	s.mu.Lock()
	raw := s.raw.Bytes()
	if s.readErr != nil {
		errs = append(errs, fmt.Errorf("ktrace: reading trace_pipe: %w", s.readErr))
	}
	s.mu.Unlock()
	rec := &Recording{Raw: raw, Root: s.root, Instance: s.instance, Mounted: s.mounted, Duration: dur, Notes: s.notes}
	p := wqtrace.NewParser(bytes.NewReader(raw))
	for p.Next() {
		rec.Events = append(rec.Events, p.Event())
	}
	rec.Stats = p.Stats()
	if err := p.Err(); err != nil {
		errs = append(errs, fmt.Errorf("ktrace: parsing the recording: %w", err))
	}
	return rec, errors.Join(errs...)
}

// setup mounts tracefs if needed and prepares the instance or the
// top-level buffer. Every change is pushed on s.undo as it is made.
func (s *Session) setup(system bool) error {
	if system {
		if err := s.mount(); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(s.root, "trace_pipe")); err != nil {
		return classify(err, s.root, "no tracefs here")
	}
	if _, err := os.Stat(filepath.Join(s.root, "events", "workqueue", "enable")); err != nil {
		return classify(err, s.root, "no workqueue events (events/workqueue/enable)")
	}
	// Fail early, with the clear message, when the files cannot be opened.
	if f, err := os.OpenFile(filepath.Join(s.root, "tracing_on"), os.O_RDWR, 0); err != nil {
		return classify(err, s.root, "cannot open tracing_on")
	} else {
		f.Close()
	}
	if s.cfg.TopLevel || !s.makeInstance() {
		s.dir = s.root
		if err := s.setupTopLevel(); err != nil {
			return err
		}
	} else if err := s.setupInstance(); err != nil {
		return err
	}
	fd, err := unix.Open(filepath.Join(s.dir, "trace_pipe"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return classify(&fs.PathError{Op: "open", Path: filepath.Join(s.dir, "trace_pipe"), Err: err}, s.root, "cannot open trace_pipe")
	}
	s.pipe = fd
	return s.set("tracing_on", "1")
}

// classify wraps a tracefs error in ErrPermission or ErrUnavailable.
func classify(err error, root, what string) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %s: %v", ErrPermission, root, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w: %s: %s: %v", ErrUnavailable, root, what, err)
	}
	return fmt.Errorf("ktrace: %s: %s: %w", root, what, err)
}

// mount mounts tracefs at s.root unless a tracefs is there already.
func (s *Session) mount() error {
	var st unix.Statfs_t
	if err := unix.Statfs(s.root, &st); err != nil {
		return classify(&fs.PathError{Op: "statfs", Path: s.root, Err: err}, s.root, "no mount point for tracefs")
	}
	if uint64(st.Type) == uint64(unix.TRACEFS_MAGIC) {
		return nil
	}
	if err := unix.Mount("nodev", s.root, "tracefs", 0, ""); err != nil {
		pe := &fs.PathError{Op: "mount -t tracefs nodev", Path: s.root, Err: err}
		if errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("%w: the kernel has no tracefs: %v", ErrUnavailable, pe)
		}
		return classify(pe, s.root, "cannot mount tracefs")
	}
	s.mounted = true
	s.notes = append(s.notes, "tracefs was not mounted; it was mounted at "+s.root+" for the recording and unmounted after")
	return nil
}

// makeInstance creates a private trace instance and reports whether it
// can be used; when it cannot, nothing is left behind.
func (s *Session) makeInstance() bool {
	inst := filepath.Join(s.root, "instances")
	if st, err := os.Stat(inst); err != nil || !st.IsDir() {
		return false
	}
	s.removeStale(inst)
	for range 8 {
		name := fmt.Sprintf("gowq-%d-%d", os.Getpid(), instanceSeq.Add(1))
		dir := filepath.Join(inst, name)
		err := mkdir(dir)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			s.notes = append(s.notes, fmt.Sprintf("no trace instance (%v); recorded in the top-level buffer", err))
			return false
		}
		_, e1 := os.Stat(filepath.Join(dir, "trace_pipe"))
		_, e2 := os.Stat(filepath.Join(dir, "events", "workqueue", "enable"))
		if e1 != nil || e2 != nil {
			// Not a tracefs instance (a plain directory): take it back.
			os.RemoveAll(dir)
			s.notes = append(s.notes, "trace instances do not work here; recorded in the top-level buffer")
			return false
		}
		s.instance, s.dir = name, dir
		s.undo = append(s.undo, undoStep{"instances/" + name, func() error { return rmdirInstance(dir) }})
		return true
	}
	return false
}

// removeStale removes the instances of gowq processes that died while
// recording (killed before Stop); the instances of live ones are theirs.
func (s *Session) removeStale(inst string) {
	ents, err := os.ReadDir(inst)
	if err != nil {
		return
	}
	for _, e := range ents {
		var pid, n int
		if _, err := fmt.Sscanf(e.Name(), "gowq-%d-%d", &pid, &n); err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue
		}
		if err := rmdirInstance(filepath.Join(inst, e.Name())); err == nil {
			s.notes = append(s.notes, "removed the trace instance "+e.Name()+", left by a gowq process that died while recording")
		}
	}
}

// rmdirInstance removes a trace instance. The kernel refuses (EBUSY)
// while one of its files is open; a reader that has just closed may need
// a moment.
func rmdirInstance(dir string) error {
	var err error
	for i := range 50 {
		if err = unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	if errors.Is(err, unix.ENOTEMPTY) {
		// A plain directory standing in for tracefs (tests).
		return os.RemoveAll(dir)
	}
	return err
}

// setupInstance configures a fresh instance: it has nothing to restore,
// since the instance is removed afterwards.
func (s *Session) setupInstance() error {
	for _, st := range [][2]string{
		{"tracing_on", "0"},
		{"buffer_size_kb", strconv.Itoa(s.cfg.BufferKB)},
		{"events/workqueue/enable", "1"},
	} {
		if err := s.set(st[0], st[1]); err != nil {
			return err
		}
	}
	return s.clear()
}

// setupTopLevel saves and changes the top-level files, pushing an undo
// step for each change.
func (s *Session) setupTopLevel() error {
	// current_tracer: "nop", or whatever tracer was running.
	cur, err := s.get("current_tracer")
	if err != nil {
		return err
	}
	if cur != "nop" {
		if err := s.change("current_tracer", cur, "nop"); err != nil {
			return err
		}
	}
	on, err := s.get("tracing_on")
	if err != nil {
		return err
	}
	if err := s.change("tracing_on", on, "0"); err != nil {
		return err
	}
	// buffer_size_kb: "1408", or "7 (expanded: 1408)" at boot.
	bs, err := s.get("buffer_size_kb")
	if err != nil {
		return err
	}
	size, expanded, ok := parseBufferSize(bs)
	if !ok {
		return fmt.Errorf("ktrace: %s: cannot read buffer_size_kb %q", s.root, bs)
	}
	if !expanded {
		s.notes = append(s.notes, fmt.Sprintf("buffer_size_kb was %q (never expanded); enabling events expands it, so it is left at %d KiB", bs, size))
	}
	if size < s.cfg.BufferKB {
		if err := s.change("buffer_size_kb", strconv.Itoa(size), strconv.Itoa(s.cfg.BufferKB)); err != nil {
			return err
		}
	}
	// events/workqueue/enable: "0", "1", or "X" when only some are on.
	en, err := s.get("events/workqueue/enable")
	if err != nil {
		return err
	}
	if en != "0" && en != "1" {
		// Partly enabled: restore each event's own switch.
		per, err := s.perEventEnables()
		if err != nil {
			return err
		}
		if err := s.set("events/workqueue/enable", "1"); err != nil {
			return err
		}
		s.undo = append(s.undo, undoStep{"events/workqueue/*/enable", func() error {
			var errs []error
			for _, kv := range per {
				errs = append(errs, writeFile(filepath.Join(s.dir, kv[0]), kv[1]))
			}
			return errors.Join(errs...)
		}})
	} else if err := s.change("events/workqueue/enable", en, "1"); err != nil {
		return err
	}
	// The buffer: what is in it cannot be put back; say how much is lost.
	if n := s.entries(); n > 0 {
		s.notes = append(s.notes, fmt.Sprintf("the top-level trace buffer held %d events before the recording; they were discarded", n))
	}
	if err := s.clear(); err != nil {
		return err
	}
	s.undo = append(s.undo, undoStep{"trace (cleared)", s.clear})
	return nil
}

func (s *Session) perEventEnables() ([][2]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "events", "workqueue"))
	if err != nil {
		return nil, classify(err, s.root, "events/workqueue")
	}
	var out [][2]string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		rel := filepath.Join("events", "workqueue", e.Name(), "enable")
		v, err := s.get(rel)
		if err != nil {
			continue // not an event directory
		}
		out = append(out, [2]string{rel, v})
	}
	return out, nil
}

// parseBufferSize reads buffer_size_kb: "1408" (expanded) or
// "7 (expanded: 1408)"; size is the expanded size.
func parseBufferSize(v string) (size int, expanded, ok bool) {
	if i := strings.Index(v, "(expanded:"); i >= 0 {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v[i+len("(expanded:"):]), ")")))
		return n, false, err == nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	return n, true, err == nil
}

// entries returns the number of events in the buffer, from the
// "# entries-in-buffer/entries-written: N/M" line of trace, or 0.
func (s *Session) entries() int64 {
	f, err := os.Open(filepath.Join(s.dir, "trace"))
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, 1024)
	n, _ := f.Read(buf)
	const key = "entries-in-buffer/entries-written:"
	text := string(buf[:n])
	i := strings.Index(text, key)
	if i < 0 {
		return 0
	}
	fields := strings.Fields(text[i+len(key):])
	if len(fields) == 0 {
		return 0
	}
	num, _, _ := strings.Cut(fields[0], "/")
	v, _ := strconv.ParseInt(num, 10, 64)
	return v
}

// get reads a tracefs file of s.dir, trimmed.
func (s *Session) get(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, rel))
	if err != nil {
		return "", classify(err, s.root, "reading "+rel)
	}
	return strings.TrimSpace(string(b)), nil
}

// set writes a tracefs file of s.dir without an undo step.
func (s *Session) set(rel, v string) error {
	if err := writeFile(filepath.Join(s.dir, rel), v); err != nil {
		return classify(err, s.root, "writing "+rel)
	}
	return nil
}

// change writes v to rel and pushes the step that writes old back.
func (s *Session) change(rel, old, v string) error {
	if err := s.set(rel, v); err != nil {
		return err
	}
	path := filepath.Join(s.dir, rel)
	s.undo = append(s.undo, undoStep{rel, func() error { return writeFile(path, old) }})
	return nil
}

// clear empties the ring buffer of s.dir: tracefs clears it when trace
// is opened for writing with O_TRUNC.
func (s *Session) clear() error {
	f, err := os.OpenFile(filepath.Join(s.dir, "trace"), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return classify(err, s.root, "clearing trace")
	}
	return f.Close()
}

// writeFile writes v and a newline to an existing tracefs file.
func writeFile(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// restore runs the undo steps in reverse, then unmounts tracefs when
// Start mounted it. It returns an error wrapping ErrRestore naming every
// step that failed.
func (s *Session) restore() error {
	s.closePipe()
	var errs []error
	for i := len(s.undo) - 1; i >= 0; i-- {
		if err := s.undo[i].fn(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", s.undo[i].what, err))
		}
	}
	s.undo = nil
	if s.mounted {
		if err := unmount(s.root); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %v", s.root, err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrRestore, errors.Join(errs...))
}

// unmount unmounts tracefs, retrying briefly while it is busy (a file of
// ours that the kernel has not let go of yet).
func unmount(root string) error {
	var err error
	for i := range 20 {
		if err = unix.Unmount(root, 0); err == nil || !errors.Is(err, unix.EBUSY) {
			return err
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	return err
}

func (s *Session) closePipe() {
	if s.pipe >= 0 {
		unix.Close(s.pipe)
		s.pipe = -1
	}
}

func (s *Session) unlock() {
	if s.lock != nil {
		unix.Flock(int(s.lock.Fd()), unix.LOCK_UN)
		s.lock.Close()
		s.lock = nil
	}
}

// read copies trace_pipe into s.raw until Stop, then drains it.
func (s *Session) read() {
	defer close(s.done)
	buf := make([]byte, 64<<10)
	stopping := false
	var stopAt time.Time
	for {
		n, err := unix.Read(s.pipe, buf)
		if n > 0 {
			s.mu.Lock()
			s.raw.Write(buf[:n])
			s.mu.Unlock()
			// Tracing is off once stopping; should events keep coming
			// anyway (tracing_on could not be written), give up after 1 s.
			if !stopping || time.Since(stopAt) < time.Second {
				continue
			}
			return
		}
		switch {
		case err == nil, errors.Is(err, unix.EAGAIN):
			// Empty for now (a plain file at its end returns 0).
		case errors.Is(err, unix.EINTR):
			continue
		default:
			s.mu.Lock()
			s.readErr = err
			s.mu.Unlock()
			return
		}
		if stopping {
			return
		}
		select {
		case <-s.stopReq:
			stopping, stopAt = true, time.Now() // one more pass reads what came in meanwhile
		case <-time.After(s.cfg.PollInterval):
		}
	}
}
