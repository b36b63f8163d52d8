// Package erofs supplies the workload of the wqlab `erofs` scenario (seeds
// 001 and 003): clusters of real files compressed with LZ4, decompressed on
// demand the way EROFS decompresses a physical cluster after its read
// completes.
//
// In the kernel, the bio completion of a compressed read queues
// z_erofs_decompressqueue_work (on an UNBOUND|HIGHPRI workqueue, or on the
// per-CPU kthread_worker of seed 003), and the reader sleeps until that work
// has decompressed the pcluster into the page cache. The seeds measure the
// time from queueing that work to its start. This package provides only the
// data and the decompression step, [Corpus.Decompress]; the scenario runner
// queues it.
//
// # Corpus
//
// [Prepare] walks a source tree in lexical order (by default the Go
// installation's own source, $GOROOT/src), concatenates the contents of its
// regular files into one stream, cuts the stream into clusters of a fixed
// raw size (default 16 KiB, the last one shorter) and compresses each with
// LZ4 block compression (github.com/pierrec/lz4/v4). A cluster that does not
// shrink is stored raw, as EROFS stores incompressible pclusters. Each cluster
// keeps the CRC-32C of its raw bytes, so every decompression is checked.
// Compressed clusters are kept in memory; nothing is written to disk.
//
// EROFS itself compresses with fixed-size output (each pcluster is a whole
// number of 4 KiB blocks filled with compressed data, with 4 KiB logical
// clusters indexing into them), which needs LZ4_compress_destSize; the Go
// LZ4 library has no such mode, so this package uses fixed-size input
// instead. Decompressing and checking one 16 KiB cluster of Go source takes
// about 5 us (about 3 GB/s of output on a 2-CPU EPYC VM), the same order as
// a kernel pcluster of 4 to 16 KiB.
//
// The same arguments give the same corpus: the walk order, the cluster
// boundaries and the compressed bytes are deterministic for a given tree.
// A [Corpus] is read-only after Prepare and safe for concurrent use.
package erofs
