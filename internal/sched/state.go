package sched

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// StatReader reads one thread's run state from /proc/self/task/<tid>/stat.
// It keeps the file open and re-reads it with pread at offset 0, which makes
// the kernel regenerate it (about 2-5 us a read). Not safe for concurrent
// use; Close it when the thread is gone.
type StatReader struct {
	tid int
	fd  int
	buf [512]byte
}

// OpenStat opens thread tid's stat file. The thread must belong to this
// process.
func OpenStat(tid int) (*StatReader, error) {
	fd, err := unix.Open("/proc/self/task/"+strconv.Itoa(tid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open stat of thread %d: %w", tid, err)
	}
	return &StatReader{tid: tid, fd: fd}, nil
}

// State returns the thread's state letter: 'R' running or runnable, 'S'
// sleeping, 'D' uninterruptible sleep (I/O), 'T'/'t' stopped, 'Z'/'X' dead,
// 'I' idle; or 0 and an error when it cannot be read (the thread is gone).
func (s *StatReader) State() (byte, error) {
	n, err := unix.Pread(s.fd, s.buf[:], 0)
	if err != nil {
		return 0, fmt.Errorf("read stat of thread %d: %w", s.tid, err)
	}
	// Format: "tid (comm) S ...": comm may contain ')' so take the last one.
	b := s.buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("stat of thread %d: malformed", s.tid)
	}
	return b[i+2], nil
}

// Close releases the file. It is safe to call more than once.
func (s *StatReader) Close() error {
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// Sleeping reports whether state letter st is a sleep (S or D), that is, the
// thread gave up its CPU voluntarily.
func Sleeping(st byte) bool { return st == 'S' || st == 'D' }

// ProcessAlive reports whether a thread with id tid exists in this process.
func ProcessAlive(tid int) bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid))
	return err == nil
}

// LastCPU returns the CPU thread tid of this process last ran on (field 39
// of /proc/self/task/<tid>/stat), or -1 when it cannot be read.
func LastCPU(tid int) int {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return -1
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := bytes.Fields(b[i+1:])
	// After ")": field 3 (state) is f[0]; field 39 (processor) is f[36].
	if len(f) < 37 {
		return -1
	}
	n, err := strconv.Atoi(string(f[36]))
	if err != nil {
		return -1
	}
	return n
}
