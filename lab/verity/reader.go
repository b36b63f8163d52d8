package verity

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Alignment is the buffer alignment O_DIRECT reads need here: 4096 bytes.
const Alignment = BlockSize

// AlignedBuffer returns a zeroed buffer of n bytes whose first byte is
// Alignment-aligned, as O_DIRECT reads need. It over-allocates by Alignment
// bytes on the Go heap (the Go collector does not move heap objects, so the
// alignment holds for the buffer's lifetime). It returns nil for n <= 0.
func AlignedBuffer(n int) []byte {
	if n <= 0 {
		return nil
	}
	buf := make([]byte, n+Alignment)
	off := int(-uintptr(unsafe.Pointer(&buf[0])) & (Alignment - 1))
	return buf[off : off+n : off+n]
}

func aligned(b []byte) bool {
	return uintptr(unsafe.Pointer(&b[0]))&(Alignment-1) == 0
}

// Reader reads data blocks of an Image. It is safe for concurrent use: each
// ReadBlock is one pread on a shared descriptor.
type Reader struct {
	// Direct is true when the data file was opened with O_DIRECT (reads
	// bypass the page cache) and false when the file system refused it and
	// the reader fell back to buffered reads. Set by OpenReader; read-only.
	Direct bool

	f      *os.File
	blocks int64
}

// openDirect opens name with O_DIRECT; a variable so that tests can make it
// refuse, as tmpfs before Linux 6.6 does.
var openDirect = func(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|unix.O_DIRECT, 0)
}

// OpenReader opens the data file for reading, with O_DIRECT where the file
// system allows it. When opening with O_DIRECT, or a first aligned read of
// block 0 through it, fails with EINVAL (tmpfs before Linux 6.6, some FUSE file
// systems), it falls back to a buffered descriptor and sets Reader.Direct to
// false. It returns other open errors as they come. The caller must Close
// the Reader.
func (img *Image) OpenReader() (*Reader, error) {
	f, err := openDirect(img.path)
	if err == nil {
		buf := AlignedBuffer(BlockSize)
		if _, perr := f.ReadAt(buf, 0); perr == nil {
			return &Reader{Direct: true, f: f, blocks: img.blocks}, nil
		} else if !errors.Is(perr, unix.EINVAL) {
			f.Close()
			return nil, fmt.Errorf("verity: read data file: %w", perr)
		}
		f.Close()
	} else if !errors.Is(err, unix.EINVAL) {
		return nil, fmt.Errorf("verity: open data file: %w", err)
	}
	return img.OpenBufferedReader()
}

// OpenBufferedReader opens the data file for buffered reads through the page
// cache (Reader.Direct is false). The caller must Close the Reader.
func (img *Image) OpenBufferedReader() (*Reader, error) {
	f, err := os.Open(img.path)
	if err != nil {
		return nil, fmt.Errorf("verity: open data file: %w", err)
	}
	return &Reader{f: f, blocks: img.blocks}, nil
}

// ReadBlock reads data block idx (bytes idx*4096 to idx*4096+4095) into
// buf[:BlockSize] with one pread, blocking until the read completes. buf
// must hold at least BlockSize bytes and, when Direct is true, start on an
// Alignment boundary (see AlignedBuffer); otherwise ReadBlock returns
// ErrBadBuffer. It returns ErrOutOfRange for idx outside [0, Blocks()), and
// the file system's error (wrapped) when the read fails or comes back short.
// It does not allocate on success.
func (r *Reader) ReadBlock(idx int64, buf []byte) error {
	if idx < 0 || idx >= r.blocks {
		return fmt.Errorf("%w: block %d of %d", ErrOutOfRange, idx, r.blocks)
	}
	if len(buf) < BlockSize {
		return fmt.Errorf("%w: %d bytes, want at least %d", ErrBadBuffer, len(buf), BlockSize)
	}
	if r.Direct && !aligned(buf) {
		return fmt.Errorf("%w: O_DIRECT needs a %d-byte aligned buffer", ErrBadBuffer, Alignment)
	}
	if _, err := r.f.ReadAt(buf[:BlockSize], idx*BlockSize); err != nil {
		return fmt.Errorf("verity: read block %d: %w", idx, err)
	}
	return nil
}

// Blocks returns the number of data blocks the reader can read.
func (r *Reader) Blocks() int64 { return r.blocks }

// Close closes the data file. Reads after Close fail with os.ErrClosed
// (wrapped). Close returns the error of closing the descriptor.
func (r *Reader) Close() error { return r.f.Close() }
