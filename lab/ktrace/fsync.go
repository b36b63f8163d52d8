package ktrace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultFsyncPeriod is the period of an FsyncLoad started with period 0.
const DefaultFsyncPeriod = 2 * time.Millisecond

// fsyncFileBytes is the size of the file an FsyncLoad rewrites, 4 KiB at
// a time.
const fsyncFileBytes = 1 << 20

// FsyncLoad is a background goroutine that writes 4 KiB to a temporary
// file and fsyncs it, once per period, so that the kernel queues its
// block-I/O completion work (kblockd, ext4/jbd2 workqueues) while a
// recording runs. A period whose fsync is still running is skipped.
type FsyncLoad struct {
	path    string
	f       *os.File
	stop    chan struct{}
	done    chan struct{}
	fsyncs  atomic.Int64
	errOnce sync.Once
	err     error // first write or fsync error; written once, read after done
	stopped atomic.Bool
}

// StartFsyncLoad creates a temporary file in dir and starts writing and
// fsyncing it every period (0 means DefaultFsyncPeriod). dir "" means
// os.TempDir(), or the user cache directory (~/.cache/gowq) when that is a
// tmpfs or ramfs, whose fsync does no I/O. It does not block. It returns
// the error of creating the file.
func StartFsyncLoad(dir string, period time.Duration) (*FsyncLoad, error) {
	if period <= 0 {
		period = DefaultFsyncPeriod
	}
	if dir == "" {
		dir = fsyncDir()
	}
	f, err := os.CreateTemp(dir, "gowq-fsync-*.dat")
	if err != nil {
		return nil, fmt.Errorf("ktrace: fsync load: %w", err)
	}
	l := &FsyncLoad{path: f.Name(), f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go l.loop(period)
	return l, nil
}

// fsyncDir picks a directory whose fsync reaches a block device.
func fsyncDir() string {
	dir := os.TempDir()
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) == nil {
		switch uint64(st.Type) {
		case uint64(unix.TMPFS_MAGIC), uint64(unix.RAMFS_MAGIC):
			if c, err := os.UserCacheDir(); err == nil {
				c = filepath.Join(c, "gowq")
				if os.MkdirAll(c, 0o755) == nil {
					return c
				}
			}
		}
	}
	return dir
}

func (l *FsyncLoad) loop(period time.Duration) {
	defer close(l.done)
	block := make([]byte, 4096)
	t := time.NewTicker(period)
	defer t.Stop()
	for i := 0; ; i++ {
		for j := range block {
			block[j] = byte(i + j)
		}
		off := int64(i%(fsyncFileBytes/len(block))) * int64(len(block))
		if _, err := l.f.WriteAt(block, off); err != nil {
			l.fail(err)
			return
		}
		if err := l.f.Sync(); err != nil {
			l.fail(err)
			return
		}
		l.fsyncs.Add(1)
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
	}
}

func (l *FsyncLoad) fail(err error) {
	l.errOnce.Do(func() { l.err = fmt.Errorf("ktrace: fsync load: %w", err) })
}

// Path returns the temporary file's path (removed by Stop).
func (l *FsyncLoad) Path() string { return l.path }

// Fsyncs returns the number of fsyncs done so far. Safe from any
// goroutine.
func (l *FsyncLoad) Fsyncs() int64 { return l.fsyncs.Load() }

// Stop ends the load, waiting for a running fsync (milliseconds), and
// removes the file. It returns the number of fsyncs done and the first
// write, fsync or removal error. Calls after the first return the count
// and nil.
func (l *FsyncLoad) Stop() (int64, error) {
	if !l.stopped.CompareAndSwap(false, true) {
		return l.fsyncs.Load(), nil
	}
	close(l.stop)
	<-l.done
	err := l.err
	err = errors.Join(err, l.f.Close(), os.Remove(l.path))
	return l.fsyncs.Load(), err
}
