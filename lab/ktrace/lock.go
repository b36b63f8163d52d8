package ktrace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockFile opens the file whose flock serialises recordings of root:
// for the system's tracefs (and any other mount of a tracefs, which
// shares its state) a lock file in os.TempDir(), for any other directory
// (a fake tree in tests) the directory itself, so that no lock file is
// left behind for it.
func lockFile(root string, system bool) (*os.File, error) {
	var st unix.Statfs_t
	if system || unix.Statfs(root, &st) == nil && uint64(st.Type) == uint64(unix.TRACEFS_MAGIC) {
		return os.OpenFile(filepath.Join(os.TempDir(), "gowq-ktrace.lock"), os.O_RDONLY|os.O_CREATE, 0o666)
	}
	return os.Open(root)
}

// lock takes the exclusive flock of root's lock file, polling every 20 ms
// until ctx ends (ErrBusy). When the lock file cannot be opened at all
// (a user who may not create it, who will not be allowed into tracefs
// either; a root that does not exist) it returns nil and no error: the
// tracefs calls then fail with the clear error.
func lock(ctx context.Context, root string, system bool) (*os.File, error) {
	f, err := lockFile(root, system)
	if err != nil {
		return nil, nil
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			return f, nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			f.Close()
			return nil, fmt.Errorf("ktrace: locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w (lock %s): %w", ErrBusy, f.Name(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
