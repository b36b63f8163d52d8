package wq

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gowq/wq/internal/testutil"
)

// moveOffThread, called from a work function on a thread worker, unlocks
// the worker's goroutine from its thread (every LockOSThread level) and
// blocks until the goroutine runs on another thread: a helper goroutine
// locks the old thread while this one sleeps. It reports whether the
// goroutine moved. The worker is retired after the item (its thread was
// lost).
func moveOffThread() bool {
	old := syscall.Gettid()
	for range 200 {
		runtime.UnlockOSThread()
	}
	for range 200 {
		release := make(chan struct{})
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			<-release
			runtime.UnlockOSThread()
		}()
		time.Sleep(50 * time.Microsecond)
		moved := syscall.Gettid() != old
		<-locked
		close(release)
		if moved {
			return true
		}
	}
	return false
}

// TestSelfWorkerAfterGoroutineLeftThread catches a self lookup (selfWorker,
// onSelf: every self-wait and attribution) that loses a thread worker
// whose goroutine left its thread, a worker's thread that still answers
// for it after that, and a goroutine-id record that outlives the retired
// worker.
func TestSelfWorkerAfterGoroutineLeftThread(t *testing.T) {
	q, err := Alloc("self-left-thread", Unbound, 0, Threads())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	// A live goroutine worker, so that selfWorker looks goroutine ids up
	// (also under GOWQ_THREADS=1).
	old := forceThreads.Swap(false)
	gq, err := Alloc("self-left-thread-g", Unbound, 0)
	forceThreads.Store(old)
	if err != nil {
		t.Fatal(err)
	}
	defer gq.Destroy()
	hold, held := make(chan struct{}), make(chan struct{})
	defer close(hold)
	if err := gq.Go(func() { close(held); <-hold }); err != nil {
		t.Fatal(err)
	}
	<-held
	if nGoWorkers.Load() == 0 {
		t.Fatal("no goroutine worker while a goroutine-backed queue runs an item")
	}
	type seen struct {
		before, self *worker
		onSelf       bool
		moved        bool
	}
	res := make(chan seen, 1)
	if err := q.Go(func() {
		var s seen
		s.before = selfWorker()
		s.moved = moveOffThread()
		s.self = selfWorker()
		s.onSelf = s.before != nil && s.before.onSelf()
		res <- s
	}); err != nil {
		t.Fatal(err)
	}
	s := <-res
	if s.before == nil || s.before.gch != nil {
		t.Fatalf("selfWorker on a Threads() queue's worker = %v, want its thread worker", s.before)
	}
	if !s.moved {
		t.Skip("the work function's goroutine did not move to another thread")
	}
	if s.self != s.before || !s.onSelf {
		t.Errorf("after the goroutine left the thread: selfWorker = %p (want the worker %p), onSelf %v (want true)", s.self, s.before, s.onSelf)
	}
	// clearIdentity forgets the goroutine in gworkers and then clears goid.
	testutil.WaitFor(t, "the retired worker's goroutine id to be forgotten", func() bool {
		return s.before.goid.Load() == 0
	})
}

// BenchmarkSelfWorkerLookup measures the self lookups of a caller that is
// no worker (a Wait that blocks pays one): selfWorker (a goroutine id and
// a map lookup), the goroutine lookup alone, and the tid registry's
// lookup (the fallback where goroutine ids cannot be read), with no
// goroutine worker and with one.
func BenchmarkSelfWorkerLookup(b *testing.B) {
	run := func(b *testing.B) {
		b.Run("selfWorker", func(b *testing.B) {
			for range b.N {
				if selfWorker() != nil {
					b.Fatal("the benchmark goroutine is a worker")
				}
			}
		})
		b.Run("goroutineLookup", func(b *testing.B) {
			for range b.N {
				if gworkers.Self() != nil {
					b.Fatal("the benchmark goroutine is a worker")
				}
			}
		})
		b.Run("threadLookup", func(b *testing.B) {
			for range b.N {
				if _, ok := workers.Self(); ok {
					b.Fatal("the benchmark goroutine is a worker")
				}
			}
		})
	}
	b.Run("no-goroutine-worker", func(b *testing.B) {
		if n := nGoWorkers.Load(); n != 0 {
			b.Skipf("%d goroutine workers left by earlier tests", n)
		}
		run(b)
	})
	b.Run("goroutine-worker", func(b *testing.B) {
		old := forceThreads.Swap(false)
		gq, err := Alloc("bench-self-lookup", Unbound, 0)
		forceThreads.Store(old)
		if err != nil {
			b.Fatal(err)
		}
		defer gq.Destroy()
		hold, held := make(chan struct{}), make(chan struct{})
		defer close(hold)
		if err := gq.Go(func() { close(held); <-hold }); err != nil {
			b.Fatal(err)
		}
		<-held
		run(b)
	})
}
