package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// DefaultBase is the directory under which sessions live.
const DefaultBase = "/run/gowq-e2e"

// Session owns everything a run mounts: its directory
// <base>/<pid>-<start time> holds the images and the mount points, so
// that a later start can tell, from the name alone, whether the process
// that made it is still alive (Cleanup). Close unmounts every mount,
// releases the loop devices and removes the directory. A Session is safe
// for concurrent use.
type Session struct {
	Dir    string
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	mounts []*mount // in mount order
	closed bool
}

// mount is one mount of a session.
type mount struct {
	dir    string
	server *fuse.Server // FUSE mounts
	loop   string       // EROFS mounts: the loop device
}

// NewSession creates a session directory under base (DefaultBase when
// ""). The session's context ends when ctx ends or Close is called; FUSE
// reads blocked in the session then return EINTR.
func NewSession(ctx context.Context, base string) (*Session, error) {
	if base == "" {
		base = DefaultBase
	}
	st, err := startTime(os.Getpid())
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(base, fmt.Sprintf("%d-%d", os.Getpid(), st))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2e: session directory: %w", err)
	}
	s := &Session{Dir: dir}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s, nil
}

// Context is the session's context.
func (s *Session) Context() context.Context { return s.ctx }

// startTime returns field 22 of /proc/<pid>/stat: the process's start
// time in clock ticks since boot, which with the pid names a process
// uniquely.
func startTime(pid int) (uint64, error) {
	st, _, err := procState(pid)
	return st, err
}

// procState returns the start time of pid and whether it is a zombie
// (exited, or exiting with a thread stuck: its session is dead).
func procState(pid int) (uint64, bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("e2e: /proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, false, fmt.Errorf("e2e: /proc/%d/stat: short", pid)
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	return st, f[0] == "Z", err
}

// sessionAlive reports whether the session directory name <pid>-<start>
// names a running process.
func sessionAlive(name string) bool {
	pidS, stS, ok := strings.Cut(name, "-")
	if !ok {
		return false
	}
	pid, err1 := strconv.Atoi(pidS)
	st, err2 := strconv.ParseUint(stS, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	cur, zombie, err := procState(pid)
	return err == nil && cur == st && !zombie
}

func (s *Session) add(m *mount) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	s.mounts = append(s.mounts, m)
	return nil
}

// MountFUSE mounts c read-only at <session>/mnt/<name> with go-fuse
// (DirectMount, no fusermount: needs root), each block checked and
// decompressed on ex. The /dev/fuse descriptor is made close-on-exec
// while syscall.ForkLock is held, so that no child (fio) inherits it: an
// orphaned child holding it would keep a dead mount's connection alive.
// It returns the mount point.
func (s *Session) MountFUSE(name string, c *Container, ex Executor) (string, error) {
	return s.mountFUSE(name, &fuseFS{c: c, ex: ex, ctx: s.ctx})
}

func (s *Session) mountFUSE(name string, fsys *fuseFS) (string, error) {
	if err := fsys.c.Verify(); err != nil {
		return "", err
	}
	dir := filepath.Join(s.Dir, "mnt", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	sec := time.Hour
	opts := &fs.Options{
		EntryTimeout: &sec,
		AttrTimeout:  &sec,
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            "gowq-e2e",
			Name:              "gowqe2e",
			AllowOther:        true,
			DirectMountFlags:  unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV,
			Options:           []string{"default_permissions"},
			// A reply to a request the kernel dropped (an aborted
			// connection at Close) is not worth a line on stderr.
			Logger: log.New(io.Discard, "", 0),
		},
	}
	rawFS := fs.NewNodeFS(&rootNode{fsys: fsys}, opts)
	syscall.ForkLock.Lock()
	server, err := fuse.NewServer(rawFS, dir, &opts.MountOptions)
	if err == nil {
		err = cloexecFUSE()
	}
	syscall.ForkLock.Unlock()
	if err != nil {
		if server != nil {
			unmount(dir)
		}
		return "", fmt.Errorf("e2e: FUSE mount at %s: %w", dir, err)
	}
	m := &mount{dir: dir, server: server}
	if err := s.add(m); err != nil {
		unmount(dir)
		return "", err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return "", fmt.Errorf("e2e: FUSE mount at %s: %w", dir, err)
	}
	return dir, nil
}

// cloexecFUSE sets FD_CLOEXEC on every descriptor of this process open
// on /dev/fuse. The caller holds syscall.ForkLock.
func cloexecFUSE() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, _ := os.Readlink("/proc/self/fd/" + e.Name()); t == "/dev/fuse" {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
				return fmt.Errorf("close-on-exec on /dev/fuse fd %d: %w", fd, err)
			}
		}
	}
	return nil
}

// MountEROFS attaches image read-only to a free loop device with
// autoclear set (the device is released when the mount goes, even if this
// process dies) and mounts it as EROFS at <session>/mnt/<name> with
// cache_strategy=disabled, so that every read of an uncached page reads
// and decompresses its physical cluster. It returns the mount point and
// the loop device.
func (s *Session) MountEROFS(name, image string) (dir, loop string, err error) {
	dir = filepath.Join(s.Dir, "mnt", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	lfd, loop, err := attachLoop(image)
	if err != nil {
		return "", "", err
	}
	// The loop fd is closed after the mount: from then on the mount
	// holds the device, and autoclear releases it at the unmount.
	defer unix.Close(lfd)
	m := &mount{dir: dir, loop: loop}
	if err := s.add(m); err != nil {
		return "", "", err
	}
	if err := unix.Mount(loop, dir, "erofs", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, "cache_strategy=disabled"); err != nil {
		return "", "", fmt.Errorf("e2e: mount -t erofs %s %s: %w", loop, dir, err)
	}
	return dir, loop, nil
}

// attachLoop binds image to a free loop device, read-only and with
// autoclear (LOOP_CONFIGURE), and returns the device's open fd.
func attachLoop(image string) (int, string, error) {
	ffd, err := unix.Open(image, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("e2e: loop backing file: %w", err)
	}
	defer unix.Close(ffd)
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("e2e: no loop device: %w", err)
	}
	defer unix.Close(ctl)
	for try := 0; try < 8; try++ {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return -1, "", fmt.Errorf("e2e: no free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		lfd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, "", fmt.Errorf("e2e: %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(ffd)}
		cfg.Info.Flags = unix.LO_FLAGS_READ_ONLY | unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:], image)
		err = unix.IoctlLoopConfigure(lfd, &cfg)
		if err == nil {
			return lfd, dev, nil
		}
		unix.Close(lfd)
		if !errors.Is(err, unix.EBUSY) {
			return -1, "", fmt.Errorf("e2e: LOOP_CONFIGURE %s: %w", dev, err)
		}
		// Taken by someone else between GET_FREE and CONFIGURE: retry.
	}
	return -1, "", errors.New("e2e: no free loop device after 8 tries")
}

// Close ends the session's context (blocked FUSE reads return EIO),
// unmounts every mount in reverse order (forced and lazy, see unmount:
// a file still open elsewhere cannot keep the mount point busy), waits up to 2 s per FUSE
// mount for its serve loops to end, and removes the session directory
// when nothing is mounted under it any more. Loop devices, set to
// autoclear, are released by the kernel when their mount goes. It
// returns every error joined; calling it again returns nil.
func (s *Session) Close() error {
	s.cancel()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ms := s.mounts
	s.mounts = nil
	s.mu.Unlock()
	var errs []error
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		if err := unmount(m.dir); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("e2e: unmount %s: %w", m.dir, err))
		}
		if m.server != nil {
			done := make(chan struct{})
			go func() { m.server.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
	}
	if left := mountsUnder(s.Dir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("e2e: %s kept: still mounted: %s", s.Dir, strings.Join(left, ", ")))
	} else if err := os.RemoveAll(s.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unmount detaches the mount at dir (MNT_DETACH: a file still open
// elsewhere cannot keep it busy) and forces it (MNT_FORCE), which for a
// FUSE mount aborts the connection: every request waiting for the
// server fails at once, also one a thread of a killed server process
// waits on, which would otherwise keep that process from ever exiting
// and the connection alive. fusectl's abort is tried first, where it is
// mounted.
func unmount(dir string) error {
	abortFUSE(dir)
	return unix.Unmount(dir, unix.MNT_FORCE|unix.MNT_DETACH)
}

// abortFUSE aborts the FUSE connection of the mount at dir through
// fusectl, when it is mounted at /sys/fs/fuse/connections, so that
// requests waiting for a dead or stuck server fail at once. Nothing
// happens for other mounts or without fusectl.
func abortFUSE(dir string) {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return
	}
	dev := uint64(unix.Minor(st.Dev)) | uint64(unix.Major(st.Dev))<<20
	f, err := os.OpenFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", dev), os.O_WRONLY, 0)
	if err != nil {
		return
	}
	f.WriteString("1")
	f.Close()
}

// mountInfo is one line of /proc/self/mountinfo.
type mountInfo struct {
	point, fstype, source string
}

func readMounts() []mountInfo {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 10 {
			continue
		}
		sep := 6
		for sep < len(fl) && fl[sep] != "-" {
			sep++
		}
		if sep+2 >= len(fl) {
			continue
		}
		out = append(out, mountInfo{point: unescapeMount(fl[4]), fstype: fl[sep+1], source: unescapeMount(fl[sep+2])})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountsUnder returns the mount points at or under dir.
func mountsUnder(dir string) []string {
	var out []string
	for _, m := range readMounts() {
		if m.point == dir || strings.HasPrefix(m.point, dir+"/") {
			out = append(out, m.point)
		}
	}
	return out
}
