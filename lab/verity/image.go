package verity

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Geometry of the image and its hash tree, in bytes unless stated.
const (
	// BlockSize is the size of a data block and of a hash block: 4096 bytes.
	BlockSize = 4096
	// HashSize is the size of one SHA-256 hash: 32 bytes.
	HashSize = sha256.Size
	// HashesPerBlock is the number of hashes packed into one hash block: 128.
	HashesPerBlock = BlockSize / HashSize
	// DefaultSize is the data size Prepare uses when asked for size 0: 64 MiB.
	DefaultSize = 64 << 20
	// MaxSize is the largest data size Prepare accepts: 1 TiB.
	MaxSize = 1 << 40
)

// seed selects the pseudo-random content of the data file. It is stored in
// the sidecar header, so changing it invalidates every cached image.
const seed uint64 = 0x676f77712d767479 // "gowq-vty"

var (
	// ErrCorrupt is matched by the *CorruptError that Verify returns when a
	// block or a hash block does not match the tree.
	ErrCorrupt = errors.New("verity: block does not match the hash tree")
	// ErrInvalidSize is returned by Prepare for a size that is negative, not a
	// multiple of BlockSize, or above MaxSize.
	ErrInvalidSize = errors.New("verity: invalid image size")
	// ErrOutOfRange is returned for a block index outside [0, Blocks()).
	ErrOutOfRange = errors.New("verity: block index out of range")
	// ErrBadBuffer is returned for a buffer of the wrong length, or one that
	// is not 4096-byte aligned where O_DIRECT needs it.
	ErrBadBuffer = errors.New("verity: bad buffer")
)

// Image is a prepared data file and its hash tree (held in memory). All
// methods are safe for concurrent use; the tree never changes after Prepare.
type Image struct {
	path     string   // data file
	treePath string   // sidecar: header + tree
	size     int64    // bytes of data
	blocks   int64    // size / BlockSize
	levels   [][]byte // levels[0] hashes data blocks; the last level is one block
	root     [HashSize]byte
	reused   bool
}

// Path returns the path of the data file.
func (img *Image) Path() string { return img.path }

// TreePath returns the path of the sidecar file that holds the header and the
// hash tree.
func (img *Image) TreePath() string { return img.treePath }

// Size returns the size of the data in bytes.
func (img *Image) Size() int64 { return img.size }

// Blocks returns the number of 4096-byte data blocks.
func (img *Image) Blocks() int64 { return img.blocks }

// Levels returns the number of hash levels (1 for up to 128 data blocks, 2
// for up to 16384, ...). Verify computes Levels()+1 SHA-256 hashes.
func (img *Image) Levels() int { return len(img.levels) }

// TreeBytes returns the size of the hash tree in bytes (all levels).
func (img *Image) TreeBytes() int64 {
	var n int64
	for _, l := range img.levels {
		n += int64(len(l))
	}
	return n
}

// Root returns the root hash: the SHA-256 hash of the single top-level hash
// block.
func (img *Image) Root() [HashSize]byte { return img.root }

// Reused reports whether Prepare found a valid image on disk and reused it
// instead of writing a new one.
func (img *Image) Reused() bool { return img.reused }

// DefaultDir returns the directory Prepare uses when given "":
// $XDG_CACHE_HOME/gowq/verity (or ~/.cache/gowq/verity), falling back to
// $TMPDIR/gowq-verity when no cache directory is known.
func DefaultDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "gowq", "verity")
	}
	return filepath.Join(os.TempDir(), "gowq-verity")
}

// Prepare returns the image of size bytes in dir, creating it when missing
// or invalid. size 0 means DefaultSize (64 MiB); otherwise size must be a
// positive multiple of BlockSize (4096) no larger than MaxSize, or Prepare
// returns ErrInvalidSize. dir "" means DefaultDir(); it is created if needed.
//
// The data file is named verity-<size>.img and the tree sidecar
// verity-<size>.img.tree. When both exist, the sidecar header matches (seed,
// geometry, and the data file's current size and mtime) and the stored tree
// hashes up to the stored root, Prepare only reads the sidecar (about 0.5 MiB
// for 64 MiB of data) and does not touch the data file. Otherwise it writes
// both files anew, which for 64 MiB takes a fraction of a second plus the
// disk's write time. Prepare blocks for the I/O; it returns file system
// errors as they come (wrapped, checkable with errors.Is).
func Prepare(dir string, size int64) (*Image, error) {
	if size == 0 {
		size = DefaultSize
	}
	if size < 0 || size%BlockSize != 0 || size > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes (want a positive multiple of %d up to %d)", ErrInvalidSize, size, BlockSize, int64(MaxSize))
	}
	if dir == "" {
		dir = DefaultDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("verity: create image directory: %w", err)
	}
	img := &Image{
		path:   filepath.Join(dir, fmt.Sprintf("verity-%d.img", size)),
		size:   size,
		blocks: size / BlockSize,
	}
	img.treePath = img.path + ".tree"
	if img.load() == nil {
		img.reused = true
		return img, nil
	}
	if err := img.generate(dir); err != nil {
		return nil, err
	}
	return img, nil
}

// levelBlocks returns the number of hash blocks of each level for a data
// file of the given number of blocks, level 0 first.
func levelBlocks(dataBlocks int64) []int64 {
	var out []int64
	n := dataBlocks
	for {
		n = (n + HashesPerBlock - 1) / HashesPerBlock
		out = append(out, n)
		if n == 1 {
			return out
		}
	}
}

// Sidecar header layout (little-endian), headerSize bytes, then the tree,
// level 0 first.
const (
	headerSize = 128
	magic      = "GWQVRTY1"
)

type header struct {
	blockSize uint32
	hashSize  uint32
	dataSize  uint64
	seed      uint64
	mtimeNs   int64
	levels    uint32
	treeLen   uint64
	root      [HashSize]byte
}

func (h *header) marshal() []byte {
	b := make([]byte, headerSize)
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], h.blockSize)
	le.PutUint32(b[12:], h.hashSize)
	le.PutUint64(b[16:], h.dataSize)
	le.PutUint64(b[24:], h.seed)
	le.PutUint64(b[32:], uint64(h.mtimeNs))
	le.PutUint32(b[40:], h.levels)
	le.PutUint64(b[48:], h.treeLen)
	copy(b[56:], h.root[:])
	return b
}

func unmarshalHeader(b []byte) (header, error) {
	var h header
	if len(b) < headerSize || string(b[:8]) != magic {
		return h, errors.New("bad sidecar magic")
	}
	le := binary.LittleEndian
	h.blockSize = le.Uint32(b[8:])
	h.hashSize = le.Uint32(b[12:])
	h.dataSize = le.Uint64(b[16:])
	h.seed = le.Uint64(b[24:])
	h.mtimeNs = int64(le.Uint64(b[32:]))
	h.levels = le.Uint32(b[40:])
	h.treeLen = le.Uint64(b[48:])
	copy(h.root[:], b[56:56+HashSize])
	return h, nil
}

// load reads and checks an existing image. Any error means "regenerate".
func (img *Image) load() error {
	st, err := os.Stat(img.path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() || st.Size() != img.size {
		return errors.New("data file has the wrong size")
	}
	raw, err := os.ReadFile(img.treePath)
	if err != nil {
		return err
	}
	h, err := unmarshalHeader(raw)
	if err != nil {
		return err
	}
	counts := levelBlocks(img.blocks)
	var want uint64
	for _, c := range counts {
		want += uint64(c) * BlockSize
	}
	switch {
	case h.blockSize != BlockSize, h.hashSize != HashSize, h.seed != seed,
		h.dataSize != uint64(img.size), h.levels != uint32(len(counts)),
		h.treeLen != want, uint64(len(raw)-headerSize) != want:
		return errors.New("sidecar header does not match")
	case h.mtimeNs != st.ModTime().UnixNano():
		return errors.New("data file changed since the tree was built")
	}
	tree := raw[headerSize:]
	levels := make([][]byte, len(counts))
	for i, c := range counts {
		levels[i] = tree[: c*BlockSize : c*BlockSize]
		tree = tree[c*BlockSize:]
	}
	if err := checkTree(levels, img.blocks, h.root); err != nil {
		return err
	}
	img.levels, img.root = levels, h.root
	return nil
}

// checkTree verifies that every hash block hashes to its entry one level up,
// that the top block hashes to root, and that unused entries are zero.
func checkTree(levels [][]byte, dataBlocks int64, root [HashSize]byte) error {
	entries := dataBlocks
	for l, lv := range levels {
		if !allZero(lv[entries*HashSize:]) {
			return fmt.Errorf("level %d: nonzero padding", l)
		}
		n := int64(len(lv) / BlockSize)
		for b := int64(0); b < n; b++ {
			sum := sha256.Sum256(lv[b*BlockSize : (b+1)*BlockSize])
			var want []byte
			if l+1 < len(levels) {
				want = levels[l+1][b*HashSize : (b+1)*HashSize]
			} else {
				want = root[:]
			}
			if !bytes.Equal(sum[:], want) {
				return fmt.Errorf("level %d block %d: hash mismatch", l, b)
			}
		}
		entries = n
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// newContent returns the deterministic source of the data file's bytes.
func newContent() *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	copy(key[8:], "gowq lab verity image")
	return rand.NewChaCha8(key)
}

// generate writes the data file and the sidecar, each under a temporary name
// renamed into place once complete and synced.
func (img *Image) generate(dir string) (err error) {
	counts := levelBlocks(img.blocks)
	levels := make([][]byte, len(counts))
	for i, c := range counts {
		levels[i] = make([]byte, c*BlockSize)
	}

	tmp, err := os.CreateTemp(dir, ".verity-*.img.tmp")
	if err != nil {
		return fmt.Errorf("verity: create data file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	src := newContent()
	chunk := make([]byte, min(img.size, 1<<20))
	var blk int64
	for off := int64(0); off < img.size; off += int64(len(chunk)) {
		c := chunk[:min(int64(len(chunk)), img.size-off)]
		if _, err = io.ReadFull(src, c); err != nil {
			return fmt.Errorf("verity: generate data: %w", err)
		}
		for b := 0; b < len(c); b += BlockSize {
			sum := sha256.Sum256(c[b : b+BlockSize])
			copy(levels[0][blk*HashSize:], sum[:])
			blk++
		}
		if _, err = tmp.Write(c); err != nil {
			return fmt.Errorf("verity: write data file: %w", err)
		}
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("verity: sync data file: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("verity: close data file: %w", err)
	}
	if err = os.Rename(tmp.Name(), img.path); err != nil {
		return fmt.Errorf("verity: install data file: %w", err)
	}
	st, err := os.Stat(img.path)
	if err != nil {
		return fmt.Errorf("verity: stat data file: %w", err)
	}

	for l := 0; l+1 < len(levels); l++ {
		for b := 0; b < len(levels[l])/BlockSize; b++ {
			sum := sha256.Sum256(levels[l][b*BlockSize : (b+1)*BlockSize])
			copy(levels[l+1][b*HashSize:], sum[:])
		}
	}
	img.levels = levels
	img.root = sha256.Sum256(levels[len(levels)-1])

	h := header{
		blockSize: BlockSize, hashSize: HashSize, dataSize: uint64(img.size),
		seed: seed, mtimeNs: st.ModTime().UnixNano(), levels: uint32(len(levels)),
		treeLen: uint64(img.TreeBytes()), root: img.root,
	}
	if err := writeSidecar(dir, img.treePath, h.marshal(), levels); err != nil {
		return err
	}
	return nil
}

func writeSidecar(dir, path string, hdr []byte, levels [][]byte) (err error) {
	tmp, err := os.CreateTemp(dir, ".verity-*.tree.tmp")
	if err != nil {
		return fmt.Errorf("verity: create tree file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bufs := append([][]byte{hdr}, levels...)
	for _, b := range bufs {
		if _, err = tmp.Write(b); err != nil {
			return fmt.Errorf("verity: write tree file: %w", err)
		}
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("verity: sync tree file: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("verity: close tree file: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("verity: install tree file: %w", err)
	}
	return nil
}

// Verify checks one data block against the tree: it hashes block, compares
// the hash with its level-0 entry, then hashes that hash block and compares
// it one level up, and so on to the root, like dm-verity's verify_io without
// the hash-block cache. It computes Levels()+1 SHA-256 hashes of 4096 bytes,
// does not allocate on success, and does not block.
//
// Verify returns nil when the block matches; a *CorruptError (matching
// ErrCorrupt, naming the block and the level that failed) when it does not; ErrOutOfRange when idx is not in [0, Blocks());
// ErrBadBuffer when len(block) != BlockSize. Safe for concurrent use.
func (img *Image) Verify(idx int64, block []byte) error {
	if idx < 0 || idx >= img.blocks {
		return fmt.Errorf("%w: block %d of %d", ErrOutOfRange, idx, img.blocks)
	}
	if len(block) != BlockSize {
		return fmt.Errorf("%w: block of %d bytes, want %d", ErrBadBuffer, len(block), BlockSize)
	}
	sum := sha256.Sum256(block)
	i := idx
	for l, lv := range img.levels {
		hb, e := i/HashesPerBlock, i%HashesPerBlock
		hashBlock := lv[hb*BlockSize : (hb+1)*BlockSize]
		if !bytes.Equal(hashBlock[e*HashSize:(e+1)*HashSize], sum[:]) {
			return &CorruptError{Block: idx, Level: l}
		}
		sum = sha256.Sum256(hashBlock)
		i = hb
	}
	if sum != img.root {
		return &CorruptError{Block: idx, Level: len(img.levels)}
	}
	return nil
}

// CorruptError is the error Verify returns for a mismatch; it matches
// ErrCorrupt with errors.Is and can be inspected with errors.As.
type CorruptError struct {
	// Block is the data block that was being verified.
	Block int64
	// Level is where the mismatch showed: 0 when the data block's hash
	// differs from its level-0 entry, l when the hash of a level l-1 hash
	// block differs from its entry in level l, Levels() when the top hash
	// block does not hash to the root.
	Level int
}

// Error describes the mismatch.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("%v: data block %d, hash level %d", ErrCorrupt, e.Block, e.Level)
}

// Unwrap returns ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }
