// Package probe is the raw wake-latency probe: two plain POSIX threads,
// written in C with no Go scheduler in the path, that hand a token through
// a futex. One waits (SCHED_FIFO or SCHED_OTHER), the other timestamps
// CLOCK_MONOTONIC and wakes it; the waiter timestamps on return. The
// distribution of those differences is the physical limit of wake-up
// latency on the machine, against which gowq's classes are measured.
package probe

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -lpthread
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <stdatomic.h>

typedef struct {
	_Atomic uint32_t word;
	_Atomic int64_t t0;
	int64_t *out;
	int n;
	int policy, prio;
	int waiter_cpu, waker_cpu;
	int64_t gap_ns;
	int err;
	_Atomic int ready;
} probe_t;

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void pin(int cpu) {
	if (cpu < 0) return;
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

static void *waiter(void *arg) {
	probe_t *p = arg;
	pin(p->waiter_cpu);
	if (p->policy != SCHED_OTHER) {
		struct sched_param sp = { .sched_priority = p->prio };
		if (sched_setscheduler(0, p->policy, &sp) != 0) {
			p->err = errno;
		}
	}
	atomic_store(&p->ready, 1);
	for (int i = 0; i < p->n; i++) {
		while (atomic_load(&p->word) == 0)
			syscall(SYS_futex, &p->word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		int64_t t1 = now_ns();
		p->out[i] = t1 - atomic_load(&p->t0);
		atomic_store(&p->word, 0);
	}
	return NULL;
}

static void *waker(void *arg) {
	probe_t *p = arg;
	pin(p->waker_cpu);
	while (!atomic_load(&p->ready)) usleep(100);
	for (int i = 0; i < p->n; i++) {
		struct timespec gap = { p->gap_ns / 1000000000LL, p->gap_ns % 1000000000LL };
		nanosleep(&gap, NULL);
		// wait until the waiter consumed the previous token
		while (atomic_load(&p->word) != 0) usleep(10);
		usleep(20); // let it go back to sleep in the futex
		atomic_store(&p->t0, now_ns());
		atomic_store(&p->word, 1);
		syscall(SYS_futex, &p->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

static int run_probe(int64_t *out, int n, int policy, int prio, int waiter_cpu, int waker_cpu, int64_t gap_ns) {
	probe_t *p = calloc(1, sizeof(probe_t));
	p->out = out; p->n = n; p->policy = policy; p->prio = prio;
	p->waiter_cpu = waiter_cpu; p->waker_cpu = waker_cpu; p->gap_ns = gap_ns;
	pthread_t a, b;
	pthread_create(&a, NULL, waiter, p);
	pthread_create(&b, NULL, waker, p);
	pthread_join(b, NULL);
	pthread_join(a, NULL);
	int err = p->err;
	free(p);
	return err;
}
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"
)

// Available reports whether the probe can run in this build: nil, because
// this file is built only with cgo.
func Available() error { return nil }

// Run measures opts.N wake-ups and returns their latencies in ns (time
// from just before futex_wake to the waiter's first instruction after
// futex_wait). It blocks for about N*(Gap+30us). Errors: invalid options,
// or the errno of sched_setscheduler (EPERM without privilege).
func Run(opts Options) ([]int64, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	out := make([]int64, opts.N)
	// The C code passes the policy straight to sched_setscheduler, so the
	// constants of options.go must be the C headers' values: an index
	// other than 0 into a one-element array fails the build.
	_ = [1]struct{}{}[Other-C.SCHED_OTHER]
	_ = [1]struct{}{}[FIFO-C.SCHED_FIFO]
	cout := (*C.int64_t)(C.malloc(C.size_t(opts.N) * 8))
	defer C.free(unsafe.Pointer(cout))
	rc := C.run_probe(cout, C.int(opts.N), C.int(opts.Policy), C.int(opts.Priority), C.int(opts.WaiterCPU), C.int(opts.WakerCPU), C.int64_t(opts.Gap))
	src := unsafe.Slice((*int64)(unsafe.Pointer(cout)), opts.N)
	copy(out, src)
	if rc != 0 {
		return out, fmt.Errorf("probe: sched_setscheduler: %w", syscall.Errno(rc))
	}
	return out, nil
}
