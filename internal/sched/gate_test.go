package sched

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"
)

// BenchmarkGateReading is what the thread gate pays per thread creation:
// one reading of every thread limit (CheckThreads, as GoLocked does
// before it starts a thread).
func BenchmarkGateReading(b *testing.B) {
	for b.Loop() {
		_ = CheckThreads()
	}
}

// BenchmarkLockedThreadStart is a whole locked thread's life through the
// gate: the reading, the goroutine's start on a new thread, its exit
// (the runtime destroys the locked thread). Compare with
// BenchmarkGateReading from the same run.
func BenchmarkLockedThreadStart(b *testing.B) {
	for b.Loop() {
		done := make(chan struct{})
		if err := GoLocked(func() { close(done) }); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}

// logHandler is a slog handler that calls f for each record.
type logHandler struct{ f func() }

func (h logHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h logHandler) Handle(context.Context, slog.Record) error { h.f(); return nil }
func (h logHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h logHandler) WithGroup(string) slog.Handler             { return h }

// TestGateLogsWithoutItsLock: the gate's one-time warning that a limit
// could not be read goes to slog's default logger, user code, which may
// start threads or queue work (whose pool starts a worker through the
// gate). Its callers hold the gate's lock, and gowq's pool and slot locks
// above it: the warning must not be written under them. A handler that
// reads the gate's headroom stands for such a logger.
func TestGateLogsWithoutItsLock(t *testing.T) {
	for name, call := range map[string]func(){
		"GateHeadroom": func() { _ = GateHeadroom() },
		"CheckThreads": func() { _ = CheckThreads() },
	} {
		if !t.Run(name, func(t *testing.T) {
			gate.errOnce = sync.Once{}
			logged := make(chan struct{})
			var once sync.Once
			old := slog.Default()
			slog.SetDefault(slog.New(logHandler{func() {
				_ = GateHeadroom()
				once.Do(func() { close(logged) })
			}}))
			restore := SetGateReader(func() (int, ThreadLimit, error) {
				return math.MaxInt, ThreadLimit{}, errors.New("unreadable limit")
			})
			done := make(chan struct{})
			go func() { call(); close(done) }()
			for _, ch := range []chan struct{}{done, logged} {
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					buf := make([]byte, 1<<20)
					// No restore: it takes the gate's lock, which the
					// hung call holds.
					t.Fatalf("%s with a logger that reads the gate: hang; goroutines:\n%s", name, buf[:runtime.Stack(buf, true)])
				}
			}
			restore()
			slog.SetDefault(old)
		}) {
			break // the gate's lock is still held
		}
	}
}
