package baseline

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const workers = 4

type panicCounter interface {
	Executor
	Panics() uint64
}

// executors returns a constructor for every executor of the package.
func executors() []struct {
	name string
	make func(t testing.TB) panicCounter
} {
	return []struct {
		name string
		make func(t testing.TB) panicCounter
	}{
		{"go", func(t testing.TB) panicCounter { return NewGoStmt() }},
		{"chan", func(t testing.TB) panicCounter {
			p, err := NewChanPool(workers, 16)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"chan-unbuffered", func(t testing.TB) panicCounter {
			p, err := NewChanPool(workers, 0)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"ants", func(t testing.TB) panicCounter {
			p, err := NewAnts(workers)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"pond", func(t testing.TB) panicCounter {
			p, err := NewPond(workers)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
	}
}

// forEach runs test once per executor, checking for leaked goroutines after
// the executor is closed.
func forEach(t *testing.T, test func(t *testing.T, e panicCounter)) {
	for _, tc := range executors() {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			e := tc.make(t)
			defer e.Close()
			test(t, e)
		})
	}
}

func TestEveryItemRunsExactlyOnce(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		const n = 2000
		var runs [n]atomic.Int32
		// Submit from several goroutines at once.
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := g; i < n; i += 4 {
					if err := e.Submit(func() { runs[i].Add(1) }); err != nil {
						t.Errorf("Submit(%d): %v", i, err)
					}
				}
			})
		}
		wg.Wait()
		e.Close() // must wait for all of them
		for i := range runs {
			if got := runs[i].Load(); got != 1 {
				t.Fatalf("item %d ran %d times, want 1", i, got)
			}
		}
		if e.Panics() != 0 {
			t.Fatalf("Panics %d without a panic", e.Panics())
		}
	})
}

func TestCloseWaitsForRunningAndQueuedItems(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		release := make(chan struct{})
		var started, finished atomic.Int32
		// Fill every worker with a blocked item, and queue more behind them
		// where the executor has a queue.
		const n = workers
		for range n {
			if err := e.Submit(func() {
				started.Add(1)
				<-release
				finished.Add(1)
			}); err != nil {
				t.Fatal(err)
			}
		}
		closed := make(chan struct{})
		go func() {
			e.Close()
			close(closed)
		}()
		// Close cannot return while items are blocked. (If it wrongly did,
		// this check may or may not see it; it can never fail wrongly.)
		for range 100 {
			runtime.Gosched()
		}
		select {
		case <-closed:
			t.Fatalf("Close returned with %d of %d items unfinished", n-finished.Load(), n)
		default:
		}
		close(release)
		<-closed
		if got := finished.Load(); got != n {
			t.Fatalf("%d of %d items finished when Close returned", got, n)
		}
	})
}

func TestSubmitAfterClose(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		ran := make(chan struct{}, 1)
		if err := e.Submit(func() { ran <- struct{}{} }); err != nil {
			t.Fatal(err)
		}
		e.Close()
		if len(ran) != 1 {
			t.Fatal("accepted item did not run before Close returned")
		}
		var late atomic.Bool
		for range 3 {
			if err := e.Submit(func() { late.Store(true) }); !errors.Is(err, ErrClosed) {
				t.Fatalf("Submit after Close = %v, want ErrClosed", err)
			}
		}
		e.Close() // a second Close is harmless
		if late.Load() {
			t.Fatal("an item submitted after Close ran")
		}
		if err := e.Submit(nil); !errors.Is(err, ErrNilFunc) {
			t.Fatalf("Submit(nil) after Close = %v, want ErrNilFunc", err)
		}
	})
}

func TestSubmitNil(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		if err := e.Submit(nil); !errors.Is(err, ErrNilFunc) {
			t.Fatalf("Submit(nil) = %v, want ErrNilFunc", err)
		}
	})
}

func TestSubmitRacingClose(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		var accepted, ran atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Go(func() {
				<-start
				for {
					err := e.Submit(func() { ran.Add(1) })
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("Submit: %v", err)
						return
					}
					accepted.Add(1)
				}
			})
		}
		close(start)
		for accepted.Load() < 100 {
			runtime.Gosched()
		}
		var closers sync.WaitGroup
		for range 2 { // two Closes at once
			closers.Go(e.Close)
		}
		closers.Wait()
		n := ran.Load() // every accepted item has run once Close returns
		wg.Wait()
		if n != accepted.Load() || ran.Load() != n {
			t.Fatalf("accepted %d items, %d ran before Close returned, %d in the end", accepted.Load(), n, ran.Load())
		}
	})
}

func TestPanickingItemsDoNotStallTheExecutor(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		const bad, good = 3 * workers, 200
		var ran atomic.Int32
		for i := range bad + good {
			fn := func() { ran.Add(1) }
			if i%5 == 0 && i/5 < bad {
				fn = func() { panic("boom") }
			}
			if err := e.Submit(fn); err != nil {
				t.Fatal(err)
			}
		}
		e.Close()
		if got := ran.Load(); got != good {
			t.Fatalf("%d of %d good items ran", got, good)
		}
		// ants lowers its running count before it calls its PanicHandler
		// (ants v2.12.1 worker.go), so Close can return just before the
		// last panic is counted: wait for it, not for a time.
		for deadline := time.Now().Add(30 * time.Second); e.Panics() < bad && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if got := e.Panics(); got != bad {
			t.Fatalf("Panics = %d, want %d", got, bad)
		}
	})
}

func TestGoexitingItemsDoNotStallTheExecutor(t *testing.T) {
	forEach(t, func(t *testing.T, e panicCounter) {
		const bad, good = 3 * workers, 200
		var ran atomic.Int32
		for i := range bad + good {
			fn := func() { ran.Add(1) }
			if i%5 == 0 && i/5 < bad {
				fn = runtime.Goexit
			}
			if err := e.Submit(fn); err != nil {
				t.Fatal(err)
			}
		}
		e.Close()
		if got := ran.Load(); got != good {
			t.Fatalf("%d of %d good items ran", got, good)
		}
	})
}

func TestNew(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, name := range Names() {
		e, err := New(name, 2)
		if err != nil {
			t.Fatalf("New(%q): %v", name, err)
		}
		if e.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, e.Name())
		}
		done := make(chan struct{})
		if err := e.Submit(func() { close(done) }); err != nil {
			t.Fatal(err)
		}
		<-done
		e.Close()
		if name == "go" {
			continue
		}
		for _, w := range []int{0, -1} {
			if _, err := New(name, w); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("New(%q, %d) = %v, want ErrInvalidArgument", name, w, err)
			}
		}
	}
	if _, err := New("tunny", 2); !errors.Is(err, ErrUnknown) {
		t.Errorf("New(tunny) = %v, want ErrUnknown", err)
	}
	if _, err := NewChanPool(1, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("NewChanPool(1, -1) = %v, want ErrInvalidArgument", err)
	}
}

// BenchmarkThroughput submits trivial items from one goroutine and closes
// the executor at the end, so ns/op is the cost of one item end to end.
func BenchmarkThroughput(b *testing.B) {
	for _, tc := range executors() {
		b.Run(tc.name, func(b *testing.B) {
			e := tc.make(b)
			var n atomic.Int64
			fn := func() { n.Add(1) }
			b.ReportAllocs()
			for b.Loop() {
				if err := e.Submit(fn); err != nil {
					b.Fatal(err)
				}
			}
			e.Close()
			if n.Load() != int64(b.N) {
				b.Fatalf("%d of %d items ran", n.Load(), b.N)
			}
		})
	}
}

// BenchmarkThroughputParallel submits from GOMAXPROCS goroutines at once.
func BenchmarkThroughputParallel(b *testing.B) {
	for _, tc := range executors() {
		b.Run(tc.name, func(b *testing.B) {
			e := tc.make(b)
			var n atomic.Int64
			fn := func() { n.Add(1) }
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := e.Submit(fn); err != nil {
						b.Error(err)
						return
					}
				}
			})
			e.Close()
			if n.Load() != int64(b.N) {
				b.Fatalf("%d of %d items ran", n.Load(), b.N)
			}
		})
	}
}
