package wq_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"go.uber.org/goleak"
)

// TestGoItemDisabledByRecorderNotReused catches a Go item recycled onto
// the free list while disabled: the stage recorder is handed the item's
// Work (Stages.Work) and may Disable it during the call; a later Go that
// takes that item from the free list then fails with ErrDisabled, which
// Go never returns for a caller's closure.
func TestGoItemDisabledByRecorderNotReused(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one P: the free list's per-P cache hands the item back
	q := mustAlloc(t, "go-rec-disable", wq.Unbound, 1)
	var disable atomic.Bool
	wq.SetStageRecorder(func(s *wq.Stages) {
		if s.Workqueue == "go-rec-disable" && disable.CompareAndSwap(true, false) {
			s.Work.Disable()
		}
	})
	defer wq.SetStageRecorder(nil)
	for round := range 40 {
		disable.Store(true)
		if err := q.Go(func() {}); err != nil {
			t.Fatal(err)
		}
		q.Flush()
		for range 4 {
			err := q.Go(func() {})
			if errors.Is(err, wq.ErrDisabled) {
				t.Fatalf("round %d: Go = %v: a disabled item came back from the free list", round, err)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		q.Flush()
	}
}

// TestGoGoexitAndUnlockOSThreadKeepServing catches a queue left without a
// worker, or a Flush that hangs, after Go functions that call
// runtime.Goexit or runtime.UnlockOSThread (and then block, so that the
// goroutine may move off the worker's thread).
func TestGoGoexitAndUnlockOSThreadKeepServing(t *testing.T) {
	q := mustAlloc(t, "go-goexit-unlock", wq.Unbound, 2)
	var ran atomic.Int64
	for i := range 40 {
		var err error
		switch i % 4 {
		case 0:
			err = q.Go(func() { ran.Add(1); runtime.Goexit() })
		case 1:
			err = q.Go(func() { ran.Add(1); runtime.UnlockOSThread(); time.Sleep(50 * time.Microsecond) })
		case 2:
			err = q.GoContext(context.Background(), func(context.Context) { ran.Add(1); runtime.Goexit() })
		default:
			err = q.Go(func() { ran.Add(1) })
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	flushed := make(chan struct{})
	go func() { q.Flush(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(60 * time.Second):
		t.Fatalf("Flush hangs after Goexit/UnlockOSThread in Go functions; %d of 40 ran", ran.Load())
	}
	if ran.Load() != 40 {
		t.Fatalf("%d of 40 ran by the time Flush returned", ran.Load())
	}
}

// TestGoGroupSubmitRacingDestroyNoLeak catches, with 10k calls of Go,
// Group.Go and Submit racing Destroy: an accepted closure that never
// runs, a Group.Wait or Future.Wait that hangs, a refusal that matches
// neither ErrDestroyed nor ErrDraining, and goroutines left behind.
func TestGoGroupSubmitRacingDestroyNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	q, err := wq.Alloc("go-10k-destroy", wq.Unbound, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := q.NewGroup(context.Background())
	var accepted, ran, calls atomic.Int64
	var bad atomic.Value
	var futs sync.Mutex
	var futures []*wq.Future[int]
	var wg sync.WaitGroup
	const perCaller = 2500
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				calls.Add(1)
				switch (c + i) % 3 {
				case 0:
					err := q.Go(func() { ran.Add(1) })
					switch {
					case err == nil:
						accepted.Add(1)
					case errors.Is(err, wq.ErrDestroyed), errors.Is(err, wq.ErrDraining):
					default:
						bad.Store(err)
					}
				case 1:
					g.Go(func(context.Context) error { return nil })
				default:
					f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 7, nil })
					futs.Lock()
					futures = append(futures, f)
					futs.Unlock()
				}
			}
		}()
	}
	for calls.Load() < 2000 {
		runtime.Gosched()
	}
	q.Destroy()
	wg.Wait()
	if e := bad.Load(); e != nil {
		t.Fatalf("Go racing Destroy = %v", e)
	}
	if a, r := accepted.Load(), ran.Load(); a != r {
		t.Fatalf("%d closures accepted, %d ran", a, r)
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, wq.ErrDestroyed) {
			t.Fatalf("Group.Wait = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Group.Wait hangs after Destroy")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, f := range futures {
		v, err := f.Wait(ctx)
		switch {
		case err == nil && v == 7:
		case errors.Is(err, wq.ErrDestroyed), errors.Is(err, wq.ErrDraining):
		default:
			t.Fatalf("Future.Wait = %d, %v", v, err)
		}
	}
}

// TestGoFlushDrainStorm catches a Flush or Drain that hangs, or an
// accepted closure that never runs, while Go, Group.Go and Submit race
// Flush and Drain storms (Drain refuses outside callers with
// ErrDraining; nothing accepted may be lost).
func TestGoFlushDrainStorm(t *testing.T) {
	q := mustAlloc(t, "go-flush-storm", wq.Unbound, 4)
	var accepted, ran atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g, _ := q.NewGroup(context.Background())
				for range 8 {
					if err := q.Go(func() { ran.Add(1) }); err == nil {
						accepted.Add(1)
					} else if !errors.Is(err, wq.ErrDraining) {
						t.Errorf("Go = %v", err)
						return
					}
					g.Go(func(context.Context) error { return nil })
				}
				f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 1, nil })
				if err := g.Wait(); err != nil && !errors.Is(err, wq.ErrDraining) {
					t.Errorf("Group.Wait = %v", err)
					return
				}
				if _, err := f.Wait(nil); err != nil && !errors.Is(err, wq.ErrDraining) {
					t.Errorf("Future.Wait = %v", err)
					return
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%4 == 0 {
					q.Drain()
				} else {
					q.Flush()
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatal("a Flush, Drain, Group.Wait or Future.Wait hangs in the storm")
	}
	q.Flush()
	if a, r := accepted.Load(), ran.Load(); a != r {
		t.Fatalf("%d closures accepted, %d ran", a, r)
	}
}
