package wq_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync/atomic"

	"github.com/gowq/wq"
)

// Go queues a closure; the error says why a queue refused it.
func ExampleWorkqueue_Go() {
	q, err := wq.Alloc("closures", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	var sum atomic.Int64
	for i := 1; i <= 10; i++ {
		if err := q.Go(func() { sum.Add(int64(i)) }); err != nil {
			fmt.Println(err)
		}
	}
	q.Destroy() // runs every queued closure, then refuses new ones
	fmt.Println("sum:", sum.Load())
	err = q.Go(func() {})
	fmt.Println("after Destroy:", errors.Is(err, wq.ErrDestroyed))
	// Output:
	// sum: 55
	// after Destroy: true
}

// GoContext runs the function with the caller's pprof labels, so that a
// CPU profile charges the work to the request that queued it.
func ExampleWorkqueue_GoContext() {
	q, err := wq.Alloc("labelled", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	ctx := pprof.WithLabels(context.Background(), pprof.Labels("tenant", "acme"))
	done := make(chan string)
	if err := q.GoContext(ctx, func(ctx context.Context) {
		tenant, _ := pprof.Label(ctx, "tenant")
		done <- tenant
	}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ran for tenant", <-done)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	err = q.GoContext(cancelled, func(context.Context) {})
	fmt.Println("cancelled ctx:", err)
	// Output:
	// ran for tenant acme
	// cancelled ctx: context canceled
}

// QueueErr is Queue with the reason: dedup is not an error, a refusal is.
func ExampleWorkqueue_QueueErr() {
	q, err := wq.Alloc("reasons", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	release := make(chan struct{})
	w := wq.NewWork(func() { <-release })
	fmt.Println(q.QueueErr(w)) // queued
	w.Disable()                // cancels the pending instance (or lets it run) and refuses new ones
	queued, err := q.QueueErr(w)
	fmt.Println(queued, errors.Is(err, wq.ErrDisabled))
	close(release)
	// Output:
	// true <nil>
	// false true
}

// A Group runs a fan-out on a workqueue with errgroup's semantics: the
// first error cancels the others and is what Wait returns.
func ExampleWorkqueue_NewGroup() {
	q, err := wq.Alloc("fanout", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	g, ctx := q.NewGroup(context.Background())
	g.SetLimit(4) // at most 4 blocks admitted at once
	results := make([]int, 8)
	for i := range results {
		g.Go(func(ctx context.Context) error {
			if i == 5 {
				return fmt.Errorf("block %d: bad checksum", i)
			}
			if err := ctx.Err(); err != nil {
				return err // another block failed: stop early
			}
			results[i] = i * i
			return nil
		})
	}
	fmt.Println("Wait:", g.Wait())
	fmt.Println("ctx done:", ctx.Err() != nil)
	// Output:
	// Wait: block 5: bad checksum
	// ctx done: true
}

// Panics in a group's function come back from Wait as *PanicError.
func ExampleGroup_Wait_panic() {
	q, err := wq.Alloc("panics", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	g, _ := q.NewGroup(context.Background())
	g.Go(func(context.Context) error { panic("index out of range") })
	var pe *wq.PanicError
	if err := g.Wait(); errors.As(err, &pe) {
		fmt.Println("recovered:", pe.Value)
	}
	// Output:
	// recovered: index out of range
}

// Submit returns a Future; Wait is bounded by its own context.
func ExampleSubmit() {
	q, err := wq.Alloc("futures", wq.Unbound, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Destroy()
	f := wq.Submit(q, context.Background(), func(ctx context.Context) (string, error) {
		return "block 7 verified", nil
	})
	v, err := f.Wait(context.Background())
	fmt.Println(v, err)

	q.Destroy()
	f = wq.Submit(q, context.Background(), func(ctx context.Context) (string, error) { return "", nil })
	<-f.Done() // a refused Submit is done at once
	_, err = f.Wait(context.Background())
	fmt.Println(errors.Is(err, wq.ErrDestroyed))
	// Output:
	// block 7 verified <nil>
	// true
}
