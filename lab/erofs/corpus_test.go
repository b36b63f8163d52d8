package erofs

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// writeTree creates a small tree and returns it with the stream Prepare
// must build from it (lexical walk order).
func writeTree(t *testing.T) (dir string, stream []byte) {
	t.Helper()
	dir = t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 40000) // incompressible: gives stored clusters
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	var text strings.Builder
	for i := 0; text.Len() < 50000; i++ {
		fmt.Fprintf(&text, "func f%d(x int) int { return x*%d + %d }\n", i, i%7, i%13)
	}
	files := []struct {
		name string
		data []byte
	}{
		// In the lexical walk order.
		{"A.bin", random},
		{"a/empty", nil},
		{"a/y/x.go", []byte(text.String())},
		{"a/z.txt", []byte("zzz\n")},
		{"b.txt", bytes.Repeat([]byte("hello, erofs\n"), 3000)},
	}
	// Create them out of order to show that the walk sorts.
	for i := len(files) - 1; i >= 0; i-- {
		p := filepath.Join(dir, files[i].name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, files[i].data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		stream = append(stream, f.data...)
	}
	// Not regular files: must not be followed or read.
	if err := os.Symlink(filepath.Join(dir, "b.txt"), filepath.Join(dir, "c-link")); err != nil {
		t.Fatal(err)
	}
	return dir, stream
}

func decompressAll(t *testing.T, c *Corpus) []byte {
	t.Helper()
	var out []byte
	dst := make([]byte, c.ClusterSize())
	for i := 0; i < c.Len(); i++ {
		n, err := c.Decompress(i, dst)
		if err != nil {
			t.Fatalf("Decompress(%d): %v", i, err)
		}
		if i < c.Len()-1 && n != c.ClusterSize() {
			t.Fatalf("cluster %d has %d bytes, want %d", i, n, c.ClusterSize())
		}
		out = append(out, dst[:n]...)
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	dir, stream := writeTree(t)
	for _, cs := range []int{MinClusterSize, DefaultClusterSize, 64 << 10} {
		t.Run(fmt.Sprint(cs), func(t *testing.T) {
			c, err := Prepare(dir, cs, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.RawBytes() != int64(len(stream)) {
				t.Fatalf("RawBytes %d, want %d", c.RawBytes(), len(stream))
			}
			if want := (len(stream) + cs - 1) / cs; c.Len() != want {
				t.Fatalf("Len %d, want %d", c.Len(), want)
			}
			if c.Files() != 5 {
				t.Fatalf("Files %d, want 5 (the symlink is not followed)", c.Files())
			}
			if got := decompressAll(t, c); !bytes.Equal(got, stream) {
				t.Fatal("decompressed stream differs from the files in walk order")
			}
			if c.CompressedBytes() >= c.RawBytes() || c.Ratio() <= 1 {
				t.Fatalf("no compression: %d -> %d bytes", c.RawBytes(), c.CompressedBytes())
			}
			// The 40000 random bytes fill whole clusters of 4 and 16 KiB.
			if cs <= 16<<10 && c.StoredClusters() == 0 {
				t.Fatal("the random file gave no stored (incompressible) cluster")
			}
			if c.StoredClusters() == c.Len() {
				t.Fatal("every cluster was stored raw")
			}
		})
	}
}

func TestMaxBytesCutsTheStream(t *testing.T) {
	dir, stream := writeTree(t)
	for _, max := range []int64{1, 4096, 40000, 40001, 100000} {
		c, err := Prepare(dir, MinClusterSize, max)
		if err != nil {
			t.Fatal(err)
		}
		if c.RawBytes() != max {
			t.Fatalf("max %d: RawBytes %d", max, c.RawBytes())
		}
		if got := decompressAll(t, c); !bytes.Equal(got, stream[:max]) {
			t.Fatalf("max %d: stream is not the prefix of the full stream", max)
		}
	}
	// 40000 bytes is exactly the first file: the second is never opened.
	c, err := Prepare(dir, MinClusterSize, 40000)
	if err != nil {
		t.Fatal(err)
	}
	if c.Files() != 1 {
		t.Fatalf("Files %d at a limit that ends with the first file, want 1", c.Files())
	}
}

func TestDeterministic(t *testing.T) {
	dir, _ := writeTree(t)
	a, err := Prepare(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Prepare(dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.data, b.data) || len(a.clusters) != len(b.clusters) {
		t.Fatal("two Prepare calls on the same tree differ")
	}
	for i := range a.clusters {
		if a.clusters[i] != b.clusters[i] {
			t.Fatalf("cluster %d differs", i)
		}
	}
}

func TestCorruptClusterDetected(t *testing.T) {
	dir, _ := writeTree(t)
	c, err := Prepare(dir, MinClusterSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, c.ClusterSize())
	var compressed, stored int = -1, -1
	for i, cl := range c.clusters {
		if cl.stored && stored < 0 {
			stored = i
		}
		if !cl.stored && compressed < 0 && cl.clen > 16 {
			compressed = i
		}
	}
	if compressed < 0 || stored < 0 {
		t.Fatalf("need a compressed and a stored cluster, got %d and %d", compressed, stored)
	}
	for _, bad := range []int{compressed, stored} {
		cl := c.clusters[bad]
		// Flip a byte in the last literal run or match, near the end.
		pos := cl.off + int64(cl.clen) - 3
		c.data[pos] ^= 0x5a
		for i := 0; i < c.Len(); i++ {
			_, err := c.Decompress(i, dst)
			if i == bad {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Decompress of corrupted cluster %d (stored %v) = %v, want ErrCorrupt", i, cl.stored, err)
				}
			} else if err != nil {
				t.Fatalf("Decompress(%d) of an intact cluster: %v", i, err)
			}
		}
		c.data[pos] ^= 0x5a
	}
	// A wrong checksum alone is caught too.
	c.clusters[0].crc ^= 1
	if _, err := c.Decompress(0, dst); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decompress with a bad CRC = %v, want ErrCorrupt", err)
	}
	c.clusters[0].crc ^= 1
	// A truncated compressed stream is caught by the decompressor or the
	// length check.
	c.clusters[compressed].clen /= 2
	if _, err := c.Decompress(compressed, dst); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decompress of a truncated cluster = %v, want ErrCorrupt", err)
	}
}

func TestDecompressBadInput(t *testing.T) {
	dir, _ := writeTree(t)
	c, err := Prepare(dir, MinClusterSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, c.Len(), 1 << 30} {
		if _, err := c.Decompress(i, make([]byte, c.ClusterSize())); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Decompress(%d) = %v, want ErrOutOfRange", i, err)
		}
	}
	for _, n := range []int{0, c.ClusterSize() - 1} {
		if _, err := c.Decompress(0, make([]byte, n)); !errors.Is(err, ErrShortBuffer) {
			t.Errorf("Decompress into %d bytes = %v, want ErrShortBuffer", n, err)
		}
	}
	// A bigger buffer is fine.
	if n, err := c.Decompress(0, make([]byte, 2*c.ClusterSize())); err != nil || n != c.ClusterSize() {
		t.Errorf("Decompress into a big buffer = %d, %v", n, err)
	}
}

func TestPrepareBadInput(t *testing.T) {
	dir, _ := writeTree(t)
	for _, cs := range []int{-1, 1, 4095, 4097, 6000, MaxClusterSize + 4096} {
		if _, err := Prepare(dir, cs, 0); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Prepare(cluster size %d) = %v, want ErrInvalidArgument", cs, err)
		}
	}
	if _, err := Prepare(dir, 0, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Prepare(max -1) = %v, want ErrInvalidArgument", err)
	}
	if _, err := Prepare(filepath.Join(dir, "b.txt"), 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Prepare(a file) = %v, want ErrInvalidArgument", err)
	}
	if _, err := Prepare(filepath.Join(dir, "missing"), 0, 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Prepare(missing dir) = %v, want ErrNotExist", err)
	}
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "zero"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(empty, 0, 0); !errors.Is(err, ErrEmpty) {
		t.Errorf("Prepare(empty tree) = %v, want ErrEmpty", err)
	}
}

func TestConcurrentDecompress(t *testing.T) {
	dir, stream := writeTree(t)
	c, err := Prepare(dir, MinClusterSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Go(func() {
			dst := make([]byte, c.ClusterSize())
			for k := 0; k < 200; k++ {
				i := (k*7 + g) % c.Len()
				n, err := c.Decompress(i, dst)
				if err == nil && !bytes.Equal(dst[:n], stream[i*c.ClusterSize():i*c.ClusterSize()+n]) {
					err = fmt.Errorf("cluster %d: wrong bytes", i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestDefaultSourceTree(t *testing.T) {
	src, err := DefaultSourceDir()
	if errors.Is(err, ErrNoSource) {
		t.Skipf("no Go installation found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := Prepare("", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if c.Dir() != src || c.RawBytes() != 1<<20 || c.Len() != (1<<20)/DefaultClusterSize {
		t.Fatalf("default corpus: dir %s, %d raw bytes, %d clusters", c.Dir(), c.RawBytes(), c.Len())
	}
	// Go source compresses well with LZ4.
	if c.Ratio() < 1.5 {
		t.Fatalf("Go source compressed only %.2fx", c.Ratio())
	}
	decompressAll(t, c)
}

func BenchmarkDecompress(b *testing.B) {
	c, err := Prepare("", 0, 8<<20)
	if errors.Is(err, ErrNoSource) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d clusters, %.2fx, %d stored", c.Len(), c.Ratio(), c.StoredClusters())
	dst := make([]byte, c.ClusterSize())
	b.SetBytes(int64(c.ClusterSize()))
	i := 0
	for b.Loop() {
		if _, err := c.Decompress(i, dst); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % c.Len()
	}
}

func BenchmarkPrepare(b *testing.B) {
	src, err := DefaultSourceDir()
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(8 << 20)
	for b.Loop() {
		if _, err := Prepare(src, 0, 8<<20); err != nil {
			b.Fatal(err)
		}
	}
}
