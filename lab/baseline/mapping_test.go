package baseline

// The mapping table of docs/go-users.md, checked row by row: each test
// runs the behaviour a row claims on the peer (pond, ants, errgroup) and
// on the gowq call the row maps it to, side by side. A row whose peer
// behaves otherwise than the table says fails here.

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alitto/pond/v2"
	"github.com/panjf2000/ants/v2"
	"golang.org/x/sync/errgroup"

	"github.com/gowq/wq"
)

// waitedFor is how long a call must stay blocked to count as waiting.
const waitedFor = 50 * time.Millisecond

// blocks reports whether f is still running after waitedFor, then
// releases the gate and waits for f (up to a generous bound).
func blocks(t *testing.T, f func(), release func()) bool {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	blocked := false
	select {
	case <-done:
	case <-time.After(waitedFor):
		blocked = true
	}
	release()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the blocked call did not return once room was made")
	}
	return blocked
}

// on returns a task that waits until c is closed (c is read now, so that
// reusing the caller's variable for the next gate is no data race).
func on(c chan struct{}) func() { return func() { <-c } }

func mappingQueue(t *testing.T, name string, maxActive, maxPending int) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, wq.Unbound, maxActive, wq.WithMaxPending(maxPending))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Destroy)
	return q
}

// Row "pond NewPool(m, WithQueueSize(n)) + TrySubmit | q.Go with
// WithMaxPending(n): ErrQueueFull": both hold m running + n waiting, and
// refuse the next without waiting.
func TestMappingPondTrySubmitIsGo(t *testing.T) {
	const m, n = 2, 3
	gate := make(chan struct{})
	p := pond.NewPool(m, pond.WithQueueSize(n))
	defer p.StopAndWait()
	defer close(gate)
	pondTook := 0
	for range m + n + 2 {
		if _, ok := p.TrySubmit(on(gate)); ok {
			pondTook++
		}
	}
	q := mappingQueue(t, "map-trysubmit", m, n)
	wqTook := 0
	for range m + n + 2 {
		switch err := q.Go(on(gate)); {
		case err == nil:
			wqTook++
		case !errors.Is(err, wq.ErrQueueFull):
			t.Fatalf("Go = %v", err)
		}
	}
	if pondTook != m+n || wqTook != m+n {
		t.Errorf("idle pool/queue of %d + %d took pond %d, gowq %d; the table says both take m+n", m, n, pondTook, wqTook)
	}
}

// Row "pond Submit (blocking, WithQueueSize) | wq.Submit / q.GoContext":
// on a full pool both wait for room, then run the task.
func TestMappingPondBlockingSubmitIsSubmit(t *testing.T) {
	gate := make(chan struct{})
	p := pond.NewPool(1, pond.WithQueueSize(1))
	p.Submit(on(gate))
	p.Submit(on(gate))
	var pondRan atomic.Bool
	var task pond.Task
	pondBlocked := blocks(t, func() { task = p.Submit(func() { pondRan.Store(true) }) }, func() { close(gate) })
	if err := task.Wait(); err != nil || !pondRan.Load() {
		t.Fatalf("pond: task err %v, ran %v", err, pondRan.Load())
	}
	p.StopAndWait()

	gate = make(chan struct{})
	q := mappingQueue(t, "map-submit", 1, 1)
	q.Go(on(gate))
	q.Go(on(gate))
	ctx := context.Background()
	var f *wq.Future[int]
	wqBlocked := blocks(t, func() { f = wq.Submit(q, ctx, func(context.Context) (int, error) { return 1, nil }) }, func() { close(gate) })
	if v, err := f.Wait(ctx); err != nil || v != 1 {
		t.Fatalf("gowq: Submit = %v, %v", v, err)
	}
	if !pondBlocked || !wqBlocked {
		t.Errorf("on a full pool: pond's Submit waited %v, wq.Submit waited %v; the table says both wait", pondBlocked, wqBlocked)
	}
	// pond's Go waits too (its nonBlocking default is false): GoContext.
	gate = make(chan struct{})
	p = pond.NewPool(1, pond.WithQueueSize(1))
	defer p.StopAndWait()
	p.Go(on(gate))
	p.Go(on(gate))
	if !blocks(t, func() { _ = p.Go(func() {}) }, func() { close(gate) }) {
		t.Error("pond's Go on a full queue did not wait; the table maps it to GoContext")
	}
}

// Row "pond Stop() / StopAndWait() | q.Destroy() / DestroyContext": both
// run the queued tasks before they return.
func TestMappingPondStopRunsQueuedTasks(t *testing.T) {
	const tasks = 50
	var pondRan, wqRan atomic.Int64
	p := pond.NewPool(1)
	for range tasks {
		p.Go(func() { time.Sleep(100 * time.Microsecond); pondRan.Add(1) })
	}
	if err := p.Stop().Wait(); err != nil {
		t.Fatal(err)
	}
	q, err := wq.Alloc("map-stop", wq.Unbound, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range tasks {
		q.Go(func() { time.Sleep(100 * time.Microsecond); wqRan.Add(1) })
	}
	if err := q.DestroyContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pondRan.Load() != tasks || wqRan.Load() != tasks {
		t.Errorf("queued tasks run by Stop: pond %d, gowq Destroy %d, of %d", pondRan.Load(), wqRan.Load(), tasks)
	}
}

// Rows "ants WithNonblocking(true) | q.Go with MaxPending: ErrQueueFull"
// and "ants blocking Submit | q.GoContext": ants refuses (nonblocking) or
// waits (blocking) once its m workers are busy; gowq does the same once m
// run and n wait (n >= 1: WithMaxPending(0) is unbounded).
func TestMappingAntsModes(t *testing.T) {
	gate := make(chan struct{})
	nb, err := ants.NewPool(1, ants.WithNonblocking(true))
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Release()
	if err := nb.Submit(on(gate)); err != nil {
		t.Fatal(err)
	}
	antsErr := nb.Submit(func() {})
	q := mappingQueue(t, "map-ants", 1, 1)
	q.Go(on(gate))
	q.Go(on(gate))
	wqErr := q.Go(func() {})
	if !errors.Is(antsErr, ants.ErrPoolOverload) || !errors.Is(wqErr, wq.ErrQueueFull) {
		t.Errorf("busy pool: ants nonblocking Submit = %v, gowq Go = %v; the table says ErrPoolOverload and ErrQueueFull", antsErr, wqErr)
	}
	close(gate)

	gate = make(chan struct{})
	bl, err := ants.NewPool(1)
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Release()
	bl.Submit(on(gate))
	antsBlocked := blocks(t, func() { _ = bl.Submit(func() {}) }, func() { close(gate) })
	gate = make(chan struct{})
	q.Flush()
	q.Go(on(gate))
	q.Go(on(gate))
	wqBlocked := blocks(t, func() { _ = q.GoContext(context.Background(), func(context.Context) {}) }, func() { close(gate) })
	if !antsBlocked || !wqBlocked {
		t.Errorf("busy pool: ants blocking Submit waited %v, gowq GoContext waited %v; the table says both wait", antsBlocked, wqBlocked)
	}
}

// Rows "errgroup g.Go, g.TryGo, g.SetLimit, g.Wait | the same names" and
// "errgroup.WithContext | q.NewGroup": the first error is Wait's and
// cancels the context; TryGo is refused at the limit.
func TestMappingErrgroup(t *testing.T) {
	first := errors.New("first")
	eg, ectx := errgroup.WithContext(context.Background())
	q, err := wq.Alloc("map-errgroup", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	g, gctx := q.NewGroup(context.Background())
	eg.SetLimit(1)
	g.SetLimit(1)
	gate := make(chan struct{})
	eg.Go(func() error { <-gate; return first })
	g.Go(func(context.Context) error { <-gate; return first })
	egTry := eg.TryGo(func() error { return nil })
	gTry := g.TryGo(func(context.Context) error { return nil })
	if egTry || gTry {
		t.Errorf("TryGo at the limit: errgroup %v, gowq %v; want false, false", egTry, gTry)
	}
	close(gate)
	eg.Go(func() error { <-ectx.Done(); return errors.New("second") })
	g.Go(func(ctx context.Context) error { <-ctx.Done(); return errors.New("second") })
	egErr, gErr := eg.Wait(), g.Wait()
	if egErr != first || gErr != first {
		t.Errorf("Wait: errgroup %v, gowq %v; want the first error from both", egErr, gErr)
	}
	if ectx.Err() == nil || gctx.Err() == nil {
		t.Error("the first error did not cancel both contexts")
	}
}

// Row "pond ErrPanic | *wq.PanicError", and the note that errgroup lets a
// panic crash the program: pond's task and gowq's Wait return the panic
// as an error; errgroup's panic ends the process (checked in a child).
func TestMappingPanics(t *testing.T) {
	if os.Getenv("GOWQ_MAPPING_ERRGROUP_PANIC") == "1" {
		var g errgroup.Group
		g.Go(func() error { panic("boom") })
		_ = g.Wait()
		// errgroup's deferred done releases Wait while the panic is still
		// unwinding; the panic ends the process within that time.
		time.Sleep(10 * time.Second)
		os.Exit(0) // not reached when errgroup lets the panic through
	}
	p := pond.NewPool(1)
	defer p.StopAndWait()
	pondErr := p.Submit(func() { panic("boom") }).Wait()
	q, err := wq.Alloc("map-panics", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	g, _ := q.NewGroup(context.Background())
	g.Go(func(context.Context) error { panic("boom") })
	var pe *wq.PanicError
	if wqErr := g.Wait(); !errors.As(wqErr, &pe) || !errors.Is(pondErr, pond.ErrPanic) {
		t.Errorf("panic: pond %v, gowq %v; want pond.ErrPanic and *wq.PanicError", pondErr, wqErr)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMappingPanics$")
	cmd.Env = append(os.Environ(), "GOWQ_MAPPING_ERRGROUP_PANIC=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "panic: boom") {
		t.Errorf("errgroup's panic did not end the child process (err %v):\n%s", err, out)
	}
}
