package sched

import "testing"

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
