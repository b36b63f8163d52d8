package e2e

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pierrec/lz4/v4"
)

// BlockSize is the raw size of a container block in bytes: 16 KiB, the
// size of the lab's erofs corpus clusters.
const BlockSize = 16 << 10

// ErrCorrupt is returned (wrapped, naming the file and block) when a
// block's stored bytes do not match their SHA-256 in the hash table, or
// do not decompress to the block's raw size.
var ErrCorrupt = errors.New("e2e: block is corrupt")

// block is one stored block of a file.
type block struct {
	off    int64 // start in Container.data
	clen   uint32
	rlen   uint32
	stored bool // raw (LZ4 did not shrink it)
}

// File is one regular file of a Container.
type File struct {
	Name   string // path relative to the container's root, slash-separated
	Size   int64  // raw size in bytes
	Mode   fs.FileMode
	blocks []int // indices into Container.blocks
}

// Container is the Go rows' image: every regular file of a tree, cut
// into BlockSize blocks, each compressed with LZ4 (stored raw when that
// does not shrink it), and a one-level hash tree: the SHA-256 of every
// stored block in a table whose own SHA-256 is the root. New checks the
// table against the root once; every block read is checked against its
// table entry before it is decompressed, as dm-verity checks a block
// against its tree. It is held in memory, read-only after BuildContainer,
// and safe for concurrent use.
type Container struct {
	files  []*File
	byName map[string]*File
	data   []byte
	blocks []block
	table  []byte // SHA-256 of each stored block, back to back
	root   [sha256.Size]byte
	raw    int64
}

// BuildContainer reads every regular file under dir (walked in lexical
// order; symbolic links and other non-regular files are left out) into a
// Container. It blocks while it reads and compresses (about 5 ns per raw
// byte) and returns the file system's error, wrapped, when a file cannot
// be read.
func BuildContainer(dir string) (*Container, error) {
	c := &Container{byName: map[string]*File{}}
	var lz lz4.CompressorHC
	dst := make([]byte, lz4.CompressBlockBound(BlockSize))
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		f := &File{Name: filepath.ToSlash(rel), Size: int64(len(raw)), Mode: 0o444}
		for off := 0; off < len(raw); off += BlockSize {
			chunk := raw[off:min(off+BlockSize, len(raw))]
			b := block{off: int64(len(c.data)), rlen: uint32(len(chunk))}
			n, cerr := lz.CompressBlock(chunk, dst)
			if cerr != nil || n == 0 || n >= len(chunk) {
				b.stored = true
				c.data = append(c.data, chunk...)
			} else {
				c.data = append(c.data, dst[:n]...)
			}
			b.clen = uint32(int64(len(c.data)) - b.off)
			sum := sha256.Sum256(c.data[b.off:])
			c.table = append(c.table, sum[:]...)
			f.blocks = append(f.blocks, len(c.blocks))
			c.blocks = append(c.blocks, b)
		}
		c.raw += f.Size
		c.files = append(c.files, f)
		c.byName[f.Name] = f
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("e2e: building the container of %s: %w", dir, err)
	}
	c.root = sha256.Sum256(c.table)
	return c, nil
}

// Verify checks the hash table against the root: what a mount does once
// before it serves reads. It returns ErrCorrupt when they differ.
func (c *Container) Verify() error {
	if sha256.Sum256(c.table) != c.root {
		return fmt.Errorf("%w: hash table does not match its root", ErrCorrupt)
	}
	return nil
}

// Files returns the container's files in walk order. The slice and the
// Files are shared: do not modify them.
func (c *Container) Files() []*File { return c.files }

// File returns the file called name (slash-separated, relative), or nil.
func (c *Container) File(name string) *File { return c.byName[name] }

// RawBytes returns the total raw size of the files in bytes.
func (c *Container) RawBytes() int64 { return c.raw }

// StoredBytes returns the total size of the stored blocks in bytes.
func (c *Container) StoredBytes() int64 { return int64(len(c.data)) }

// ReadBlock checks block i of f against its SHA-256 and decompresses it
// into dst, which must hold BlockSize bytes. It returns the block's raw
// length (BlockSize for every block but possibly the last), or
// ErrCorrupt, wrapped. It does not block; about 10 us per block on a
// 2-CPU EPYC VM (SHA-256 of the stored bytes plus LZ4).
func (c *Container) ReadBlock(f *File, i int, dst []byte) (int, error) {
	if i < 0 || i >= len(f.blocks) {
		return 0, fmt.Errorf("e2e: %s: block %d of %d", f.Name, i, len(f.blocks))
	}
	bi := f.blocks[i]
	b := &c.blocks[bi]
	src := c.data[b.off : b.off+int64(b.clen)]
	sum := sha256.Sum256(src)
	if !bytes.Equal(sum[:], c.table[bi*sha256.Size:(bi+1)*sha256.Size]) {
		return 0, fmt.Errorf("%w: %s block %d: SHA-256 mismatch", ErrCorrupt, f.Name, i)
	}
	if b.stored {
		return copy(dst, src), nil
	}
	n, err := lz4.UncompressBlock(src, dst[:b.rlen])
	if err != nil || n != int(b.rlen) {
		return 0, fmt.Errorf("%w: %s block %d: decompressed %d of %d bytes (%v)", ErrCorrupt, f.Name, i, n, b.rlen, err)
	}
	return n, nil
}

// corruptBlock flips one stored byte of block i of f (tests).
func (c *Container) corruptBlock(f *File, i int) {
	b := c.blocks[f.blocks[i]]
	c.data[b.off] ^= 0xff
}
