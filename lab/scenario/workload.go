package scenario

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/lab/erofs"
	"github.com/gowq/wq/lab/stats"
	"github.com/gowq/wq/lab/threadattr"
	"github.com/gowq/wq/lab/verity"
)

// record accumulates one row's measurements (or a warm-up's, discarded).
type record struct {
	lat    *stats.Samples // queue->start, ns
	clat   *stats.Samples // verity: read + verify round trip, ns
	items  int64
	missed int64
	bytes  int64
	onCPU  int64 // delayed: items that ran on the queueing CPU
	errs   int64
	err    error // first workload error
	active time.Duration

	// throughput: the back-to-back phase
	tputItems int64 // items
	tputNs    int64 // wall time, first Queue to the last item's run
	tputCPU   int64 // process CPU time (getrusage), ns
	mallocs   int64 // runtime.MemStats.Mallocs delta
}

func newRecord() *record {
	return &record{lat: stats.NewSamples(0), clat: stats.NewSamples(0)}
}

func (r *record) fail(err error) {
	r.errs++
	if r.err == nil {
		r.err = err
	}
}

func (r *record) merge(o *record) {
	r.lat.Merge(o.lat)
	r.clat.Merge(o.clat)
	r.items += o.items
	r.missed += o.missed
	r.bytes += o.bytes
	r.onCPU += o.onCPU
	r.errs += o.errs
	r.tputItems += o.tputItems
	r.tputNs += o.tputNs
	r.tputCPU += o.tputCPU
	r.mallocs += o.mallocs
	r.active += o.active
	if r.err == nil {
		r.err = o.err
	}
}

// rowRun is one row while its scenario runs.
type rowRun struct {
	def   rowDef
	run   runner // nil when skipped
	skip  string
	tasks []*task
	rng   *rand.Rand
	rec   *record
}

// workload is the scenario-specific part of a run.
type workload interface {
	// setup creates row r's tasks (with r.run.prepare).
	setup(r *rowRun)
	// slice measures row r for about d, adding to rec. It returns early
	// when ctx ends, and only once every item it queued has finished.
	slice(ctx context.Context, r *rowRun, d time.Duration, rec *record)
	// describe adds the workload's facts to info.
	describe(info *LoadInfo)
	// close releases the workload's resources.
	close()
}

// ---------------------------------------------------------------- verity

// verityWork is seed 000: a reader does random 4 KiB reads (O_DIRECT
// where the file system allows) and hands each block to the queue to be
// verified against the Merkle tree, waiting for the result.
type verityWork struct {
	img *verity.Image
	rd  *verity.Reader
}

func newVerity(p *plan) (*verityWork, error) {
	img, err := verity.Prepare(p.verityDir, p.veritySize)
	if err != nil {
		return nil, err
	}
	rd, err := img.OpenReader()
	if err != nil {
		return nil, err
	}
	return &verityWork{img: img, rd: rd}, nil
}

const verityTasks = 4

func (v *verityWork) setup(r *rowRun) {
	for range verityTasks {
		t := newTask(func(t *task) { t.err = v.img.Verify(t.blk, t.buf) }, signalDone)
		t.buf = verity.AlignedBuffer(verity.BlockSize)
		r.run.prepare(t)
		r.tasks = append(r.tasks, t)
	}
}

func (v *verityWork) slice(ctx context.Context, r *rowRun, d time.Duration, rec *record) {
	start := stats.Now()
	end := start + int64(d)
	blocks := v.rd.Blocks()
	for i := 0; ctx.Err() == nil; i++ {
		t0 := stats.Now()
		if t0 >= end {
			break
		}
		t := r.tasks[i%len(r.tasks)]
		t.blk = r.rng.Int64N(blocks)
		if err := v.rd.ReadBlock(t.blk, t.buf); err != nil {
			rec.fail(err)
			break
		}
		t.tq = stats.Now()
		if !r.run.queue(t) {
			rec.missed++
			continue
		}
		<-t.done
		rec.clat.Add(stats.Now() - t0)
		rec.lat.Add(t.lat)
		rec.items++
		rec.bytes += verity.BlockSize
		if t.err != nil {
			rec.fail(t.err)
		}
	}
	rec.active += time.Duration(stats.Now() - start)
}

func (v *verityWork) describe(info *LoadInfo) {
	direct := v.rd.Direct
	info.DirectIO = &direct
	info.Readers = 1
	info.DataBytes = v.img.Size()
	info.DataSource = v.img.Path()
}

func (v *verityWork) close() { v.rd.Close() }

// ----------------------------------------------------------------- erofs

// erofsWork is seeds 001 and 003: several readers each issue a read of a
// compressed cluster and sleep until its decompression is done. The read
// "completes" erofsIO later on a timer (the bio completion), and the
// completion queues the decompression as EROFS's endio queues
// z_erofs_decompressqueue_work: from a context that does not wait for it.
type erofsWork struct {
	c       *erofs.Corpus
	readers int
}

const (
	erofsIO           = 200 * time.Microsecond
	erofsTasksPerRead = 2
)

func newErofs(p *plan) (*erofsWork, error) {
	c, err := erofs.Prepare(p.erofsSrc, 0, p.erofsBytes)
	if err != nil {
		return nil, err
	}
	return &erofsWork{c: c, readers: min(16, 2*runtime.NumCPU())}, nil
}

func (e *erofsWork) setup(r *rowRun) {
	for range e.readers * erofsTasksPerRead {
		t := newTask(func(t *task) {
			_, t.err = e.c.Decompress(int(t.blk), t.out)
		}, signalDone)
		t.out = make([]byte, e.c.ClusterSize())
		run := r.run
		// The bio completion: stamp and queue, never wait.
		t.timer = time.AfterFunc(time.Hour, func() {
			t.tq = stats.Now()
			if !run.queue(t) {
				t.lat = -1
				signalDone(t)
			}
		})
		t.timer.Stop()
		r.run.prepare(t)
		r.tasks = append(r.tasks, t)
	}
}

func (e *erofsWork) slice(ctx context.Context, r *rowRun, d time.Duration, rec *record) {
	start := stats.Now()
	end := start + int64(d)
	recs := make([]*record, e.readers)
	var wg sync.WaitGroup
	for k := range e.readers {
		recs[k] = newRecord()
		tasks := r.tasks[k*erofsTasksPerRead : (k+1)*erofsTasksPerRead]
		rng := rand.New(rand.NewPCG(r.rng.Uint64(), uint64(k)))
		wg.Go(func() {
			rr := recs[k]
			n := e.c.Len()
			for i := 0; ctx.Err() == nil && stats.Now() < end; i++ {
				t := tasks[i%len(tasks)]
				t.blk = int64(rng.IntN(n))
				t.timer.Reset(erofsIO)
				<-t.done
				if t.lat < 0 {
					rr.missed++
					continue
				}
				rr.lat.Add(t.lat)
				rr.items++
				if t.err != nil {
					rr.fail(t.err)
				}
			}
		})
	}
	wg.Wait()
	for _, o := range recs {
		rec.merge(o)
	}
	rec.active += time.Duration(stats.Now() - start)
}

func (e *erofsWork) describe(info *LoadInfo) {
	info.Readers = e.readers
	info.DataBytes = e.c.RawBytes()
	info.DataSource = fmt.Sprintf("%s (%d files, %d clusters of %d KiB, LZ4 ratio %.2f)",
		e.c.Dir(), e.c.Files(), e.c.Len(), e.c.ClusterSize()>>10, e.c.Ratio())
}

func (e *erofsWork) close() {}

// ---------------------------------------------------------------- submit

// submitWork is seed 002: a submitter queues a small "submit" work item
// every submitPeriod (1 kHz) without waiting for it, from a ring of
// submitSlots items. A tick is counted as missed when every slot is still
// busy, or when the submitter itself woke more than a period late.
type submitWork struct {
	mu  sync.Mutex
	cur *record // the slice being measured; guarded by mu
	wg  sync.WaitGroup
}

const (
	submitPeriod = time.Millisecond
	submitSlots  = 16
	submitBytes  = 512
)

func (s *submitWork) setup(r *rowRun) {
	for range submitSlots {
		t := newTask(func(t *task) {
			sum := sha256.Sum256(t.buf)
			t.buf[0] ^= sum[0]
		}, s.completed)
		t.buf = make([]byte, submitBytes)
		r.run.prepare(t)
		r.tasks = append(r.tasks, t)
	}
}

func (s *submitWork) completed(t *task) {
	s.mu.Lock()
	if t.lat >= 0 {
		s.cur.lat.Add(t.lat)
		s.cur.items++
	}
	s.mu.Unlock()
	t.busy.Store(false)
	s.wg.Done()
}

func (s *submitWork) slice(ctx context.Context, r *rowRun, d time.Duration, rec *record) {
	s.mu.Lock()
	s.cur = rec
	s.mu.Unlock()
	start := time.Now()
	next := start
	for ctx.Err() == nil {
		next = next.Add(submitPeriod)
		if next.Sub(start) > d {
			break
		}
		time.Sleep(time.Until(next))
		if late := time.Since(next); late > submitPeriod {
			// The submitter itself was held off the CPU: the ticks it
			// slept through are missed; resynchronise instead of firing
			// a burst of catch-up ticks.
			skip := late.Truncate(submitPeriod)
			next = next.Add(skip)
			rec.missed += int64(skip / submitPeriod)
		}
		i := slices.IndexFunc(r.tasks, func(t *task) bool { return !t.busy.Load() })
		if i < 0 {
			rec.missed++
			continue
		}
		t := r.tasks[i]
		t.busy.Store(true)
		s.wg.Add(1)
		t.tq = stats.Now()
		if !r.run.queue(t) {
			t.busy.Store(false)
			s.wg.Done()
			rec.missed++
		}
	}
	s.wg.Wait()
	rec.active += time.Since(start)
}

func (s *submitWork) describe(info *LoadInfo) { info.PeriodNs = int64(submitPeriod) }
func (s *submitWork) close()                  {}

// --------------------------------------------------------------- delayed

// delayedWork is seed 004: a thread pinned to the hogged CPU queues a
// delayed work item (delayedDelay) and waits for it to run, again and
// again. Latency is the start time minus the queue time minus the delay:
// how late the item started after its timer.
type delayedWork struct {
	cpu    int
	nice   int
	reqs   chan func()
	ready  chan string
	queuer string
}

const (
	delayedDelay = time.Millisecond
	delayedTasks = 2
)

// newDelayed starts the pinned queueing thread: affinity to cpu and, when
// permitted, nice -20 so that it gets its share of the hogged CPU. The
// thread is locked and dies with its goroutine (close).
func newDelayed(cpu int, nice20 bool) *delayedWork {
	w := &delayedWork{cpu: cpu, reqs: make(chan func()), ready: make(chan string, 1)}
	err := labsys.GoThread(func() {
		note := fmt.Sprintf("pinned to cpu%d", cpu)
		if err := labsys.SetThreadAffinity([]int{cpu}); err != nil {
			note = fmt.Sprintf("not pinned (%v)", err)
		}
		if nice20 {
			if err := labsys.SetThreadAttr(labsys.ThreadAttr{Policy: labsys.ThreadNormal, Nice: -20}); err != nil {
				note += fmt.Sprintf(" (nice -20 refused: %v)", err)
			}
		}
		// What the thread runs at, read back: not nice -20 when refused,
		// and the inherited nice of a niced lab.
		if a, err := threadattr.Self(); err == nil {
			note += ", " + a.String()
			w.nice = a.Nice
		} else {
			note += fmt.Sprintf(", class not read back (%v)", err)
		}
		w.ready <- note
		for fn := range w.reqs {
			fn()
		}
	})
	if err != nil {
		// No thread (a thread limit is near): queue from the caller's
		// goroutine, unpinned.
		go func() {
			for fn := range w.reqs {
				fn()
			}
		}()
		w.ready <- fmt.Sprintf("not pinned (%v)", err)
	}
	w.queuer = <-w.ready
	return w
}

func (w *delayedWork) setup(r *rowRun) {
	for range delayedTasks {
		t := newTask(nil, signalDone)
		t.delay = int64(delayedDelay)
		t.wantCPU = true
		r.run.prepare(t)
		r.tasks = append(r.tasks, t)
	}
}

func (w *delayedWork) slice(ctx context.Context, r *rowRun, d time.Duration, rec *record) {
	done := make(chan struct{})
	w.reqs <- func() {
		defer close(done)
		start := stats.Now()
		end := start + int64(d)
		for i := 0; ctx.Err() == nil && stats.Now() < end; i++ {
			t := r.tasks[i%len(r.tasks)]
			t.tq = stats.Now()
			if !r.run.queueDelayed(t, delayedDelay) {
				rec.missed++
				continue
			}
			<-t.done
			if t.lat < 0 {
				rec.missed++
				continue
			}
			rec.lat.Add(t.lat)
			rec.items++
			if t.cpu == w.cpu {
				rec.onCPU++
			}
		}
		rec.active += time.Duration(stats.Now() - start)
	}
	<-done
}

func (w *delayedWork) describe(info *LoadInfo) {
	cpu := w.cpu
	info.HogCPU = &cpu
	info.Queuer = w.queuer
	info.DelayNs = int64(delayedDelay)
}

func (w *delayedWork) close() { close(w.reqs) }

// hogCPU returns the CPU seed 004's hog is pinned to: CPU 0 when this
// process may use it, else the first CPU it may use.
func hogCPU() int {
	cpus := wq.OnlineCPUs()
	if len(cpus) == 0 || slices.Contains(cpus, 0) {
		return 0
	}
	return cpus[0]
}
