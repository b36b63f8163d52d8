package wq_test

import "syscall"

// readFD reads one byte from fd with read(2), blocking the thread.
func readFD(fd int) {
	var b [1]byte
	for {
		_, err := syscall.Read(fd, b[:])
		if err != syscall.EINTR {
			return
		}
	}
}
