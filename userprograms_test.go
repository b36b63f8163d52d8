package wq_test

// Programs written the way an errgroup / pond / ants user writes them,
// against the documented API only (README.md, docs/go-users.md, godoc).
// Each test checks a documented promise and fails when it is broken.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gowq/wq"
	"github.com/gowq/wq/internal/labsys"
	"github.com/gowq/wq/wqtrace"
)

// upBound is how long any single wait in these tests may take before the
// test calls it a hang. Generous: the machine is shared and -race is slow.
const upBound = 60 * time.Second

// upWithin runs fn and fails the test if it does not return within upBound.
func upWithin(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(upBound):
		t.Fatalf("%s: did not return within %v (hang)", what, upBound)
	}
}

// upEventually polls cond until it holds or upBound passes.
func upEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(upBound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: condition not reached within %v", what, upBound)
		}
		time.Sleep(time.Millisecond)
	}
}

func upAlloc(t *testing.T, name string, flags wq.Flags, maxActive int, opts ...wq.Option) *wq.Workqueue {
	t.Helper()
	q, err := wq.Alloc(name, flags, maxActive, opts...)
	if err != nil {
		t.Fatalf("Alloc(%q): %v", name, err)
	}
	t.Cleanup(func() { upWithin(t, "cleanup Destroy", q.Destroy) })
	return q
}

// upCheckOnce fails unless every record ran exactly once.
func upCheckOnce(t *testing.T, ran []int32) {
	t.Helper()
	bad := 0
	for i := range ran {
		if n := atomic.LoadInt32(&ran[i]); n != 1 {
			if bad < 5 {
				t.Errorf("record %d ran %d times, want exactly 1", i, n)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d records did not run exactly once", bad, len(ran))
	}
}

// upConc tracks how many functions run at once.
type upConc struct{ cur, max atomic.Int64 }

func (c *upConc) enter() {
	n := c.cur.Add(1)
	for {
		m := c.max.Load()
		if n <= m || c.max.CompareAndSwap(m, n) {
			return
		}
	}
}
func (c *upConc) leave() { c.cur.Add(-1) }

// ---------------------------------------------------------------------
// 1. A 100,000-record pipeline, four ways, on a queue of max_active 4
// and WithMaxPending(16): nothing dropped, nothing run twice, max_active held.

const upRecords = 100_000

func TestUserPipelineEveryRecordOnceThroughEachWaitingEntry(t *testing.T) {
	ctx := context.Background()
	records := upRecords
	if testing.Short() {
		records = upRecords / 10
	}
	for _, entry := range []string{"Submit", "GoContext", "GroupGo", "QueueContext"} {
		t.Run(entry, func(t *testing.T) {
			const m, n = 4, 16
			q := upAlloc(t, "up-pipe-"+entry, wq.Unbound, m, wq.WithMaxPending(n))
			ran := make([]int32, records)
			var conc upConc
			work := func(i int) int {
				conc.enter()
				defer conc.leave()
				atomic.AddInt32(&ran[i], 1)
				return 2 * i
			}
			switch entry {
			case "Submit": // pond: pool.Submit(f) per record, futures waited in order
				futs := make(chan *wq.Future[int], 256)
				go func() {
					defer close(futs)
					for i := 0; i < records; i++ {
						futs <- wq.Submit(q, ctx, func(context.Context) (int, error) { return work(i), nil })
					}
				}()
				i := 0
				upWithin(t, "pipeline", func() {
					for f := range futs {
						v, err := f.Wait(ctx)
						if err != nil || v != 2*i {
							t.Errorf("record %d: Wait = %d, %v; want %d, nil", i, v, err, 2*i)
						}
						i++
					}
				})
				if i != records {
					t.Fatalf("got %d futures, want %d", i, records)
				}
			case "GoContext": // ants: blocking pool.Submit
				var wg sync.WaitGroup
				upWithin(t, "pipeline", func() {
					for i := 0; i < records; i++ {
						wg.Add(1)
						if err := q.GoContext(ctx, func(context.Context) { defer wg.Done(); work(i) }); err != nil {
							wg.Done()
							t.Errorf("record %d: GoContext: %v", i, err)
						}
					}
					wg.Wait()
				})
			case "GroupGo": // errgroup with SetLimit, on a bounded queue
				g, _ := q.NewGroup(ctx)
				g.SetLimit(8)
				var gconc upConc
				upWithin(t, "pipeline", func() {
					for i := 0; i < records; i++ {
						g.Go(func(context.Context) error {
							gconc.enter()
							defer gconc.leave()
							work(i)
							return nil
						})
					}
					if err := g.Wait(); err != nil {
						t.Errorf("Group.Wait: %v", err)
					}
				})
				if got := gconc.max.Load(); got > 8 {
					t.Errorf("group functions at once = %d, SetLimit(8)", got)
				}
			case "QueueContext": // the kernel's style: caller-owned items, reused once run
				const slots = 64
				ws := make([]wq.Work, slots)
				idx := make([]atomic.Int64, slots)
				for s := range ws {
					s := s
					ws[s].Init(func() { work(int(idx[s].Load())) })
				}
				upWithin(t, "pipeline", func() {
					for i := 0; i < records; i++ {
						s := i % slots
						ws[s].Flush() // the slot's previous record has run
						idx[s].Store(int64(i))
						if err := q.QueueContext(ctx, &ws[s]); err != nil {
							t.Errorf("record %d: QueueContext: %v", i, err)
						}
					}
					q.Flush()
				})
			}
			upCheckOnce(t, ran)
			if got := conc.max.Load(); got > m {
				t.Errorf("functions at once = %d, max_active %d", got, m)
			}
			if st := q.Stats(); st.Pending != 0 {
				t.Errorf("Stats().Pending = %d after the pipeline, want 0", st.Pending)
			}
		})
	}
}

// ---------------------------------------------------------------------
// 2. m+n exactness of MaxPending under 40 producers, through every entry.

type upEntry struct {
	name string
	// try queues one item that runs body; it returns whether it was
	// accepted and the refusal. ctx bounds the waiting entries.
	try   func(q *wq.Workqueue, ctx context.Context, g *wq.Group, w *wq.Work, body func()) (bool, error)
	waits bool // the entry waits for room (refusal is ctx.Err())
	kwork bool // the entry takes a caller's Work
	// unknown: the entry cannot say at once whether it queued the item;
	// only what runs tells.
	unknown bool
}

var upEntries = []upEntry{
	{name: "Go", try: func(q *wq.Workqueue, _ context.Context, _ *wq.Group, _ *wq.Work, body func()) (bool, error) {
		err := q.Go(body)
		return err == nil, err
	}},
	{name: "GoContext", waits: true, try: func(q *wq.Workqueue, ctx context.Context, _ *wq.Group, _ *wq.Work, body func()) (bool, error) {
		err := q.GoContext(ctx, func(context.Context) { body() })
		return err == nil, err
	}},
	{name: "Submit", waits: true, try: func(q *wq.Workqueue, ctx context.Context, _ *wq.Group, _ *wq.Work, body func()) (bool, error) {
		f := wq.Submit(q, ctx, func(context.Context) (int, error) { body(); return 1, nil })
		select {
		case <-f.Done(): // refused at once (or already ran, impossible while the gate holds)
			_, err := f.Wait(context.Background())
			return false, err
		default:
			return true, nil
		}
	}},
	{name: "GroupTryGo", try: func(q *wq.Workqueue, _ context.Context, g *wq.Group, _ *wq.Work, body func()) (bool, error) {
		if g.TryGo(func(context.Context) error { body(); return nil }) {
			return true, nil
		}
		return false, wq.ErrQueueFull
	}},
	{name: "GroupGo", waits: true, unknown: true, try: func(q *wq.Workqueue, ctx context.Context, _ *wq.Group, _ *wq.Work, body func()) (bool, error) {
		g, _ := q.NewGroup(ctx) // the group's context bounds Go's wait for room
		g.Go(func(context.Context) error { body(); return nil })
		go g.Wait() // accepted or not is seen from what runs
		return false, nil
	}},
	{name: "QueueErr", kwork: true, try: func(q *wq.Workqueue, _ context.Context, _ *wq.Group, w *wq.Work, body func()) (bool, error) {
		w.Init(body)
		return q.QueueErr(w)
	}},
	{name: "Queue", kwork: true, try: func(q *wq.Workqueue, _ context.Context, _ *wq.Group, w *wq.Work, body func()) (bool, error) {
		w.Init(body)
		if q.Queue(w) {
			return true, nil
		}
		return false, wq.ErrQueueFull
	}},
	{name: "QueueOn", kwork: true, try: func(q *wq.Workqueue, _ context.Context, _ *wq.Group, w *wq.Work, body func()) (bool, error) {
		w.Init(body)
		return q.QueueOnErr(wq.OnlineCPUs()[0], w)
	}},
	{name: "QueueKeyed", kwork: true, try: func(q *wq.Workqueue, _ context.Context, _ *wq.Group, w *wq.Work, body func()) (bool, error) {
		w.Init(body)
		if q.QueueKeyed(uint64(time.Now().UnixNano()%7), w) {
			return true, nil
		}
		return false, wq.ErrQueueFull
	}},
	{name: "QueueContext", waits: true, kwork: true, try: func(q *wq.Workqueue, ctx context.Context, _ *wq.Group, w *wq.Work, body func()) (bool, error) {
		w.Init(body)
		err := q.QueueContext(ctx, w)
		return err == nil, err
	}},
	{name: "QueueDelayed0", kwork: false, try: func(q *wq.Workqueue, _ context.Context, _ *wq.Group, _ *wq.Work, body func()) (bool, error) {
		dw := wq.NewDelayedWork(body)
		if q.QueueDelayed(dw, 0) {
			return true, nil
		}
		return false, wq.ErrQueueFull
	}},
}

func TestMaxPendingAdmitsExactlyMPlusNFrom40Producers(t *testing.T) {
	const m, n, producers, tries = 3, 5, 40, 6
	old := upQuietErrors(t)
	_ = old
	for _, qk := range []struct {
		name  string
		flags wq.Flags
		opts  []wq.Option
	}{
		{"unbound", wq.Unbound, nil},
		{"unbound-threads", wq.Unbound, []wq.Option{wq.Threads()}},
		{"percpu", 0, nil},
	} {
		for _, e := range upEntries {
			t.Run(qk.name+"/"+e.name, func(t *testing.T) {
				opts := append([]wq.Option{wq.WithMaxPending(n)}, qk.opts...)
				q := upAlloc(t, "up-mn-"+qk.name+"-"+e.name, qk.flags, m, opts...)
				gate := make(chan struct{})
				var ran atomic.Int64
				body := func() { <-gate; ran.Add(1) }
				gctx, gcancel := context.WithCancel(context.Background())
				defer gcancel()
				g, _ := q.NewGroup(gctx)
				works := make([]wq.Work, producers*tries)
				var accepted atomic.Int64
				var start sync.WaitGroup
				start.Add(1)
				var wg sync.WaitGroup
				for p := 0; p < producers; p++ {
					wg.Add(1)
					go func(p int) {
						defer wg.Done()
						start.Wait()
						k := tries
						if e.waits {
							k = 2 // each refusal costs its ctx's 300 ms
						}
						for i := 0; i < k; i++ {
							ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
							ok, err := e.try(q, ctx, g, &works[p*tries+i], body)
							cancel()
							if ok {
								accepted.Add(1)
								continue
							}
							if e.unknown {
								continue
							}
							want := wq.ErrQueueFull
							if e.waits {
								want = context.DeadlineExceeded
							}
							if !errors.Is(err, want) {
								t.Errorf("producer %d: refusal %v, want %v", p, err, want)
							}
						}
					}(p)
				}
				start.Done()
				upWithin(t, "producers", wg.Wait)
				if got := accepted.Load(); !e.unknown && got != m+n {
					t.Errorf("accepted %d items from %d producers, want exactly m+n = %d", got, producers, m+n)
				}
				close(gate)
				upWithin(t, "Flush", q.Flush)
				if e.name == "GroupTryGo" {
					upWithin(t, "Group.Wait", func() {
						if err := g.Wait(); err != nil {
							t.Errorf("Group.Wait: %v", err)
						}
					})
				}
				if got := ran.Load(); got != m+n {
					t.Errorf("%d items ran, want exactly m+n = %d (%d accepted)", got, m+n, accepted.Load())
				}
			})
		}
	}
}

// upQuietErrors keeps the expected Queue refusals (ErrQueueFull reports)
// out of the test log, and restores the default handler after.
func upQuietErrors(t *testing.T) *atomic.Int64 {
	var c atomic.Int64
	wq.SetErrorHandler(func(op, fn string, err error) { c.Add(1) })
	t.Cleanup(func() { wq.SetErrorHandler(nil) })
	return &c
}

// ---------------------------------------------------------------------
// 3. Lifecycle against producers parked on a full queue.

// upParked fills q (m+n items blocked on gate), then parks one producer
// per waiting entry per round on it with context.Background(), and
// returns a channel that receives each producer's refusal and a func
// reporting how many parked producers' items were accepted.
func upParkProducers(t *testing.T, q *wq.Workqueue, gate chan struct{}, ran *atomic.Int64, rounds int) (<-chan error, *atomic.Int64) {
	t.Helper()
	body := func() { <-gate; ran.Add(1) }
	for i := 0; i < q.MaxActive()+q.MaxPending(); i++ {
		if err := q.Go(body); err != nil {
			t.Fatalf("fill %d: %v", i, err)
		}
	}
	if err := q.Go(body); !errors.Is(err, wq.ErrQueueFull) {
		t.Fatalf("Go on a full queue = %v, want ErrQueueFull", err)
	}
	ctx := context.Background()
	errs := make(chan error, 4*rounds)
	var accepted atomic.Int64
	var parked sync.WaitGroup
	g, _ := q.NewGroup(ctx)
	for r := 0; r < rounds; r++ {
		parked.Add(4)
		go func() {
			parked.Done()
			err := q.GoContext(ctx, func(context.Context) { body() })
			if err == nil {
				accepted.Add(1)
			}
			errs <- err
		}()
		go func() {
			parked.Done()
			f := wq.Submit(q, ctx, func(context.Context) (int, error) { body(); return 0, nil })
			<-f.Done()
			_, err := f.Wait(ctx)
			errs <- err
		}()
		go func() {
			parked.Done()
			w := wq.NewWork(body)
			err := q.QueueContext(ctx, w)
			if err == nil {
				accepted.Add(1)
			}
			errs <- err
		}()
		go func() {
			parked.Done()
			g2, _ := q.NewGroup(ctx)
			g2.Go(func(context.Context) error { body(); return nil })
			errs <- g2.Wait()
		}()
	}
	_ = g
	parked.Wait()
	time.Sleep(50 * time.Millisecond) // let them reach the wait (a witness is not available from outside)
	return errs, &accepted
}

func TestDestroyWakesEveryParkedProducerWithErrDestroyed(t *testing.T) {
	for _, how := range []string{"Destroy", "DestroyContext-expired"} {
		t.Run(how, func(t *testing.T) {
			q, err := wq.Alloc("up-destroy-parked-"+how, wq.Unbound, 2, wq.WithMaxPending(3))
			if err != nil {
				t.Fatal(err)
			}
			gate := make(chan struct{})
			var ran atomic.Int64
			const rounds = 10
			errs, _ := upParkProducers(t, q, gate, &ran, rounds)
			destroyed := make(chan struct{})
			go func() {
				defer close(destroyed)
				if how == "Destroy" {
					q.Destroy()
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if err := q.DestroyContext(ctx); err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("DestroyContext: %v", err)
				}
				q.Destroy() // waits for the same drain
			}()
			// Every parked producer must return while the items are still
			// blocked: Destroy wakes them, it does not wait for room.
			for i := 0; i < 4*rounds; i++ {
				select {
				case err := <-errs:
					if !errors.Is(err, wq.ErrDestroyed) {
						t.Errorf("parked producer returned %v, want ErrDestroyed", err)
					}
				case <-time.After(upBound):
					t.Fatalf("%d of %d parked producers still waiting after Destroy began", 4*rounds-i, 4*rounds)
				}
			}
			close(gate)
			select {
			case <-destroyed:
			case <-time.After(upBound):
				t.Fatal("Destroy did not return")
			}
			if got := ran.Load(); got != 5 {
				t.Errorf("%d items ran, want the 5 accepted before Destroy", got)
			}
			if err := q.Go(func() {}); !errors.Is(err, wq.ErrDestroyed) {
				t.Errorf("Go after Destroy = %v, want ErrDestroyed", err)
			}
		})
	}
}

func TestDrainWakesParkedProducersWithErrDraining(t *testing.T) {
	upQuietErrors(t)
	q := upAlloc(t, "up-drain-parked", wq.Unbound, 2, wq.WithMaxPending(3))
	gate := make(chan struct{})
	var ran atomic.Int64
	const rounds = 5
	errs, _ := upParkProducers(t, q, gate, &ran, rounds)
	drained := make(chan struct{})
	go func() { defer close(drained); q.Drain() }()
	for i := 0; i < 4*rounds; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, wq.ErrDraining) {
				t.Errorf("parked producer returned %v, want ErrDraining", err)
			}
		case <-time.After(upBound):
			t.Fatalf("%d parked producers still waiting after Drain began", 4*rounds-i)
		}
	}
	close(gate)
	upWithin(t, "Drain", func() { <-drained })
	if got := ran.Load(); got != 5 {
		t.Errorf("%d items ran, want 5", got)
	}
	// The queue is usable again after Drain.
	done := make(chan struct{})
	if err := q.Go(func() { close(done) }); err != nil {
		t.Fatalf("Go after Drain: %v", err)
	}
	upWithin(t, "item after Drain", func() { <-done })
}

func TestSetMaxActiveAdmitsExactlyTheNewRoomToParkedProducers(t *testing.T) {
	q := upAlloc(t, "up-setmax-parked", wq.Unbound, 1, wq.WithMaxPending(1))
	gate := make(chan struct{})
	var ran atomic.Int64
	body := func() { <-gate; ran.Add(1) }
	for i := 0; i < 2; i++ {
		if err := q.Go(body); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const parked = 12
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < parked; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.GoContext(ctx, func(context.Context) { body() }); err == nil {
				accepted.Add(1)
			} else if !errors.Is(err, context.Canceled) {
				t.Errorf("GoContext: %v", err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := q.SetMaxActive(5); err != nil {
		t.Fatal(err)
	}
	// 4 more places: exactly 4 parked producers get in, none more.
	upEventually(t, "4 admitted", func() bool { return accepted.Load() >= 4 })
	time.Sleep(100 * time.Millisecond)
	if got := accepted.Load(); got != 4 {
		t.Errorf("after SetMaxActive(1->5) with n=1, %d parked producers admitted, want 4", got)
	}
	cancel()
	upWithin(t, "producers", wg.Wait)
	close(gate)
	upWithin(t, "Flush", q.Flush)
	if got, want := ran.Load(), 2+accepted.Load(); got != want {
		t.Errorf("ran %d, accepted %d", got, want)
	}
}

// ---------------------------------------------------------------------
// 4. pond's Stop: DestroyContext bounds the wait, never what runs.

func TestDestroyContextLikePondStopRunsEveryAcceptedItemOnce(t *testing.T) {
	q, err := wq.Alloc("up-pond-stop", wq.Unbound, 2, wq.WithMaxPending(50))
	if err != nil {
		t.Fatal(err)
	}
	const N = 52
	ran := make([]int32, N)
	release := make(chan struct{})
	for i := 0; i < N; i++ {
		if err := q.Go(func() { <-release; atomic.AddInt32(&ran[i], 1) }); err != nil {
			t.Fatalf("Go %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := q.DestroyContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DestroyContext on a busy queue = %v, want DeadlineExceeded", err)
	}
	if err := q.Go(func() {}); !errors.Is(err, wq.ErrDestroyed) || !errors.Is(err, wq.ErrDraining) {
		t.Errorf("Go after DestroyContext timed out = %v, want ErrDestroyed and ErrDraining", err)
	}
	if err := q.GoContext(context.Background(), func(context.Context) {}); !errors.Is(err, wq.ErrDestroyed) {
		t.Errorf("GoContext after DestroyContext timed out = %v, want ErrDestroyed", err)
	}
	close(release)
	upWithin(t, "Destroy after DestroyContext", q.Destroy)
	upCheckOnce(t, ran)
	if err := q.DestroyContext(context.Background()); err != nil {
		t.Errorf("DestroyContext of a destroyed queue = %v, want nil", err)
	}
}

// ---------------------------------------------------------------------
// 5. Cancel and flush storms: an accepted Go function runs exactly once
// unless CancelPending counted it; a Future says which.

func TestCancelPendingStormAccountsForEveryAcceptedItem(t *testing.T) {
	q := upAlloc(t, "up-cancel-storm", wq.Unbound, 3, wq.WithMaxPending(64))
	var accepted, ran, cancelled atomic.Int64
	var futRan, futCancelled, futAccepted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < 8; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if p%2 == 0 {
					if q.Go(func() { ran.Add(1); runtime.Gosched() }) == nil {
						accepted.Add(1)
					}
					continue
				}
				var did atomic.Bool
				f := wq.Submit(q, ctx, func(context.Context) (int, error) { did.Store(true); futRan.Add(1); return i, nil })
				v, err := f.Wait(ctx)
				switch {
				case err == nil:
					futAccepted.Add(1)
					if !did.Load() || v != i {
						t.Errorf("Future ok but fn ran=%v v=%d want %d", did.Load(), v, i)
					}
				case errors.Is(err, wq.ErrCancelled):
					futAccepted.Add(1)
					futCancelled.Add(1)
					if did.Load() {
						t.Errorf("Future ErrCancelled but fn ran")
					}
				default:
					t.Errorf("Submit: %v", err)
				}
			}
		}(p)
	}
	for c := 0; c < 2; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				cancelled.Add(int64(q.CancelPending()))
				q.Flush()
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	upWithin(t, "storm", wg.Wait)
	upWithin(t, "Flush", q.Flush)
	if got, want := ran.Load()+futRan.Load()+cancelled.Load(), accepted.Load()+futAccepted.Load(); got != want {
		t.Errorf("ran %d + %d futures + cancelled %d = %d, accepted %d (Go) + %d (Submit) = %d",
			ran.Load(), futRan.Load(), cancelled.Load(), got, accepted.Load(), futAccepted.Load(), want)
	}
	if futCancelled.Load() > cancelled.Load() {
		t.Errorf("%d futures ErrCancelled, CancelPending counted %d", futCancelled.Load(), cancelled.Load())
	}
	t.Logf("accepted %d Go + %d Submit, cancelled %d", accepted.Load(), futAccepted.Load(), cancelled.Load())
}

// ---------------------------------------------------------------------
// 6. runtime.Goexit and runtime.UnlockOSThread in work functions and in
// every callback: nothing hangs, the queue keeps serving.

func upQueueKinds() []struct {
	name  string
	flags wq.Flags
	opts  []wq.Option
} {
	return []struct {
		name  string
		flags wq.Flags
		opts  []wq.Option
	}{
		{"unbound", wq.Unbound, nil},
		{"unbound-threads", wq.Unbound, []wq.Option{wq.Threads()}},
		{"percpu", 0, nil},
	}
}

// upStillServes checks q runs a new item and Flush returns.
func upStillServes(t *testing.T, q *wq.Workqueue) {
	t.Helper()
	done := make(chan struct{})
	if err := q.Go(func() { close(done) }); err != nil {
		t.Fatalf("Go after the bad item: %v", err)
	}
	upWithin(t, "next item", func() { <-done })
	upWithin(t, "Flush", q.Flush)
}

func TestGoexitAndUnlockOSThreadInWorkFunctionsLoseNothing(t *testing.T) {
	for _, qk := range upQueueKinds() {
		for _, bad := range []string{"Goexit", "UnlockOSThread", "UnlockOSThread64"} {
			t.Run(qk.name+"/"+bad, func(t *testing.T) {
				upQuietErrors(t)
				q := upAlloc(t, "up-exit-"+qk.name+"-"+bad, qk.flags, 2, qk.opts...)
				misbehave := func() {
					switch bad {
					case "Goexit":
						runtime.Goexit()
					case "UnlockOSThread":
						runtime.UnlockOSThread()
					case "UnlockOSThread64":
						for i := 0; i < 64; i++ {
							runtime.UnlockOSThread()
						}
						time.Sleep(time.Millisecond)
					}
				}
				// Go: the next items run, Flush returns.
				for i := 0; i < 5; i++ {
					if err := q.Go(misbehave); err != nil {
						t.Fatal(err)
					}
				}
				upStillServes(t, q)
				// Submit: the future is done; Goexit gives ErrWorkerExit.
				f := wq.Submit(q, context.Background(), func(context.Context) (int, error) { misbehave(); return 7, nil })
				var v int
				var err error
				upWithin(t, "Future.Wait", func() { v, err = f.Wait(context.Background()) })
				if bad == "Goexit" {
					if !errors.Is(err, wq.ErrWorkerExit) {
						t.Errorf("Submit with Goexit: Wait = %d, %v; want ErrWorkerExit", v, err)
					}
				} else if err != nil || v != 7 {
					t.Errorf("Submit with %s: Wait = %d, %v; want 7, nil", bad, v, err)
				}
				// Group: Goexit counts as ErrWorkerExit.
				g, _ := q.NewGroup(context.Background())
				g.Go(func(context.Context) error { misbehave(); return nil })
				upWithin(t, "Group.Wait", func() { err = g.Wait() })
				if bad == "Goexit" && !errors.Is(err, wq.ErrWorkerExit) {
					t.Errorf("Group with Goexit: Wait = %v, want ErrWorkerExit", err)
				}
				if bad != "Goexit" && err != nil {
					t.Errorf("Group with %s: Wait = %v, want nil", bad, err)
				}
				// A caller's Work: Flush returns and the item can be queued again.
				var n atomic.Int32
				w := wq.NewWork(func() { n.Add(1); misbehave() })
				q.Queue(w)
				upWithin(t, "Work.Flush", func() { w.Flush() })
				if !q.Queue(w) {
					t.Errorf("Queue of the item again after it %s = false", bad)
				}
				upWithin(t, "Work.Flush", func() { w.Flush() })
				if got := n.Load(); got != 2 {
					t.Errorf("item ran %d times, want 2", got)
				}
				upStillServes(t, q)
			})
		}
	}
}

func TestGoexitAndUnlockOSThreadInPanicHandlerKeepWorkersServing(t *testing.T) {
	for _, qk := range upQueueKinds() {
		for _, bad := range []string{"Goexit", "UnlockOSThread", "panic"} {
			t.Run(qk.name+"/"+bad, func(t *testing.T) {
				upQuietErrors(t)
				var calls atomic.Int32
				var info atomic.Value
				h := func(p wq.PanicInfo) {
					calls.Add(1)
					info.Store(p)
					switch bad {
					case "Goexit":
						runtime.Goexit()
					case "UnlockOSThread":
						runtime.UnlockOSThread()
					case "panic":
						panic("handler panics too")
					}
				}
				opts := append([]wq.Option{wq.WithPanicHandler(h)}, qk.opts...)
				q := upAlloc(t, "up-ph-"+qk.name+"-"+bad, qk.flags, 2, opts...)
				for i := 0; i < 4; i++ {
					if err := q.Go(func() { panic(fmt.Sprintf("boom %d", i)) }); err != nil {
						t.Fatal(err)
					}
				}
				upWithin(t, "Flush", q.Flush)
				upStillServes(t, q)
				if got := calls.Load(); got != 4 {
					t.Errorf("panic handler called %d times, want 4", got)
				}
				p, _ := info.Load().(wq.PanicInfo)
				if p.Workqueue != q.Name() || p.Value == nil || len(p.Stack) == 0 {
					t.Errorf("PanicInfo = {%q, %v, %d bytes of stack}", p.Workqueue, p.Value, len(p.Stack))
				}
				if got := q.Stats().Panics; got != 4 {
					t.Errorf("Stats().Panics = %d, want 4", got)
				}
			})
		}
	}
}

func TestGoexitInErrorHandlerEndsOnlyTheCallerAndLosesNothing(t *testing.T) {
	var calls atomic.Int32
	q := upAlloc(t, "up-eh-goexit", wq.Unbound, 2, wq.WithMaxPending(1),
		wq.WithErrorHandler(func(op, fn string, err error) { calls.Add(1); runtime.Goexit() }))
	gate := make(chan struct{})
	var ran atomic.Int32
	for i := 0; i < 3; i++ {
		if err := q.Go(func() { <-gate; ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	// Queue on a full queue reports ErrQueueFull to the handler, which ends
	// this goroutine: the deferred close still runs, the item stays idle.
	w := wq.NewWork(func() { ran.Add(1) })
	ended := make(chan bool, 1)
	go func() {
		returned := false
		defer func() { ended <- returned }()
		q.Queue(w)
		returned = true
	}()
	var returned bool
	upWithin(t, "Queue goroutine", func() { returned = <-ended })
	if returned {
		t.Logf("Queue returned (no report this time)")
	}
	if w.Pending() {
		t.Errorf("refused item is pending after the handler's Goexit")
	}
	close(gate)
	upWithin(t, "Flush", q.Flush)
	if !q.Queue(w) {
		t.Errorf("Queue of the refused item later = false")
	}
	upWithin(t, "Work.Flush", func() { w.Flush() })
	if got := ran.Load(); got != 4 {
		t.Errorf("ran %d, want 4", got)
	}
	// An error found on a worker: Flush from the queue's own item reports
	// ErrDeadlock there; the handler's Goexit retires that worker only.
	done := make(chan struct{})
	if err := q.Go(func() { defer close(done); q.Flush() }); err != nil {
		t.Fatal(err)
	}
	upWithin(t, "item whose Flush reports ErrDeadlock", func() { <-done })
	upStillServes(t, q)
	if calls.Load() == 0 {
		t.Errorf("error handler never called")
	}
}

type upTracer struct {
	kind wqtrace.Kind
	fn   func()
	on   atomic.Bool
	hits atomic.Int32
	name string
}

func (tr *upTracer) Trace(ev *wqtrace.Event) {
	if !tr.on.Load() || ev.Kind != tr.kind {
		return
	}
	if tr.name != "" && ev.Workqueue != "" && ev.Workqueue != tr.name {
		return
	}
	if tr.on.CompareAndSwap(true, false) { // once
		tr.hits.Add(1)
		tr.fn()
	}
}

func TestGoexitAndUnlockOSThreadInTracerLeaveItemsConsistent(t *testing.T) {
	for _, qk := range upQueueKinds() {
		for _, kind := range []wqtrace.Kind{wqtrace.QueueWork, wqtrace.ExecuteStart, wqtrace.ExecuteEnd} {
			for _, bad := range []string{"Goexit", "UnlockOSThread"} {
				t.Run(fmt.Sprintf("%s/%v/%s", qk.name, kind, bad), func(t *testing.T) {
					upQuietErrors(t)
					q := upAlloc(t, "up-tr-"+qk.name+"-"+bad, qk.flags, 2, qk.opts...)
					tr := &upTracer{kind: kind, name: q.Name()}
					tr.fn = func() {
						if bad == "Goexit" {
							runtime.Goexit()
						}
						runtime.UnlockOSThread()
					}
					wq.SetTracer(tr)
					defer wq.SetTracer(nil)
					var n atomic.Int32
					w := wq.NewWork(func() { n.Add(1) })
					tr.on.Store(true)
					qret := make(chan bool, 1)
					go func() {
						ok := false
						defer func() { qret <- ok }()
						ok = q.Queue(w)
					}()
					var queued bool
					upWithin(t, "Queue", func() { queued = <-qret })
					upWithin(t, "Work.Flush", func() { w.Flush() })
					upWithin(t, "q.Flush", q.Flush)
					if w.Pending() {
						t.Errorf("item still pending after Flush")
					}
					t.Logf("Work after tracer %s at %v: queued %v, ran %d", bad, kind, queued, n.Load())
					if queued && n.Load() != 1 {
						t.Errorf("queued item ran %d times, want 1", n.Load())
					}
					// The item is usable again.
					if !q.Queue(w) {
						t.Errorf("Queue of the item again = false")
					}
					upWithin(t, "Work.Flush", func() { w.Flush() })
					upStillServes(t, q)
					// Submit through a tracer that ends the goroutine.
					tr.on.Store(true)
					var err error
					var v int
					var fut *wq.Future[int]
					var fnRan atomic.Bool
					sret := make(chan struct{})
					go func() {
						defer close(sret)
						fut = wq.Submit(q, context.Background(), func(context.Context) (int, error) { fnRan.Store(true); return 1, nil })
					}()
					upWithin(t, "Submit", func() { <-sret })
					if fut != nil {
						upWithin(t, "Future.Wait", func() { v, err = fut.Wait(context.Background()) })
						if err == nil && (!fnRan.Load() || v != 1) {
							t.Errorf("Future after tracer %s at %v: (%d, nil) but fn ran=%v", bad, kind, v, fnRan.Load())
						}
						t.Logf("Future after tracer %s at %v: %d, %v (fn ran %v)", bad, kind, v, err, fnRan.Load())
					}
					upStillServes(t, q)
					// Group.Go through a tracer that ends the goroutine:
					// Wait must return (ErrCancelled when Go ended in queue_work).
					tr.on.Store(true)
					var gRan atomic.Bool
					g, _ := q.NewGroup(context.Background())
					gret := make(chan struct{})
					go func() { defer close(gret); g.Go(func(context.Context) error { gRan.Store(true); return nil }) }()
					upWithin(t, "Group.Go", func() { <-gret })
					upWithin(t, "Group.Wait", func() { err = g.Wait() })
					if err == nil && !gRan.Load() {
						t.Errorf("Group after tracer %s at %v: Wait nil but fn never ran", bad, kind)
					}
					t.Logf("Group after tracer %s at %v: %v (fn ran %v)", bad, kind, err, gRan.Load())
					upStillServes(t, q)
				})
			}
		}
	}
}

// ---------------------------------------------------------------------
// 7. Bad input: a clear error, nothing lost, nothing crashes.

func TestNilArgumentsAndUseAfterDestroyAreRefusedInDocumentedOrder(t *testing.T) {
	upQuietErrors(t)
	var nilq *wq.Workqueue
	//lint:ignore SA1012 testing nil ctx
	var nilctx context.Context
	bg := context.Background()
	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s = %v, want %v", what, err, want)
		}
	}
	check("nil q Go", nilq.Go(func() {}), wq.ErrInvalidArgument)
	check("nil q GoContext", nilq.GoContext(bg, func(context.Context) {}), wq.ErrInvalidArgument)
	_, err := wq.Submit(nilq, bg, func(context.Context) (int, error) { return 0, nil }).Wait(bg)
	check("nil q Submit", err, wq.ErrInvalidArgument)
	_, err = nilq.QueueErr(wq.NewWork(func() {}))
	check("nil q QueueErr", err, wq.ErrInvalidArgument)
	if nilq.Queue(wq.NewWork(func() {})) {
		t.Error("nil q Queue = true")
	}
	check("nil q DestroyContext", nilq.DestroyContext(bg), wq.ErrInvalidArgument)
	nilq.Destroy()
	nilq.Flush()

	q, err := wq.Alloc("up-nil", wq.Unbound, 2)
	if err != nil {
		t.Fatal(err)
	}
	check("GoContext nil ctx", q.GoContext(nilctx, func(context.Context) {}), wq.ErrInvalidArgument)
	_, err = wq.Submit(q, nilctx, func(context.Context) (int, error) { return 0, nil }).Wait(bg)
	check("Submit nil ctx", err, wq.ErrInvalidArgument)
	check("QueueContext nil ctx", q.QueueContext(nilctx, wq.NewWork(func() {})), wq.ErrInvalidArgument)
	check("FlushContext nil ctx", q.FlushContext(nilctx), wq.ErrInvalidArgument)
	check("DrainContext nil ctx", q.DrainContext(nilctx), wq.ErrInvalidArgument)
	check("DestroyContext nil ctx", q.DestroyContext(nilctx), wq.ErrInvalidArgument)
	check("Go nil fn", q.Go(nil), wq.ErrNoFunc)
	check("GoContext nil fn", q.GoContext(bg, nil), wq.ErrNoFunc)
	_, err = wq.Submit[int](q, bg, nil).Wait(bg)
	check("Submit nil fn", err, wq.ErrNoFunc)
	_, err = q.QueueErr(nil)
	check("QueueErr nil work", err, wq.ErrNoFunc)
	_, err = q.QueueErr(&wq.Work{})
	check("QueueErr uninitialised work", err, wq.ErrNoFunc)
	_, err = q.QueueOnErr(1<<20, wq.NewWork(func() {}))
	check("QueueOnErr bad cpu", err, wq.ErrInvalidCPU)
	g, gctx := q.NewGroup(nilctx) // takes context.Background()
	if gctx == nil {
		t.Fatal("NewGroup(nil) returned a nil context")
	}
	g.Go(nil)
	check("Group.Go nil fn -> Wait", g.Wait(), wq.ErrNoFunc)
	var zero wq.Group
	zero.Go(func(context.Context) error { return nil })
	check("zero Group Wait", zero.Wait(), wq.ErrInvalidArgument)
	f := wq.Submit(q, bg, func(context.Context) (int, error) { return 3, nil })
	_, err = f.Wait(nilctx)
	check("Future.Wait nil ctx", err, wq.ErrInvalidArgument)
	// The nil-ctx DestroyContext did not begin the destroy.
	check("Go after DestroyContext(nil)", q.Go(func() {}), nil)

	q.Destroy()
	check("Go nil fn after Destroy", q.Go(nil), wq.ErrDestroyed)
	check("GoContext after Destroy", q.GoContext(bg, nil), wq.ErrDestroyed)
	_, err = wq.Submit[int](q, bg, nil).Wait(bg)
	check("Submit nil fn after Destroy", err, wq.ErrDestroyed)
	_, err = q.QueueErr(nil)
	check("QueueErr nil after Destroy", err, wq.ErrDestroyed)
	check("QueueContext after Destroy", q.QueueContext(bg, nil), wq.ErrDestroyed)
	g, _ = q.NewGroup(bg)
	g.Go(func(context.Context) error { return nil })
	check("Group.Go after Destroy", g.Wait(), wq.ErrDestroyed)
	if g.TryGo(func(context.Context) error { return nil }) {
		t.Error("TryGo after Destroy = true")
	}
	check("SetMaxActive after Destroy", q.SetMaxActive(3), wq.ErrDestroyed)
	if q.QueueDelayed(wq.NewDelayedWork(func() {}), time.Hour) {
		t.Error("QueueDelayed after Destroy = true")
	}
	q.Flush()
	q.Drain()
	q.Destroy()
	check("DestroyContext again", q.DestroyContext(bg), nil)

	for _, bad := range []struct {
		name string
		max  int
		opts []wq.Option
	}{
		{"", 1, nil}, {"up-neg", -1, nil}, {"up-big", 2049, nil}, {"up-negpend", 1, []wq.Option{wq.WithMaxPending(-1)}},
	} {
		if q, err := wq.Alloc(bad.name, wq.Unbound, bad.max, bad.opts...); !errors.Is(err, wq.ErrInvalidArgument) {
			t.Errorf("Alloc(%q, %d) = %v, want ErrInvalidArgument", bad.name, bad.max, err)
			if q != nil {
				q.Destroy()
			}
		}
	}
	q2 := upAlloc(t, "up-setmax", wq.Unbound, 2)
	for _, n := range []int{0, -1, 2049} {
		check(fmt.Sprintf("SetMaxActive(%d)", n), q2.SetMaxActive(n), wq.ErrInvalidArgument)
	}
	if got := q2.MaxActive(); got != 2 {
		t.Errorf("MaxActive after refused SetMaxActive = %d, want 2", got)
	}
}

// ---------------------------------------------------------------------
// 8. The RT class without privileges (run as nobody, see the report).

func TestRTWithoutPrivilegeIsErrPermissionAndFallbackRuns(t *testing.T) {
	if labsys.CheckRT(1) == nil {
		t.Skip("this process may use SCHED_FIFO; run as an unprivileged user to test the refusal")
	}
	_, err := wq.Alloc("up-rt", wq.Unbound|wq.RT, 0)
	if !errors.Is(err, wq.ErrPermission) {
		t.Fatalf("Alloc RT without privilege = %v, want ErrPermission", err)
	}
	if len(err.Error()) < 40 {
		t.Errorf("ErrPermission text %q does not name the cause and the fix", err)
	}
	q := upAlloc(t, "up-rt-fb", wq.Unbound|wq.RT, 0, wq.AllowRTFallback())
	st := q.Stats()
	if !st.Fallback || st.FallbackReason == "" {
		t.Errorf("fallback queue: Fallback=%v FallbackReason=%q", st.Fallback, st.FallbackReason)
	}
	v, err := wq.Submit(q, context.Background(), func(context.Context) (int, error) { return 42, nil }).Wait(context.Background())
	if err != nil || v != 42 {
		t.Errorf("Submit on the fallback queue = %d, %v", v, err)
	}
	if q.Flags()&wq.RT != 0 {
		t.Errorf("Flags() after fallback = %v still has RT", q.Flags())
	}
}

// ---------------------------------------------------------------------
// 9. docs/go-users.md's mapping table, row by row, as a user reads it.

func TestGoUsersMappingTableRowByRow(t *testing.T) {
	bg := context.Background()
	upQuietErrors(t)

	// fill returns a queue of max_active m and WithMaxPending(n) holding m+n
	// items blocked on the returned gate.
	fill := func(t *testing.T, name string, m, n int) (*wq.Workqueue, chan struct{}) {
		q := upAlloc(t, name, wq.Unbound, m, wq.WithMaxPending(n))
		gate := make(chan struct{})
		for i := 0; i < m+n; i++ {
			if err := q.Go(func() { <-gate }); err != nil {
				t.Fatalf("fill: %v", err)
			}
		}
		t.Cleanup(func() {
			select {
			case <-gate:
			default:
				close(gate)
			}
		})
		return q, gate
	}

	t.Run("ants NewPool(n) is Alloc max_active n", func(t *testing.T) {
		q := upAlloc(t, "up-map-ants-pool", wq.Unbound, 3)
		var conc upConc
		var wg sync.WaitGroup
		for i := 0; i < 30; i++ {
			wg.Add(1)
			if err := q.Go(func() { defer wg.Done(); conc.enter(); time.Sleep(2 * time.Millisecond); conc.leave() }); err != nil {
				t.Fatal(err)
			}
		}
		upWithin(t, "items", wg.Wait)
		if got := conc.max.Load(); got > 3 {
			t.Errorf("%d items ran at once on max_active 3", got)
		}
	})
	t.Run("ants blocking Submit is GoContext waiting while full", func(t *testing.T) {
		q, gate := fill(t, "up-map-ants-submit", 1, 1)
		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		defer cancel()
		if err := q.GoContext(ctx, func(context.Context) {}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("GoContext on a full queue = %v, want DeadlineExceeded", err)
		}
		res := make(chan error, 1)
		go func() { res <- q.GoContext(bg, func(context.Context) {}) }()
		select {
		case err := <-res:
			t.Fatalf("GoContext returned %v on a full queue", err)
		case <-time.After(30 * time.Millisecond):
		}
		close(gate)
		upWithin(t, "GoContext after room", func() {
			if err := <-res; err != nil {
				t.Errorf("GoContext once room = %v", err)
			}
		})
	})
	t.Run("ants WithNonblocking is Go returning ErrQueueFull; WithMaxPending(0) unbounded", func(t *testing.T) {
		q, _ := fill(t, "up-map-ants-nonblock", 1, 1)
		if err := q.Go(func() {}); !errors.Is(err, wq.ErrQueueFull) {
			t.Errorf("Go on a full queue = %v, want ErrQueueFull", err)
		}
		u := upAlloc(t, "up-map-unbounded", wq.Unbound, 1, wq.WithMaxPending(0))
		gate := make(chan struct{})
		for i := 0; i < 5000; i++ {
			if err := u.Go(func() { <-gate }); err != nil {
				t.Fatalf("Go %d on WithMaxPending(0): %v", i, err)
			}
		}
		if u.MaxPending() != 0 {
			t.Errorf("MaxPending() = %d, want 0", u.MaxPending())
		}
		close(gate)
	})
	t.Run("ants WithPanicHandler is WithPanicHandler with PanicInfo", func(t *testing.T) {
		got := make(chan wq.PanicInfo, 1)
		q := upAlloc(t, "up-map-ants-panic", wq.Unbound, 1, wq.WithPanicHandler(func(p wq.PanicInfo) { got <- p }))
		if err := q.Go(func() { panic("ants") }); err != nil {
			t.Fatal(err)
		}
		var p wq.PanicInfo
		upWithin(t, "panic handler", func() { p = <-got })
		if p.Workqueue != q.Name() || p.Value != "ants" || p.Func == "" || len(p.Stack) == 0 || p.Worker == "" {
			t.Errorf("PanicInfo = queue %q value %v func %q stack %d worker %q", p.Workqueue, p.Value, p.Func, len(p.Stack), p.Worker)
		}
	})
	t.Run("ants Release is Destroy running what is queued", func(t *testing.T) {
		q, err := wq.Alloc("up-map-ants-release", wq.Unbound, 1)
		if err != nil {
			t.Fatal(err)
		}
		var ran atomic.Int32
		for i := 0; i < 50; i++ {
			if err := q.Go(func() { time.Sleep(100 * time.Microsecond); ran.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		upWithin(t, "Destroy", q.Destroy)
		if got := ran.Load(); got != 50 {
			t.Errorf("Destroy returned with %d of 50 queued items run", got)
		}
	})
	t.Run("ants Running and Waiting are Running().Items and Stats().Pending", func(t *testing.T) {
		q, gate := fill(t, "up-map-ants-running", 2, 3)
		upEventually(t, "2 running", func() bool { return q.Running().Items == 2 })
		if p := q.Stats().Pending; p != 3 {
			t.Errorf("Stats().Pending = %d with 2 running of 5, want 3", p)
		}
		close(gate)
		upWithin(t, "Flush", q.Flush)
		if p, r := q.Stats().Pending, q.Running().Items; p != 0 || r != 0 {
			t.Errorf("after Flush: Pending %d, Running %d", p, r)
		}
	})
	t.Run("pond Submit(f).Wait and SubmitErr are Submit and Future.Wait", func(t *testing.T) {
		q := upAlloc(t, "up-map-pond-submit", wq.Unbound, 2)
		boom := errors.New("boom")
		f1 := wq.Submit(q, bg, func(context.Context) (string, error) { return "ok", nil })
		f2 := wq.Submit(q, bg, func(context.Context) (string, error) { return "", boom })
		if v, err := f1.Wait(bg); v != "ok" || err != nil {
			t.Errorf("f1 = %q, %v", v, err)
		}
		if _, err := f2.Wait(bg); !errors.Is(err, boom) {
			t.Errorf("f2 error = %v, want boom", err)
		}
		select { // Done for select, closed once the result is there
		case <-f2.Done():
		default:
			t.Errorf("Done not closed after Wait returned")
		}
		if v, err := f1.Wait(bg); v != "ok" || err != nil {
			t.Errorf("second Wait = %q, %v", v, err)
		}
	})
	t.Run("pond TrySubmit is Go or TryGo refusing on a full queue", func(t *testing.T) {
		q, gate := fill(t, "up-map-pond-try", 1, 2)
		g, _ := q.NewGroup(bg)
		if g.TryGo(func(context.Context) error { return nil }) {
			t.Errorf("TryGo on a full queue = true")
		}
		close(gate)
		upWithin(t, "Flush", q.Flush)
		if !g.TryGo(func(context.Context) error { return nil }) {
			t.Errorf("TryGo with room = false")
		}
		if err := g.Wait(); err != nil {
			t.Errorf("Group.Wait = %v (a TryGo refusal is not the group's error)", err)
		}
	})
	t.Run("pond ErrPanic is *PanicError from Group.Wait and Future.Wait", func(t *testing.T) {
		q := upAlloc(t, "up-map-pond-panic", wq.Unbound, 2)
		sentinel := errors.New("sentinel")
		_, err := wq.Submit(q, bg, func(context.Context) (int, error) { panic(sentinel) }).Wait(bg)
		var pe *wq.PanicError
		if !errors.As(err, &pe) || !errors.Is(err, sentinel) || len(pe.Stack) == 0 {
			t.Errorf("Future panic error = %v", err)
		}
		g, _ := q.NewGroup(bg)
		g.Go(func(context.Context) error { panic("group") })
		err = g.Wait()
		if !errors.As(err, &pe) || pe.Value != "group" {
			t.Errorf("Group panic error = %v", err)
		}
		upStillServes(t, q)
	})
	t.Run("pond Stop is DestroyContext and it runs the queued tasks", func(t *testing.T) {
		q, err := wq.Alloc("up-map-pond-stop", wq.Unbound, 1)
		if err != nil {
			t.Fatal(err)
		}
		var ran atomic.Int32
		gate := make(chan struct{})
		for i := 0; i < 10; i++ {
			if err := q.Go(func() { <-gate; ran.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(bg)
		cancel()
		if err := q.DestroyContext(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("DestroyContext(done ctx) on a busy queue = %v", err)
		}
		close(gate)
		upWithin(t, "Destroy", q.Destroy)
		if got := ran.Load(); got != 10 {
			t.Errorf("%d of 10 queued tasks ran", got)
		}
	})
	t.Run("pond WaitingTasks and client-go Len are Stats().Pending", func(t *testing.T) {
		q, gate := fill(t, "up-map-waiting", 1, 4)
		upEventually(t, "1 running", func() bool { return q.Running().Items == 1 })
		if p := q.Stats().Pending; p != 4 {
			t.Errorf("Pending = %d, want 4", p)
		}
		close(gate)
	})
	t.Run("conc WaitGroup: a panic comes back from Wait as an error", func(t *testing.T) {
		q := upAlloc(t, "up-map-conc-wg", wq.Unbound, 0)
		g, _ := q.NewGroup(bg)
		g.Go(func(context.Context) error { return nil })
		g.Go(func(context.Context) error { panic(7) })
		var pe *wq.PanicError
		if err := g.Wait(); !errors.As(err, &pe) || pe.Value != 7 {
			t.Errorf("Wait = %v, want *PanicError(7)", err)
		}
	})
	t.Run("conc WithMaxGoroutines and errgroup SetLimit, changed while running", func(t *testing.T) {
		q := upAlloc(t, "up-map-limit", wq.Unbound, 0)
		g, _ := q.NewGroup(bg)
		g.SetLimit(2)
		var conc upConc
		gate := make(chan struct{})
		f := func(context.Context) error { conc.enter(); <-gate; conc.leave(); return nil }
		g.Go(f)
		g.Go(f)
		if g.TryGo(f) {
			t.Errorf("TryGo past SetLimit(2) = true")
		}
		went := make(chan struct{})
		go func() { g.Go(f); close(went) }()
		select {
		case <-went:
			t.Fatalf("Go past the limit did not wait")
		case <-time.After(30 * time.Millisecond):
		}
		g.SetLimit(3) // errgroup panics here; gowq wakes the waiting Go
		upWithin(t, "Go after SetLimit(3)", func() { <-went })
		close(gate)
		if err := g.Wait(); err != nil {
			t.Errorf("Wait = %v", err)
		}
		if got := conc.max.Load(); got > 3 {
			t.Errorf("%d group functions at once, limit 3", got)
		}
	})
	t.Run("errgroup WithContext: the first error cancels ctx, Cause gives it", func(t *testing.T) {
		q := upAlloc(t, "up-map-errgroup", wq.Unbound, 0)
		g, ctx := q.NewGroup(bg)
		first := errors.New("first")
		g.Go(func(context.Context) error { return first })
		g.Go(func(ctx context.Context) error { <-ctx.Done(); return errors.New("second") })
		if err := g.Wait(); !errors.Is(err, first) {
			t.Errorf("Wait = %v, want the first error", err)
		}
		if !errors.Is(context.Cause(ctx), first) {
			t.Errorf("Cause = %v, want the first error", context.Cause(ctx))
		}
		w, _ := q.NewGroup(bg)
		w.Go(func(ctx context.Context) error { return nil })
		var inner error
		w.Go(func(context.Context) error { inner = w.Wait(); return nil })
		if err := w.Wait(); err != nil {
			t.Errorf("Wait = %v", err)
		}
		if !errors.Is(inner, wq.ErrDeadlock) {
			t.Errorf("Wait from inside a group function = %v, want ErrDeadlock", inner)
		}
	})
	t.Run("client-go Add dedup is Queue false while pending", func(t *testing.T) {
		q, gate := fill(t, "up-map-cg-dedup", 1, 3)
		var n atomic.Int32
		w := wq.NewWork(func() { n.Add(1) })
		if ok, err := q.QueueErr(w); ok || !errors.Is(err, wq.ErrQueueFull) {
			t.Errorf("QueueErr on a full queue = %v, %v; want ErrQueueFull", ok, err)
		}
		close(gate)
		upWithin(t, "Flush", q.Flush)
		hold := make(chan struct{})
		if err := q.Go(func() { <-hold }); err != nil {
			t.Fatal(err)
		}
		before := n.Load()
		if ok, err := q.QueueErr(w); !ok || err != nil {
			t.Fatalf("QueueErr = %v, %v", ok, err)
		}
		if ok, err := q.QueueErr(w); ok || err != nil {
			t.Errorf("QueueErr of a pending item = %v, %v; want false, nil", ok, err)
		}
		close(hold)
		upWithin(t, "Work.Flush", func() { w.Flush() })
		if got := n.Load() - before; got != 1 {
			t.Errorf("deduplicated item ran %d times, want 1", got)
		}
	})
	t.Run("client-go never processed concurrently is non-reentrance", func(t *testing.T) {
		q := upAlloc(t, "up-map-cg-reent", wq.Unbound, 0)
		var conc upConc
		var w *wq.Work
		w = wq.NewWork(func() { conc.enter(); time.Sleep(200 * time.Microsecond); conc.leave() })
		for i := 0; i < 300; i++ {
			q.Queue(w)
			runtime.Gosched()
		}
		upWithin(t, "Flush", func() { w.Flush() })
		if got := conc.max.Load(); got != 1 {
			t.Errorf("one Work ran %d times at once", got)
		}
	})
	t.Run("client-go AddAfter is QueueDelayed and ModDelayed", func(t *testing.T) {
		q := upAlloc(t, "up-map-cg-after", wq.Unbound, 0)
		ran := make(chan time.Time, 2)
		dw := wq.NewDelayedWork(func() { ran <- time.Now() })
		start := time.Now()
		if !q.QueueDelayed(dw, time.Hour) {
			t.Fatal("QueueDelayed = false")
		}
		if q.QueueDelayed(dw, time.Millisecond) {
			t.Errorf("QueueDelayed of an armed item = true")
		}
		q.ModDelayed(dw, 20*time.Millisecond) // re-arm: now 20 ms
		var at time.Time
		upWithin(t, "delayed item", func() { at = <-ran })
		if at.Sub(start) < 20*time.Millisecond {
			t.Errorf("delayed item ran after %v, before its 20 ms", at.Sub(start))
		}
	})
	t.Run("client-go ShutDown is CancelPending then Destroy", func(t *testing.T) {
		q, err := wq.Alloc("up-map-cg-shutdown", wq.Unbound, 1)
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		var ran atomic.Int32
		for i := 0; i < 10; i++ {
			if err := q.Go(func() { <-gate; ran.Add(1) }); err != nil {
				t.Fatal(err)
			}
		}
		upEventually(t, "1 running", func() bool { return q.Running().Items == 1 })
		if c := q.CancelPending(); c != 9 {
			t.Errorf("CancelPending = %d, want 9", c)
		}
		close(gate)
		upWithin(t, "Destroy", q.Destroy)
		if got := ran.Load(); got != 1 {
			t.Errorf("%d ran, want the 1 running", got)
		}
	})
}

// ---------------------------------------------------------------------
// 10. More attempts to break it.

// Cancelled items leave the count: CancelPending on a full queue frees
// exactly the places of the items it dropped for the parked producers.
func TestCancelPendingFreesExactlyItsPlacesForParkedProducers(t *testing.T) {
	const m, n = 2, 4
	q := upAlloc(t, "up-cancel-room", wq.Unbound, m, wq.WithMaxPending(n))
	gate := make(chan struct{})
	var ran atomic.Int32
	for i := 0; i < m+n; i++ {
		if err := q.Go(func() { <-gate; ran.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	upEventually(t, "m running", func() bool { return q.Running().Items == m })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var accepted atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := q.GoContext(ctx, func(context.Context) { <-gate; ran.Add(1) }); err == nil {
				accepted.Add(1)
			} else if !errors.Is(err, context.Canceled) {
				t.Errorf("GoContext: %v", err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if a := accepted.Load(); a != 0 {
		t.Fatalf("%d producers admitted on a full queue", a)
	}
	if c := q.CancelPending(); c != n {
		t.Fatalf("CancelPending = %d, want %d", c, n)
	}
	upEventually(t, "n admitted", func() bool { return accepted.Load() >= n })
	time.Sleep(100 * time.Millisecond)
	if a := accepted.Load(); a != n {
		t.Errorf("after CancelPending of %d, %d parked producers admitted, want %d", n, a, n)
	}
	cancel()
	upWithin(t, "producers", wg.Wait)
	close(gate)
	upWithin(t, "Flush", q.Flush)
	if got := ran.Load(); got != m+n {
		t.Errorf("ran %d, want %d (m running + n admitted after the cancel)", got, m+n)
	}
}

// The order of checks: an item already pending is the kernel's dedup,
// not ErrQueueFull, and QueueContext does not wait for it.
func TestPendingItemOnFullQueueIsDedupNotQueueFull(t *testing.T) {
	q := upAlloc(t, "up-dedup-full", wq.Unbound, 1, wq.WithMaxPending(1))
	gate := make(chan struct{})
	defer close(gate)
	if err := q.Go(func() { <-gate }); err != nil {
		t.Fatal(err)
	}
	upEventually(t, "running", func() bool { return q.Running().Items == 1 })
	w := wq.NewWork(func() {})
	if ok, err := q.QueueErr(w); !ok || err != nil {
		t.Fatalf("QueueErr = %v, %v", ok, err)
	}
	if ok, err := q.QueueErr(w); ok || err != nil {
		t.Errorf("QueueErr of the pending item on a full queue = %v, %v; want false, nil", ok, err)
	}
	upWithin(t, "QueueContext of a pending item", func() {
		if err := q.QueueContext(context.Background(), w); err != nil {
			t.Errorf("QueueContext of the pending item = %v, want nil", err)
		}
	})
}

// A storm of Queue, Cancel, CancelSync and Flush on shared items: every
// Queue that returned true is matched by exactly one run or one Cancel
// (or CancelSync) that returned true.
func TestQueueCancelFlushStormMatchesEveryQueueWithOneRunOrCancel(t *testing.T) {
	for _, qk := range upQueueKinds() {
		t.Run(qk.name, func(t *testing.T) {
			q := upAlloc(t, "up-storm-"+qk.name, qk.flags, 2, append([]wq.Option{wq.WithMaxPending(8)}, qk.opts...)...)
			const items = 8
			var runs, queued, cancelled [items]atomic.Int64
			ws := make([]*wq.Work, items)
			for i := range ws {
				ws[i] = wq.NewWork(func() { runs[i].Add(1); runtime.Gosched() })
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for p := 0; p < 6; p++ {
				wg.Add(1)
				go func(p int) {
					defer wg.Done()
					for k := 0; ; k++ {
						select {
						case <-stop:
							return
						default:
						}
						i := (p + k) % items
						switch (p + k) % 5 {
						case 0, 1:
							if q.Queue(ws[i]) {
								queued[i].Add(1)
							}
						case 2:
							if ws[i].Cancel() {
								cancelled[i].Add(1)
							}
						case 3:
							if ws[i].CancelSync() {
								cancelled[i].Add(1)
							}
						case 4:
							if p%2 == 0 {
								ws[i].Flush()
							} else {
								q.Flush()
							}
						}
					}
				}(p)
			}
			time.Sleep(time.Second)
			close(stop)
			upWithin(t, "storm", wg.Wait)
			upWithin(t, "Flush", q.Flush)
			for i := range ws {
				if q, r, c := queued[i].Load(), runs[i].Load(), cancelled[i].Load(); q != r+c {
					t.Errorf("item %d: Queue true %d times, ran %d, cancelled %d", i, q, r, c)
				}
			}
			if st := q.Stats(); st.Pending != 0 {
				t.Errorf("Pending = %d after the storm", st.Pending)
			}
		})
	}
}

// Destroy, DestroyContext and Drain at once, with producers parked and
// chained items queueing onto the queue while it drains: every call
// returns, every accepted item runs once.
func TestConcurrentDestroyDrainWithChainedWorkAllReturn(t *testing.T) {
	upQuietErrors(t)
	q, err := wq.Alloc("up-destroy-storm", wq.Unbound, 2, wq.WithMaxPending(4))
	if err != nil {
		t.Fatal(err)
	}
	var accepted, ran atomic.Int64
	gate := make(chan struct{})
	var chain func(depth int) func()
	chain = func(depth int) func() {
		return func() {
			<-gate
			ran.Add(1)
			if depth > 0 {
				// Chained work during the drain. On a full queue, GoContext
				// from an item waits for another item to end: when all m
				// running items wait so, only ctx ends it (documented).
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				if q.GoContext(ctx, func(context.Context) { chain(depth - 1)() }) == nil {
					accepted.Add(1)
				}
			}
		}
	}
	for i := 0; i < 6; i++ {
		if q.Go(chain(3)) == nil {
			accepted.Add(1)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if q.GoContext(context.Background(), func(context.Context) { chain(1)() }) == nil {
				accepted.Add(1)
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	for i := 0; i < 3; i++ {
		wg.Add(3)
		go func() { defer wg.Done(); q.Destroy() }()
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			defer cancel()
			_ = q.DestroyContext(ctx)
		}()
		go func() { defer wg.Done(); q.Drain() }()
	}
	time.Sleep(20 * time.Millisecond)
	close(gate)
	upWithin(t, "Destroy/Drain storm", wg.Wait)
	upWithin(t, "final Destroy", q.Destroy)
	if a, r := accepted.Load(), ran.Load(); a != r {
		t.Errorf("accepted %d, ran %d", a, r)
	}
}

// A function that ends with runtime.Goexit frees its group's SetLimit slot.
func TestGoexitInGroupFunctionFreesItsLimitSlot(t *testing.T) {
	q := upAlloc(t, "up-goexit-limit", wq.Unbound, 0)
	g, _ := q.NewGroup(context.Background())
	g.SetLimit(1)
	g.Go(func(context.Context) error { runtime.Goexit(); return nil })
	var second atomic.Bool
	upWithin(t, "Go after the Goexit", func() { g.Go(func(context.Context) error { second.Store(true); return nil }) })
	var err error
	upWithin(t, "Wait", func() { err = g.Wait() })
	if !errors.Is(err, wq.ErrWorkerExit) || !second.Load() {
		t.Errorf("Wait = %v, second ran %v; want ErrWorkerExit and true", err, second.Load())
	}
}

// A Submit whose ctx ends while it waits, racing a Destroy: its Future
// has one of the two refusals, and fn never runs.
func TestSubmitCtxEndRacingDestroyNeverRunsFn(t *testing.T) {
	for round := 0; round < 20; round++ {
		q, err := wq.Alloc("up-submit-race", wq.Unbound, 1, wq.WithMaxPending(1))
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		for i := 0; i < 2; i++ {
			if err := q.Go(func() { <-gate }); err != nil {
				t.Fatal(err)
			}
		}
		var ran atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		futs := make([]*wq.Future[int], 8)
		var wg sync.WaitGroup
		for i := range futs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				futs[i] = wq.Submit(q, ctx, func(context.Context) (int, error) { ran.Add(1); return 1, nil })
			}()
		}
		time.Sleep(5 * time.Millisecond)
		go cancel()
		dd := make(chan struct{})
		go func() { defer close(dd); q.Destroy() }()
		upWithin(t, "Submits", wg.Wait)
		close(gate)
		upWithin(t, "Destroy", func() { <-dd })
		for i, f := range futs {
			_, err := f.Wait(context.Background())
			if err == nil {
				continue // admitted before the cancel and the destroy
			}
			if !errors.Is(err, context.Canceled) && !errors.Is(err, wq.ErrDestroyed) {
				t.Errorf("round %d future %d: %v", round, i, err)
			}
		}
		ok := 0
		for _, f := range futs {
			if _, err := f.Wait(context.Background()); err == nil {
				ok++
			}
		}
		if int(ran.Load()) != ok {
			t.Errorf("round %d: %d futures ok, %d functions ran", round, ok, ran.Load())
		}
	}
}

// After SetMaxActive lowers max_active, the bound is the new m+n.
func TestMaxPendingBoundFollowsSetMaxActiveDown(t *testing.T) {
	q := upAlloc(t, "up-shrink", wq.Unbound, 4, wq.WithMaxPending(2))
	if err := q.SetMaxActive(1); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	defer close(gate)
	accepted := 0
	for i := 0; i < 20; i++ {
		if err := q.Go(func() { <-gate }); err == nil {
			accepted++
		} else if !errors.Is(err, wq.ErrQueueFull) {
			t.Fatalf("Go: %v", err)
		}
	}
	if accepted != 1+2 {
		t.Errorf("accepted %d after SetMaxActive(1) with WithMaxPending(2), want 3", accepted)
	}
}

// An ordered queue holds 1+n, in order; one key of QueueKeyed fills m+n.
func TestMaxPendingExactOnOrderedQueueAndOneKey(t *testing.T) {
	t.Run("ordered", func(t *testing.T) {
		q, err := wq.AllocOrdered("up-ordered-mp", wq.Unbound, wq.WithMaxPending(3))
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		var mu sync.Mutex
		var order []int
		accepted := 0
		for i := 0; i < 10; i++ {
			if q.Go(func() { <-gate; mu.Lock(); order = append(order, i); mu.Unlock() }) == nil {
				accepted++
			}
		}
		close(gate)
		upWithin(t, "Destroy", q.Destroy)
		if accepted != 4 || fmt.Sprint(order) != "[0 1 2 3]" {
			t.Errorf("ordered queue with WithMaxPending(3): accepted %d, ran %v; want 4, [0 1 2 3]", accepted, order)
		}
	})
	t.Run("one key", func(t *testing.T) {
		upQuietErrors(t)
		const m, n = 4, 2
		q := upAlloc(t, "up-onekey-mp", wq.Unbound, m, wq.WithMaxPending(n))
		gate := make(chan struct{})
		var ran atomic.Int32
		accepted := 0
		for i := 0; i < 20; i++ {
			if q.QueueKeyed(wq.Key("k"), wq.NewWork(func() { <-gate; ran.Add(1) })) {
				accepted++
			}
		}
		if accepted != m+n {
			t.Errorf("one key: accepted %d, want m+n = %d", accepted, m+n)
		}
		close(gate)
		upWithin(t, "Flush", q.Flush)
		if int(ran.Load()) != accepted {
			t.Errorf("ran %d, accepted %d", ran.Load(), accepted)
		}
	})
}

// Future.Wait from inside its own function returns ErrDeadlock, also
// after the function unlocked the worker's goroutine from its thread.
func TestFutureWaitFromItsOwnFunctionIsErrDeadlock(t *testing.T) {
	for _, qk := range upQueueKinds() {
		t.Run(qk.name, func(t *testing.T) {
			q := upAlloc(t, "up-self-wait-"+qk.name, qk.flags, 2, qk.opts...)
			var self atomic.Pointer[wq.Future[int]]
			ready := make(chan struct{})
			f := wq.Submit(q, context.Background(), func(ctx context.Context) (int, error) {
				<-ready
				runtime.UnlockOSThread()
				_, err := self.Load().Wait(ctx)
				if !errors.Is(err, wq.ErrDeadlock) {
					return 0, fmt.Errorf("self Wait = %v, want ErrDeadlock", err)
				}
				return 1, nil
			})
			self.Store(f)
			close(ready)
			var v int
			var err error
			upWithin(t, "Wait", func() { v, err = f.Wait(context.Background()) })
			if v != 1 || err != nil {
				t.Errorf("Wait = %d, %v", v, err)
			}
		})
	}
}
