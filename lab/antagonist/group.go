package antagonist

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopGrace = time.Second

// readyTimeout bounds how long a start waits for a child's setup report.
// Generous: a race-built child on a loaded 2-CPU machine took over 10 s.
var readyTimeout = 30 * time.Second

// Group is a set of antagonist child processes started together by
// Burners, Hog or Fio. Each child leads its own process group, so signals
// reach its descendants too (fio's job processes). Its methods are safe
// for concurrent use.
type Group struct {
	name  string
	start time.Time
	procs []*proc // fixed after start

	signalled atomic.Bool   // a signal was sent by Stop or the runtime timer
	done      chan struct{} // closed when every child is reaped
	timer     *time.Timer   // Fio runtime limit; nil otherwise

	stopOnce sync.Once
	stopErr  error // set by stopOnce

	// asked and on are the load the group asks for: asked CPUs' worth
	// of busy time, on on CPUs (Demand). Set before start; 0 unknown.
	asked float64
	on    int
}

// Demand returns the CPU time the group asks for, in CPUs (its jobs'
// busy shares added: 8 burners at 90% ask for 7.2), and the number of
// CPUs it may run on (8 burners on a 2-CPU machine: 2; hogs pinned to
// one CPU: 1). It is what the load would take if nothing else ran; Usage
// says what it got. Both are 0 when unknown (fio's job file decides).
func (g *Group) Demand() (cpus float64, on int) { return g.asked, g.on }

// proc is one child.
type proc struct {
	label  string
	cmd    *exec.Cmd
	pid    int
	stderr *tailBuffer
	stdout *tailBuffer // nil unless captured (fio)

	mu     sync.Mutex // guards reaped against signalling a reused pid
	reaped bool       // guarded by mu: the pid may be gone; signal no more

	done       chan struct{} // closed after the fields below are set
	state      *os.ProcessState
	waitErr    error     // from cmd.Wait
	unexpected bool      // it exited with an error before anyone signalled it
	end        time.Time // when it was seen to exit
}

// ProcUsage is the CPU time one child consumed.
type ProcUsage struct {
	Pid    int
	Label  string        // e.g. "burner 3/8"
	CPU    time.Duration // user+system; includes descendants it reaped
	Exited bool          // true: CPU is final (from rusage at reap)
}

// Usage reports how much CPU a group consumed against wall time.
type Usage struct {
	Wall  time.Duration // from start until now, or until the last child exited
	CPU   time.Duration // sum over Procs
	Procs []ProcUsage
}

// CPUs returns CPU/Wall: the average number of CPUs the group kept busy
// (8 burners at 90% on an idle 2-CPU machine give about 2). 0 when Wall
// is 0.
func (u Usage) CPUs() float64 {
	if u.Wall <= 0 {
		return 0
	}
	return u.CPU.Seconds() / u.Wall.Seconds()
}

// String formats the usage, e.g. "cpu 1.84s over 1.00s wall = 1.84 CPUs".
func (u Usage) String() string {
	return fmt.Sprintf("cpu %.2fs over %.2fs wall = %.2f CPUs", u.CPU.Seconds(), u.Wall.Seconds(), u.CPUs())
}

// Name returns what the group runs, e.g. "8 burners at 90% (qsort)".
func (g *Group) Name() string { return g.name }

// Pids returns the pids of the children, in start order.
func (g *Group) Pids() []int {
	out := make([]int, len(g.procs))
	for i, p := range g.procs {
		out[i] = p.pid
	}
	return out
}

// Done returns a channel that is closed when every child has exited and
// been reaped, whether by Stop or on its own (fio at the end of its
// runtime).
func (g *Group) Done() <-chan struct{} { return g.done }

// Output returns the captured standard output (the last 64 KiB of each
// child that captures it: fio's report). It is complete once Done is
// closed.
func (g *Group) Output() string {
	var b strings.Builder
	for _, p := range g.procs {
		if p.stdout != nil {
			b.WriteString(p.stdout.String())
		}
	}
	return b.String()
}

// Usage returns the CPU time the children consumed and the wall time
// since the group started. For a running child the CPU time is read from
// /proc/<pid>/stat (10 ms ticks; for fio it covers fio's main process and
// the job processes it has reaped); for an exited one it is the exact
// rusage taken when it was reaped. It does not block.
func (g *Group) Usage() Usage {
	u := Usage{Procs: make([]ProcUsage, len(g.procs))}
	var last time.Time
	allDone := true
	for i, p := range g.procs {
		pu := ProcUsage{Pid: p.pid, Label: p.label}
		select {
		case <-p.done:
			pu.Exited = true
			if p.state != nil {
				pu.CPU = p.state.UserTime() + p.state.SystemTime()
			}
			if p.end.After(last) {
				last = p.end
			}
		default:
			allDone = false
			if st, err := procStat(p.pid); err == nil {
				ticks := int64(st.UTime) + int64(st.STime) + int64(st.CUTime) + int64(st.CSTime)
				pu.CPU = time.Duration(ticks) * time.Second / userHZ
			}
		}
		u.Procs[i] = pu
		u.CPU += pu.CPU
	}
	if allDone && len(g.procs) > 0 {
		u.Wall = last.Sub(g.start)
	} else {
		u.Wall = time.Since(g.start)
	}
	return u
}

// userHZ is the unit of /proc/<pid>/stat times (procfs assumes the same).
const userHZ = 100

func procStat(pid int) (procfs.ProcStat, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procfs.ProcStat{}, err
	}
	return p.Stat()
}

// Stop ends every child: SIGTERM to each child's process group, SIGKILL
// after StopGrace to what is left, then it waits until all are reaped, so
// no zombie and no goroutine remains. It blocks for at most about
// StopGrace plus the time the kernel takes to kill. It returns nil when
// every child either exited cleanly or was ended by Stop (or by Fio's
// runtime limit), and otherwise an error per child that failed on its own,
// with the tail of its stderr. Stop is idempotent and safe to call
// concurrently: later calls wait for the first and return its result.
func (g *Group) Stop() error {
	g.stopOnce.Do(func() {
		if g.timer != nil {
			g.timer.Stop()
		}
		g.signal(syscall.SIGTERM)
		t := time.NewTimer(StopGrace)
		select {
		case <-g.done:
		case <-t.C:
			g.signal(syscall.SIGKILL)
			<-g.done
		}
		t.Stop()
		var errs []error
		for _, p := range g.procs {
			if p.unexpected {
				errs = append(errs, p.exitError())
			}
		}
		g.stopErr = errors.Join(errs...)
	})
	return g.stopErr
}

func (p *proc) exitError() error {
	msg := fmt.Sprintf("antagonist: %s (pid %d) exited on its own: %v", p.label, p.pid, p.waitErr)
	if tail := strings.TrimSpace(p.stderr.String()); tail != "" {
		msg += ": " + tail
	}
	return errors.New(msg)
}

// signal sends sig to the process group of every child not yet reaped.
func (g *Group) signal(sig syscall.Signal) {
	g.signalled.Store(true)
	for _, p := range g.procs {
		p.mu.Lock()
		if !p.reaped {
			_ = unix.Kill(-p.pid, sig)
		}
		p.mu.Unlock()
	}
}

// wait reaps p: it waits for the exit without reaping (the zombie keeps
// the pid and process group id from being reused), kills whatever is left
// in the child's process group, then reaps.
func (g *Group) wait(p *proc) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	p.end = time.Now()
	before := g.signalled.Load()
	p.mu.Lock()
	_ = unix.Kill(-p.pid, syscall.SIGKILL) // stragglers: fio jobs, shell children
	p.reaped = true
	p.mu.Unlock()
	p.waitErr = p.cmd.Wait()
	p.state = p.cmd.ProcessState
	p.unexpected = p.waitErr != nil && !before
	close(p.done)
	spawn.release()
}

// start launches the children described by cmds and waits for each to
// report ready (when withReady). On any failure it stops what it started
// and returns the error.
func startGroup(name string, cmds []*exec.Cmd, labels []string, withReady, captureStdout bool) (*Group, error) {
	g := &Group{name: name, start: time.Now(), done: make(chan struct{})}
	var firstErr error
	for i, cmd := range cmds {
		p, err := g.startOne(cmd, labels[i], withReady, captureStdout)
		if p != nil {
			g.procs = append(g.procs, p)
		}
		if err != nil {
			firstErr = err
			break
		}
	}
	go func(procs []*proc) {
		for _, p := range procs {
			<-p.done
		}
		close(g.done)
	}(g.procs)
	if firstErr != nil {
		_ = g.Stop()
		return nil, firstErr
	}
	return g, nil
}

// startOne starts one child; it returns a non-nil proc whenever the process
// was started (so that it gets reaped), even when setup failed.
func (g *Group) startOne(cmd *exec.Cmd, label string, withReady, captureStdout bool) (*proc, error) {
	p := &proc{label: label, cmd: cmd, stderr: newTailBuffer(8 << 10), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if captureStdout {
		p.stdout = newTailBuffer(64 << 10)
		cmd.Stdout = p.stdout
	}
	// If a descendant left the process group and kept a captured pipe
	// open, Wait gives up on the pipe after this long.
	cmd.WaitDelay = StopGrace
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,            // own process group: Stop reaches descendants
		Pdeathsig: syscall.SIGKILL, // die with the parent (see spawner)
	}
	var r, w *os.File
	if withReady {
		var err error
		if r, w, err = os.Pipe(); err != nil {
			return nil, fmt.Errorf("%w: %s: pipe: %v", ErrChildStart, label, err)
		}
		defer r.Close()
		cmd.ExtraFiles = []*os.File{w}
	}
	err := spawn.start(cmd)
	if w != nil {
		w.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrChildStart, label, err)
	}
	p.pid = cmd.Process.Pid
	go g.wait(p)
	if !withReady {
		return p, nil
	}
	_ = r.SetReadDeadline(time.Now().Add(readyTimeout))
	line, err := bufio.NewReader(r).ReadBytes('\n')
	if err != nil {
		return p, fmt.Errorf("%w: %s (pid %d) sent no setup report: %v", ErrChildStart, label, p.pid, err)
	}
	var rep childReport
	if err := json.Unmarshal(line, &rep); err != nil {
		return p, fmt.Errorf("%w: %s (pid %d): bad setup report %q", ErrChildStart, label, p.pid, line)
	}
	if rep.OK {
		return p, nil
	}
	errno := syscall.Errno(rep.Errno)
	if errno == 0 {
		return p, fmt.Errorf("%w: %s: %s", ErrChildStart, label, rep.Err)
	}
	op := strings.TrimSuffix(rep.Err, ": "+errno.Error())
	if errno == unix.EPERM || errno == unix.EACCES {
		return p, fmt.Errorf("%w: %s: %s: %w (needs CAP_SYS_NICE, or RLIMIT_NICE/RLIMIT_RTPRIO)", ErrPermission, label, op, errno)
	}
	return p, fmt.Errorf("%w: %s: %s: %w", ErrChildStart, label, op, errno)
}

// childCmd builds the command that re-executes this binary as a child.
func childCmd(cs childSpec, label string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%w: os.Executable: %v", ErrChildStart, err)
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrChildStart, err)
	}
	cmd := exec.Command(exe)
	// argv[0] names the child in ps and top; os.Executable is unaffected.
	cmd.Args = []string{"gowq-antagonist", strings.ReplaceAll(label, " ", "-")}
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == EnvVar || k == "GOMAXPROCS" || k == "GOGC" {
			continue
		}
		env = append(env, kv)
	}
	// One P: the child is one load thread, like a C burner. No GC: the
	// loops do not allocate, and a collection would only add noise.
	cmd.Env = append(env, EnvVar+"="+string(b), "GOMAXPROCS=1", "GOGC=off")
	return cmd, nil
}

// Burners starts spec.Jobs burner processes, each the equivalent of one
// fio ioengine=cpuio job (see BurnerSpec and ModeQsort), and returns once
// every one of them has applied its affinity and nice value and entered
// its loop (a few ms each). It returns ErrInvalidSpec for a bad spec,
// ErrPermission when a negative nice is refused, or ErrChildStart; on
// error nothing is left running. The caller must Stop the group.
func Burners(spec BurnerSpec) (*Group, error) {
	if err := spec.normalize(); err != nil {
		return nil, err
	}
	cmds := make([]*exec.Cmd, spec.Jobs)
	labels := make([]string, spec.Jobs)
	for i := range cmds {
		labels[i] = fmt.Sprintf("burner %d/%d", i+1, spec.Jobs)
		cmd, err := childCmd(spec.childSpec(i), labels[i])
		if err != nil {
			return nil, err
		}
		cmds[i] = cmd
	}
	name := fmt.Sprintf("%d burners at %d%% (%s)", spec.Jobs, spec.LoadPct, spec.Mode)
	g, err := startGroup(name, cmds, labels, true, false)
	if g != nil {
		g.asked = float64(spec.Jobs) * float64(spec.LoadPct) / 100
		g.on = len(spec.CPUs)
		if g.on == 0 {
			g.on = allowedCPUCount()
		}
	}
	return g, err
}

// Hog starts spec.Procs processes pinned to spec.CPU that spin (see
// HogSpec), and returns once each has its affinity, nice value and policy.
// It returns ErrInvalidSpec for a bad spec, ErrRTUnthrottled for an RT
// hog at 100% duty without kernel RT throttling, ErrPermission when the
// nice value or RT policy is refused (it never degrades silently), or
// ErrChildStart; on error nothing is left running. The caller must Stop
// the group.
func Hog(spec HogSpec) (*Group, error) {
	if err := spec.normalize(); err != nil {
		return nil, err
	}
	if spec.Policy != PolicyOther && spec.DutyPct == 100 {
		if err := checkRTThrottling(); err != nil {
			return nil, err
		}
	}
	cmds := make([]*exec.Cmd, spec.Procs)
	labels := make([]string, spec.Procs)
	for i := range cmds {
		labels[i] = fmt.Sprintf("hog %d/%d", i+1, spec.Procs)
		cmd, err := childCmd(spec.childSpec(), labels[i])
		if err != nil {
			return nil, err
		}
		cmds[i] = cmd
	}
	name := fmt.Sprintf("%d hog(s) on CPU %d, nice %d, %v", spec.Procs, spec.CPU, spec.Nice, spec.Policy)
	if spec.Policy != PolicyOther {
		name += " prio " + strconv.Itoa(spec.Priority)
	}
	if spec.DutyPct < 100 {
		name += fmt.Sprintf(", %d%% of %d ms", spec.DutyPct, spec.PeriodMs)
	}
	g, err := startGroup(name, cmds, labels, true, false)
	if g != nil {
		g.asked, g.on = float64(spec.Procs)*float64(spec.DutyPct)/100, 1
	}
	return g, err
}

// spawner forks every child from one goroutine locked to its own OS
// thread. Pdeathsig fires when the thread that forked the child exits, not
// the process; in a program where goroutines lock threads and exit (RT
// workers do), a child forked from an ordinary thread could be killed when
// that thread is later taken by such a goroutine and destroyed. The
// spawner's thread is used by nothing else and lives while any child it
// forked is alive; it exits (taking its thread) when the last is reaped.
type spawner struct {
	mu   sync.Mutex
	reqs chan spawnReq // guarded by mu; nil while no spawner runs
	live int           // guarded by mu: children started or starting, not yet reaped
}

type spawnReq struct {
	cmd *exec.Cmd
	res chan error
}

var spawn spawner

// start forks cmd on the spawner thread. On success the caller must call
// release once the child is reaped.
func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	s.live++
	if s.reqs == nil {
		s.reqs = make(chan spawnReq)
		go spawnLoop(s.reqs)
	}
	reqs := s.reqs
	s.mu.Unlock()
	res := make(chan error, 1)
	reqs <- spawnReq{cmd, res}
	err := <-res
	if err != nil {
		s.release()
	}
	return err
}

func (s *spawner) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live--
	if s.live == 0 {
		close(s.reqs)
		s.reqs = nil
	}
}

func spawnLoop(reqs <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
	for r := range reqs {
		r.res <- r.cmd.Start()
	}
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent
// use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte // guarded by mu
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
