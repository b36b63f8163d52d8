package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/gowq/wq/lab/driver"
	"github.com/gowq/wq/lab/erofs"
	"github.com/gowq/wq/lab/scenario"
	"github.com/gowq/wq/lab/stats"
)

// Names of the experiment: random reads, and sequential reads.
const (
	Name    = "e2e"
	NameSeq = "e2e-seq"
)

// Defaults of Options.
const (
	DefaultPass        = time.Second
	DefaultRounds      = 3
	DefaultCorpusBytes = 32 << 20
)

// ErrInvalidOption is wrapped by Options.Validate's errors.
var ErrInvalidOption = driver.InvalidOption("e2e")

// Options configure Run. The zero value is the `wqlab --scenario e2e`
// run.
type Options struct {
	Sequential bool          // sequential reads (e2e-seq) instead of random
	Pass       time.Duration // one fio pass per row and round (default 1 s)
	Rounds     int           // interleaving rounds per load (default 3)
	// Loads are the tables' loads (default none, burners, and seed 004's
	// two nice -20 hogs pinned to cpu0: driver.LoadHog). driver.LoadHogs,
	// a hog on every CPU, starves fio itself (nice 0) for seconds.
	Loads       []driver.LoadKind
	CorpusBytes int64     // size of the file fio reads (default 32 MiB)
	Source      string    // corpus source tree (default $GOROOT/src)
	Base        string    // session base directory (default DefaultBase)
	Configs     []string  // row IDs to measure (default all)
	Log         io.Writer // progress lines; nil discards them
}

func (o *Options) defaults() {
	if o.Pass == 0 {
		o.Pass = DefaultPass
	}
	if o.Rounds == 0 {
		o.Rounds = DefaultRounds
	}
	if len(o.Loads) == 0 {
		o.Loads = []driver.LoadKind{driver.LoadNone, driver.LoadBurners, driver.LoadHog}
	}
	if o.CorpusBytes == 0 {
		o.CorpusBytes = DefaultCorpusBytes
	}
}

// RowIDs are the rows in table order: the Go rows, then the kernel's.
func RowIDs() []string { return append(append([]string(nil), ExecIDs...), RowKernel) }

// Validate checks the options after defaults; errors wrap
// ErrInvalidOption.
func (o Options) Validate() error {
	o.defaults()
	if o.Pass < 100*time.Millisecond || o.Rounds < 1 || o.CorpusBytes < 64<<10 {
		return fmt.Errorf("%w: pass %v (at least 100ms), rounds %d (at least 1), corpus %d bytes (at least 64 KiB)",
			ErrInvalidOption, o.Pass, o.Rounds, o.CorpusBytes)
	}
	for _, l := range o.Loads {
		switch l {
		case driver.LoadNone, driver.LoadBurners, driver.LoadHog, driver.LoadHogs:
		default:
			return fmt.Errorf("%w: load %q (want none, burners, hog or hogs)", ErrInvalidOption, l)
		}
	}
	return driver.CheckConfigs(o.Configs, RowIDs(), ErrInvalidOption)
}

// Experiment returns the experiment as a driver.Experiment: named e2e,
// or e2e-seq with o.Sequential.
func Experiment(o Options) driver.Experiment {
	name := Name
	if o.Sequential {
		name = NameSeq
	}
	return driver.Func[*Result]{ID: name, Rows: RowIDs(), Check: o.Validate,
		Measure: func(ctx context.Context) (*Result, error) { return Run(ctx, o) }}
}

var rowLabels = map[string]string{
	ExecInline:    "inline (go-fuse handler)",
	ExecAnts:      "ants",
	ExecDefault:   "gowq default queue",
	ExecRTPerCPU:  "gowq RT per-CPU",
	ExecRTUnbound: "gowq RT unbound strict",
	ExecKthread:   "kthread per-CPU FIFO-low",
	RowKernel:     "kernel EROFS (LZ4HC, loop)",
}

// row is one row while the run measures it.
type row struct {
	id     string
	skip   string
	file   string
	ex     Executor
	total  map[driver.LoadKind]*stats.Samples
	rounds map[driver.LoadKind][]*stats.Samples
	bytes  map[driver.LoadKind]int64
	runNs  map[driver.LoadKind]int64
}

// Run measures: it cleans what killed runs left (Cleanup), builds the
// corpus file, its EROFS image and its container, mounts every row,
// reads each row's file back whole against the source (a row whose
// bytes differ is skipped), then runs fio's pass on every row in
// interleaved rounds under each load. Rows that cannot run are skipped
// with the reason: not root, no /dev/fuse, no fio, no mkfs.erofs, no loop
// device, an EROFS without LZ4, no SCHED_FIFO.
//
// Every exit unmounts and releases: the normal end, a failed row, a
// panic in Run's goroutine, ctx's end, and SIGINT, SIGTERM, SIGHUP,
// SIGQUIT and SIGPIPE, which Run catches while it runs and turns into
// the end of its context. A SIGKILL leaves the mounts to the next start's
// Cleanup. It blocks for the run: about rows x loads x rounds x (Pass +
// 0.15 s), 1.5 min with the defaults. It returns ctx's error (with no
// Result) when ctx ends or a signal arrives.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	o.defaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	defer stop()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "e2e: "+format+"\n", args...)
		}
	}
	name := Name
	if o.Sequential {
		name = NameSeq
	}
	res = &Result{Name: name, Started: time.Now(), Machine: scenario.DetectMachine(),
		Settings:      Settings{Sequential: o.Sequential, BlockBytes: 4096, PassNs: int64(o.Pass), Rounds: o.Rounds},
		Decompression: kernelDecompression(o.Sequential, "")}
	// Only root can have left mounts, and only root can clean them.
	if os.Geteuid() != 0 {
		res.CleanupNotRun = "not root: only root can find and unmount what a killed run left"
	} else if res.Cleanup, err = Cleanup(o.Base); err != nil {
		res.CleanupNotRun = err.Error()
		logf("cleanup: %v", err)
	}
	if !res.Cleanup.Empty() {
		logf("at the start:\n%s", res.Cleanup.String())
	}

	rows := make([]*row, 0, len(RowIDs()))
	for _, id := range RowIDs() {
		if driver.Wants(o.Configs, id) {
			rows = append(rows, &row{id: id, total: map[driver.LoadKind]*stats.Samples{},
				rounds: map[driver.LoadKind][]*stats.Samples{}, bytes: map[driver.LoadKind]int64{}, runNs: map[driver.LoadKind]int64{}})
		}
	}
	common := commonSkip()
	for _, r := range rows {
		r.skip = common
		if r.skip == "" && r.id != RowKernel {
			if _, err := os.Stat("/dev/fuse"); err != nil {
				r.skip = "no /dev/fuse"
			}
		}
		if r.skip == "" && r.id == RowKernel {
			r.skip = kernelSkip()
		}
	}

	if common == "" {
		sess, err := NewSession(ctx, o.Base)
		if err != nil {
			return nil, err
		}
		// Deferred calls run on a panic of this goroutine too.
		defer func() {
			cerr := sess.Close()
			for _, r := range rows {
				if r.ex != nil {
					r.ex.Close()
				}
			}
			left := leftovers(sess.Dir)
			if res != nil {
				res.Leftover = left
			}
			// Also when the run ends by a signal (no Result to show it):
			// a mount's file still open elsewhere keeps the lazily
			// unmounted file system, and so its autoclear loop device,
			// until that holder closes it.
			if len(left) > 0 {
				logf("LEFT AFTER CLOSE (a file of the mount is still open elsewhere; an autoclear loop device goes when it is closed): %s",
					strings.Join(left, ", "))
			}
			if cerr != nil && err == nil {
				err = cerr
			}
		}()
		if err := prepare(sess, o, rows, res, logf); err != nil {
			return nil, err
		}
		loads := &driver.Loads{Logf: logf}
		defer loads.Close()
		for _, kind := range o.Loads {
			if ctx.Err() != nil {
				break
			}
			loads.Ensure(kind, 300*time.Millisecond)
			logf("load %s: %s", kind, loads.Name())
			t0 := time.Now()
			probe := loads.Probe()
			n := driver.Interleave(sess.Context(), len(rows), o.Rounds, func(i, round int) bool {
				r := rows[i]
				if r.skip != "" {
					return false
				}
				p, err := RunFio(sess.Context(), sess.Dir, Job{File: r.file, Sequential: o.Sequential, Runtime: o.Pass})
				if err != nil {
					if sess.Context().Err() == nil {
						r.skip = "fio failed: " + err.Error()
						logf("%s: %s", r.id, r.skip)
					}
					return false
				}
				if r.total[kind] == nil {
					r.total[kind] = stats.NewSamples(0)
				}
				r.total[kind].Merge(p.Clat)
				for len(r.rounds[kind]) < round {
					r.rounds[kind] = append(r.rounds[kind], nil)
				}
				r.rounds[kind] = append(r.rounds[kind], p.Clat)
				r.bytes[kind] += p.Bytes
				r.runNs[kind] += int64(p.Runtime)
				return true
			})
			facts := loads.Read(probe)
			logf("load %s: %d rounds in %v", kind, n, time.Since(t0).Round(time.Millisecond))
			res.Tables = append(res.Tables, buildTable(kind, facts, rows, n))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.Settings.SyncDecompress = erofsSyncDecompress(res.Settings.Loop)
		res.Decompression = kernelDecompression(o.Sequential, res.Settings.SyncDecompress)
	} else {
		for _, kind := range o.Loads {
			res.Tables = append(res.Tables, buildTable(kind, driver.Facts{Antagonist: "not run"}, rows, 0))
		}
	}
	res.fio = map[string]map[string]*stats.Samples{}
	for _, t := range res.Tables {
		m := map[string]*stats.Samples{}
		for _, r := range rows {
			if s := r.total[driver.LoadKind(t.Load)]; s != nil {
				m[r.id] = s
			}
		}
		res.fio[t.Load] = m
	}
	res.Finished = time.Now()
	res.Goals = goals(res)
	return res, nil
}

// commonSkip is the reason no row can run, or "".
func commonSkip() string {
	if os.Geteuid() != 0 {
		return "not root (mounts and loop devices need root)"
	}
	if _, err := exec.LookPath("fio"); err != nil {
		return "no fio (apt-get install fio)"
	}
	return ""
}

// kernelSkip is why the kernel row cannot run, or "" (the EROFS LZ4
// check happens at the mount).
func kernelSkip() string {
	if _, err := exec.LookPath("mkfs.erofs"); err != nil {
		return "no mkfs.erofs (apt-get install erofs-utils)"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no loop device (/dev/loop-control)"
	}
	fsys, _ := os.ReadFile("/proc/filesystems")
	if !bytes.Contains(fsys, []byte("\terofs")) {
		return "no EROFS in this kernel"
	}
	return ""
}

// prepare builds the data and mounts every row that may run, each read
// back whole against the source.
func prepare(sess *Session, o Options, rows []*row, res *Result, logf func(string, ...any)) error {
	src := o.Source
	if src == "" {
		d, err := erofs.DefaultSourceDir()
		if err != nil {
			return err
		}
		src = d
	}
	staged := filepath.Join(sess.Dir, "src")
	file, err := StageCorpus(staged, src, o.CorpusBytes)
	if err != nil {
		return err
	}
	want, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	res.Settings.CorpusBytes = int64(len(want))
	res.Settings.Source = src
	c, err := BuildContainer(staged)
	if err != nil {
		return err
	}
	res.Settings.ContainerBytes = c.StoredBytes()
	check := func(r *row, mnt string) {
		r.file = filepath.Join(mnt, CorpusFile)
		got, err := os.ReadFile(r.file)
		switch {
		case err != nil:
			r.skip = "read back failed: " + err.Error()
		case !bytes.Equal(got, want):
			r.skip = fmt.Sprintf("read back differs from the source (%d of %d bytes)", len(got), len(want))
		}
		// A read cut short by the run's end (EIO from the aborted
		// connection) is not the row's fault.
		if r.skip != "" && sess.Context().Err() == nil {
			logf("%s: %s", r.id, r.skip)
		}
	}
	for _, r := range rows {
		// Once the run is ending (a signal), mount nothing more.
		if err := sess.Context().Err(); err != nil {
			return err
		}
		if r.skip != "" {
			continue
		}
		if r.id == RowKernel {
			img := filepath.Join(sess.Dir, "image.erofs")
			if err := MakeEROFS(sess.Context(), img, staged); err != nil {
				r.skip = err.Error()
				continue
			}
			if st, err := os.Stat(img); err == nil {
				res.Settings.ImageBytes = st.Size()
			}
			mnt, loop, err := sess.MountEROFS(r.id, img)
			if err != nil {
				r.skip = "EROFS with LZ4 could not be mounted: " + err.Error()
				continue
			}
			res.Settings.Loop = loop
			check(r, mnt)
			continue
		}
		ex, err := NewExecutor(r.id, runtime.GOMAXPROCS(0))
		if err != nil {
			r.skip = err.Error()
			if errors.Is(err, ErrPermission) {
				r.skip = "no SCHED_FIFO: " + err.Error()
			}
			continue
		}
		r.ex = ex
		mnt, err := sess.MountFUSE(r.id, c, ex)
		if err != nil {
			r.skip = err.Error()
			continue
		}
		check(r, mnt)
	}
	return sess.Context().Err()
}

// leftovers lists mounts and loop devices still under dir.
func leftovers(dir string) []string {
	out := mountsUnder(dir)
	for _, l := range loopsUnder([]string{dir}) {
		out = append(out, l[0]+" bound to "+l[1])
	}
	return out
}

// erofsSyncDecompress reads the sync_decompress of the EROFS mounted from
// loop (/sys/fs/erofs/loopN/sync_decompress): "0 (auto)", "1 (force_on)"
// or "2 (force_off)", or "" when it cannot be read.
func erofsSyncDecompress(loop string) string {
	if loop == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/erofs", filepath.Base(loop), "sync_decompress"))
	if err != nil {
		return ""
	}
	v := strings.TrimSpace(string(b))
	switch v {
	case "0":
		return v + " (auto)"
	case "1":
		return v + " (force_on)"
	case "2":
		return v + " (force_off)"
	}
	return v
}

// kernelDecompression says where this run's kernel row decompressed, from
// its mount's sync_decompress after the last pass (mode, as
// erofsSyncDecompress gives it) and the reads' kind, following
// z_erofs_decompress_kickoff (fs/erofs/zdata.c): EROFS starts in auto,
// where readahead decompresses where its bio completes, and switches to
// force_on the first time a bio completes in atomic context and its
// decompression is queued on the erofs_worker workqueue (WQ_UNBOUND |
// WQ_HIGHPRI); under force_on, reads of up to max_sync_decompress_pages
// (3) pages decompress synchronously in the reader.
func kernelDecompression(seq bool, mode string) string {
	const where = "where its bio completes: queued on the erofs_worker workqueue (unbound, WQ_HIGHPRI kworkers; " +
		"per-CPU kthreads with CONFIG_EROFS_FS_PCPU_KTHREAD) when that is atomic context, else inline in the " +
		"completing task (the loop device's kworker)"
	const src = " (read from this run's mount after its last pass; the rules are z_erofs_decompress_kickoff's, fs/erofs/zdata.c)"
	switch {
	case mode == "":
		return "not measured: the kernel row did not run, or its sync_decompress could not be read"
	case strings.HasPrefix(mode, "1"):
		s := "sync_decompress " + mode + ": this mount switched from auto when one of its bios completed in " +
			"atomic context, and that bio's decompression ran on the erofs_worker workqueue; since then a read of up " +
			"to max_sync_decompress_pages (3) pages decompresses synchronously in the reading task (fio)"
		if seq {
			return s + "; sequential readahead reads more than 3 pages, so most of these reads decompress " + where + src
		}
		return s + ", as fio's 4 KiB random reads are; larger readahead decompresses " + where + src
	case strings.HasPrefix(mode, "0"):
		return "sync_decompress " + mode + ": no bio of this mount completed in atomic context, so its readahead " +
			"(the 4 KiB reads too) decompressed inline in the task that completed the bio (the loop device's kworker), " +
			"not in fio" + src
	}
	return "sync_decompress " + mode + ": readahead decompresses " + where + src
}
