package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// fuseFS is the read-only go-fuse file system of one Go row: the files
// of a Container, each block checked and decompressed on the row's
// executor while go-fuse's handler goroutine waits for it.
type fuseFS struct {
	c    *Container
	ex   Executor
	ctx  context.Context // the session's: a blocked read returns EINTR when it ends
	bufs sync.Pool       // *[]byte of BlockSize
	errs atomic.Int64    // reads answered with EIO
	// beforeRead, when set (tests), runs in the handler before a read.
	beforeRead func(ctx context.Context)
}

// dirNode is a directory of the tree.
type dirNode struct{ fs.Inode }

var _ fs.NodeGetattrer = (*dirNode)(nil)

func (d *dirNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o555
	return 0
}

// rootNode is the root directory; it builds the tree when mounted.
type rootNode struct {
	dirNode
	fsys *fuseFS
}

var _ fs.NodeOnAdder = (*rootNode)(nil)

func (r *rootNode) OnAdd(ctx context.Context) {
	for _, f := range r.fsys.c.Files() {
		parts := strings.Split(f.Name, "/")
		p := &r.Inode
		for _, dir := range parts[:len(parts)-1] {
			ch := p.GetChild(dir)
			if ch == nil {
				ch = p.NewPersistentInode(ctx, &dirNode{}, fs.StableAttr{Mode: syscall.S_IFDIR})
				p.AddChild(dir, ch, true)
			}
			p = ch
		}
		fn := &fileNode{fsys: r.fsys, f: f}
		p.AddChild(parts[len(parts)-1], p.NewPersistentInode(ctx, fn, fs.StableAttr{Mode: syscall.S_IFREG}), true)
	}
}

// fileNode is one file of the container.
type fileNode struct {
	fs.Inode
	fsys *fuseFS
	f    *File
}

var (
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
)

func (n *fileNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(n.f.Size)
	out.Blocks = (uint64(n.f.Size) + 511) / 512
	return 0
}

// Open refuses writing. It keeps no handle, and it does not ask the
// kernel to keep the page cache (no FOPEN_KEEP_CACHE), as a file system
// that must read through does not.
func (n *fileNode) Open(_ context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0 {
		return nil, 0, syscall.EROFS
	}
	return nil, 0, 0
}

// blockJob is one block's check and decompression, handed to the
// executor. Its buffer is its own: a handler that gives up waiting
// leaves the job to finish into a buffer nobody reads.
type blockJob struct {
	fsys *fuseFS
	f    *File
	i    int
	buf  *[]byte
	n    int
	err  error
	done chan struct{}
}

func (j *blockJob) run() {
	j.n, j.err = j.fsys.c.ReadBlock(j.f, j.i, *j.buf)
	close(j.done)
}

// Read serves [off, off+len(dest)): every block it overlaps is checked
// and decompressed on the executor, all at once, and the handler waits
// for them. It answers EIO for a corrupt block or when the session
// ends, and EINTR when the kernel interrupts the request.
func (n *fileNode) Read(ctx context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	fsys := n.fsys
	if fsys.beforeRead != nil {
		fsys.beforeRead(ctx)
	}
	if off >= n.f.Size || len(dest) == 0 {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), n.f.Size)
	first, last := int(off/BlockSize), int((end-1)/BlockSize)
	var one [1]*blockJob
	jobs := one[:0]
	if last > first {
		jobs = make([]*blockJob, 0, last-first+1)
	}
	for i := first; i <= last; i++ {
		j := &blockJob{fsys: fsys, f: n.f, i: i, buf: fsys.buf(), done: make(chan struct{})}
		if err := fsys.ex.Run(j.run); err != nil {
			j.err = err
			close(j.done)
		}
		jobs = append(jobs, j)
	}
	var errno syscall.Errno
	for _, j := range jobs {
		select {
		case <-j.done:
		case <-ctx.Done():
			return nil, syscall.EINTR
		case <-fsys.ctx.Done():
			// Not EINTR: the reader's libc or Go runtime would retry.
			return nil, syscall.EIO
		}
		if j.err != nil && errno == 0 {
			errno = syscall.EIO
			fsys.errs.Add(1)
		}
	}
	if errno != 0 {
		return nil, errno
	}
	w := 0
	for _, j := range jobs {
		bo := int64(j.i) * BlockSize
		from := max(off, bo) - bo
		to := min(end, bo+int64(j.n)) - bo
		if to > from {
			w += copy(dest[w:], (*j.buf)[from:to])
		}
		fsys.bufs.Put(j.buf)
	}
	return fuse.ReadResultData(dest[:w]), 0
}

func (fsys *fuseFS) buf() *[]byte {
	if b, ok := fsys.bufs.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, BlockSize)
	return &b
}

var errClosed = errors.New("e2e: session closed")
