// Package verity supplies the workload of the wqlab `verity` scenario
// (seed 000): random 4 KiB reads from a data file whose blocks are checked
// against a SHA-256 Merkle tree, the way dm-verity checks a block device.
//
// # Image
//
// [Prepare] creates a data file of deterministic pseudo-random content and a
// hash tree laid out like dm-verity's (without a salt):
//
//   - level 0 holds the SHA-256 hash of every 4 KiB data block, packed 128
//     hashes (32 bytes each) per 4 KiB hash block, the last block padded with
//     zeros;
//   - level n+1 holds the hashes of the hash blocks of level n, packed the same
//     way;
//   - the top level has exactly one hash block, and the root hash is the
//     SHA-256 hash of that block.
//
// A 64 MiB image has 16384 data blocks, 128 level-0 hash blocks and one
// level-1 block: 516 KiB of tree, which is kept in memory. The tree is stored
// in a sidecar file next to the data file, together with a header (size,
// seed, root hash, the data file's size and mtime). A later Prepare with the
// same directory and size reuses both files without rewriting them when the
// header matches and the stored tree is self-consistent; otherwise it
// regenerates them. Files are written to a temporary name and renamed, so a
// crash never leaves a half-written image that looks valid.
//
// # Reading and verifying
//
// [Image.OpenReader] opens the data file with O_DIRECT where the filesystem
// allows it, so that every read goes to the device rather than the page
// cache, like a dm-verity target under fio with direct=1. File systems that
// refuse O_DIRECT (tmpfs before Linux 6.6 answers EINVAL) get a buffered
// reader instead, and [Reader.Direct] says which one was opened. O_DIRECT needs buffers aligned
// to 4 KiB: allocate them with [AlignedBuffer].
//
// [Image.Verify] hashes a block and walks the tree up to the root, checking
// every level. This is dm-verity's verify_io path without its hash-block
// cache (every level is re-hashed on every read), so the cost of a
// verification is fixed: 1 + levels SHA-256 computations of 4 KiB each. A
// mismatch returns an error that matches [ErrCorrupt].
//
// An [Image] and a [Reader] are safe for concurrent use: the tree is
// read-only after Prepare, and reads use pread.
package verity
