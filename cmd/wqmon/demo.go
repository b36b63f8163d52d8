package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gowq/wq"
	"github.com/gowq/wq/wqhttp"
)

// demo is an in-process workload with a wqhttp handler on 127.0.0.1, for
// trying wqmon without a program of one's own.
type demo struct {
	url    string
	srv    *http.Server
	queues []*wq.Workqueue
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

const demoPrefix = "/debug/wq"

// startDemo allocates the demo queues, starts the load generator and the
// HTTP server. Call stop to end both and destroy the queues.
func startDemo(stderr io.Writer) (*demo, error) {
	d := &demo{}
	specs := []struct {
		name  string
		flags wq.Flags
	}{
		{"demo_percpu", wq.PerCPU | wq.Sysfs},
		{"demo_highpri", wq.PerCPU | wq.HighPri},
		{"demo_unbound", wq.Unbound | wq.Sysfs},
		{"demo_reclaim", wq.Unbound | wq.MemReclaim},
		{"demo_rt", wq.PerCPU | wq.RT},
	}
	for _, s := range specs {
		// AllowRTFallback: a process that may not use a class still gets
		// the queue, at a lower class, and the page says why.
		q, err := wq.Alloc(s.name, s.flags, 0, wq.AllowRTFallback())
		if err != nil {
			d.destroy()
			return nil, err
		}
		if st := q.Stats(); st.Fallback {
			// The library's warning (slog) gives the whole reason; the
			// live page shows it too.
			fmt.Fprintf(stderr, "wqmon: demo: %s runs at %s, not the class it asked for (the reason is on the live page)\n", s.name, st.Policy)
		}
		d.queues = append(d.queues, q)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.destroy()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(demoPrefix+"/", wqhttp.Handler(wqhttp.Options{Prefix: demoPrefix}))
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	d.url = fmt.Sprintf("http://%s%s", ln.Addr(), demoPrefix)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "wqmon: demo server:", err)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.load(ctx)
	}()
	return d, nil
}

// load queues a mix every 10 ms until ctx ends: items that sleep (CM
// wake-ups on the per-CPU queues), short items, and now and then a CPU
// spinner past the CPU-intensive threshold.
func (d *demo) load(ctx context.Context) {
	percpu, highpri, unbound, reclaim, rt := d.queues[0], d.queues[1], d.queues[2], d.queues[3], d.queues[4]
	sleeper := func() { time.Sleep(2 * time.Millisecond) }
	short := func() {}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range 4 {
			percpu.QueueOn(0, wq.NewWork(sleeper))
			highpri.Queue(wq.NewWork(short))
			unbound.Queue(wq.NewWork(short))
			rt.Queue(wq.NewWork(short))
		}
		reclaim.Queue(wq.NewWork(sleeper))
		if i%50 == 0 {
			percpu.QueueOn(0, wq.NewWork(func() { spinCPU(15 * time.Millisecond) }))
		}
	}
}

// spinCPU burns d of the calling thread's CPU time.
func spinCPU(d time.Duration) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return
	}
	end := ts.Nano() + d.Nanoseconds()
	for ts.Nano() < end {
		if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
			return
		}
	}
}

func (d *demo) destroy() {
	for _, q := range d.queues {
		q.Destroy()
	}
}

// stop ends the load and the server, then destroys the queues (which
// waits for the items in flight).
func (d *demo) stop() {
	d.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = d.srv.Shutdown(ctx)
	cancel()
	d.wg.Wait()
	d.destroy()
}
