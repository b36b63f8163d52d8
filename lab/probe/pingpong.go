package probe

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -lpthread
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <stdatomic.h>

typedef struct {
	_Atomic uint32_t ping, pong;
	_Atomic int ready;
	int n;
	int a_cpu, b_cpu;
	int64_t *call;
	int64_t elapsed;
} pingpong_t;

static int64_t pp_now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void pp_pin(int cpu) {
	if (cpu < 0) return;
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	sched_setaffinity(0, sizeof(s), &s);
}

// pp_partner waits for each ping and answers with a pong, as a worker
// runs an item that completes its queuer's wait.
static void *pp_partner(void *arg) {
	pingpong_t *p = arg;
	pp_pin(p->b_cpu);
	atomic_store(&p->ready, 1);
	for (int i = 0; i < p->n; i++) {
		while (atomic_load(&p->ping) == 0)
			syscall(SYS_futex, &p->ping, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		atomic_store(&p->ping, 0);
		atomic_store(&p->pong, 1);
		syscall(SYS_futex, &p->pong, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
	return NULL;
}

// pp_driver pings (the "queue call": store and futex_wake, timed) and
// waits for the pong before the next ping, n times.
static void *pp_driver(void *arg) {
	pingpong_t *p = arg;
	pp_pin(p->a_cpu);
	while (!atomic_load(&p->ready)) usleep(100);
	int64_t start = pp_now();
	for (int i = 0; i < p->n; i++) {
		int64_t t0 = pp_now();
		atomic_store(&p->ping, 1);
		syscall(SYS_futex, &p->ping, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		p->call[i] = pp_now() - t0;
		while (atomic_load(&p->pong) == 0)
			syscall(SYS_futex, &p->pong, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
		atomic_store(&p->pong, 0);
	}
	p->elapsed = pp_now() - start;
	return NULL;
}

static int64_t run_pingpong(int64_t *call, int n, int a_cpu, int b_cpu) {
	pingpong_t *p = calloc(1, sizeof(pingpong_t));
	p->n = n; p->a_cpu = a_cpu; p->b_cpu = b_cpu; p->call = call;
	pthread_t a, b;
	pthread_create(&b, NULL, pp_partner, p);
	pthread_create(&a, NULL, pp_driver, p);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	int64_t e = p->elapsed;
	free(p);
	return e;
}
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// PingPong is the raw limit of test_workqueue's loop: two plain POSIX
// threads, one pinned to driverCPU and one to partnerCPU (-1: not
// pinned), both SCHED_OTHER. The driver stores a word and wakes the
// partner (futex_wake), timing that call, then waits in futex_wait for the
// partner's answer before the next round; the partner answers each wake
// the same way. It runs n rounds and returns their total time and each
// wake call's duration in ns. It blocks for the whole run (n round trips,
// about 5-20 us each). Errors: n < 1.
func PingPong(n, driverCPU, partnerCPU int) (elapsed time.Duration, callNs []int64, err error) {
	if n < 1 {
		return 0, nil, fmt.Errorf("probe: ping-pong rounds must be > 0, got %d", n)
	}
	c := (*C.int64_t)(C.malloc(C.size_t(n) * 8))
	defer C.free(unsafe.Pointer(c))
	e := C.run_pingpong(c, C.int(n), C.int(driverCPU), C.int(partnerCPU))
	callNs = make([]int64, n)
	copy(callNs, unsafe.Slice((*int64)(unsafe.Pointer(c)), n))
	return time.Duration(e), callNs, nil
}
