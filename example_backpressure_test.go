package wq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gowq/wq"
)

// A queue of max_active 1 bounded to 2 waiting items holds 1+2: while one
// item runs and two wait, Queue refuses the next with ErrQueueFull (to the
// error handler), and QueueContext waits for room instead (so do
// GoContext, Submit and Group.Go).
func ExampleWithMaxPending() {
	q, err := wq.Alloc("uploads", wq.Unbound, 1, wq.WithMaxPending(2),
		wq.WithErrorHandler(func(op, fn string, err error) {
			fmt.Println("refused:", errors.Is(err, wq.ErrQueueFull))
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()

	started, release := make(chan struct{}), make(chan struct{})
	q.Queue(wq.NewWork(func() { close(started); <-release }))
	<-started // running: it holds the max_active place

	fmt.Println(q.Queue(wq.NewWork(func() {})), q.Queue(wq.NewWork(func() {})))
	fmt.Println(q.Queue(wq.NewWork(func() {}))) // a third would wait: refused
	fmt.Println("pending:", q.Stats().Pending)

	// QueueContext waits until an item returns (or ctx ends).
	go func() { time.Sleep(10 * time.Millisecond); close(release) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fmt.Println("QueueContext:", q.QueueContext(ctx, wq.NewWork(func() {})))
	q.Flush()
	fmt.Println("pending:", q.Stats().Pending)
	// Output:
	// true true
	// refused: true
	// false
	// pending: 2
	// QueueContext: <nil>
	// pending: 0
}

// A service shutting down: DestroyContext bounds the wait; past the
// deadline the queue keeps refusing work and drains on its own, and a
// later Destroy waits for that drain.
func ExampleWorkqueue_DestroyContext() {
	q, err := wq.Alloc("service", wq.Unbound, 0, wq.WithErrorHandler(func(string, string, error) {}))
	if err != nil {
		fmt.Println(err)
		return
	}
	release := make(chan struct{})
	started := make(chan struct{})
	q.Queue(wq.NewWork(func() { close(started); <-release })) // a slow item
	<-started

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	fmt.Println(q.DestroyContext(ctx))
	fmt.Println("accepts work:", q.Queue(wq.NewWork(func() {})))

	close(release)
	q.Destroy() // waits for the same drain
	fmt.Println("destroyed:", q.DestroyContext(context.Background()))
	// Output:
	// context deadline exceeded
	// accepts work: false
	// destroyed: <nil>
}

// Stop, not StopAndWait: CancelPending drops the backlog and leaves the
// running item alone; the queue stays usable.
func ExampleWorkqueue_CancelPending() {
	q, err := wq.Alloc("jobs", wq.Unbound, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	started, release := make(chan struct{}), make(chan struct{})
	q.Queue(wq.NewWork(func() { close(started); <-release }))
	<-started
	for range 5 {
		q.Queue(wq.NewWork(func() { fmt.Println("never runs") }))
	}
	q.QueueDelayed(wq.NewDelayedWork(func() { fmt.Println("never runs") }), time.Hour)

	fmt.Println("cancelled:", q.CancelPending())
	close(release)
	q.Flush()
	fmt.Println("pending:", q.Stats().Pending)
	// Output:
	// cancelled: 6
	// pending: 0
}

// CancelSyncContext cancels an item and waits, within a deadline, for its
// running instance to finish.
func ExampleWork_CancelSyncContext() {
	q, err := wq.Alloc("cancel", wq.Unbound, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	// started has room for the first run's signal: the worker may start
	// before this goroutine waits for it (a loaded machine).
	started, release := make(chan struct{}, 1), make(chan struct{})
	w := wq.NewWork(func() {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
	})
	q.Queue(w)
	<-started
	q.Queue(w) // queued again behind its running instance

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	pending, err := w.CancelSyncContext(ctx)
	fmt.Println(pending, err, w.Pending())
	close(release)
	pending, err = w.CancelSyncContext(context.Background())
	fmt.Println(pending, err, w.Busy())
	// Output:
	// true context deadline exceeded false
	// false <nil> 0
}
